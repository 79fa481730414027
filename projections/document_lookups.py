"""Documents by what people call them: a path (and its source), the versions recorded there,
how many receipts cite each, and which were scrubbed after a position (with the scrub's basis
and time). Read from the `corpus`, `citations` and `history` read models; ids and metadata
only, never text."""

from __future__ import annotations

from typing import Any

from ledger.storage.store import Store
from ledger.usecases.ports import DocumentAtPath, ScrubbedDocument
from projections.citations import CITATIONS_TABLE
from projections.corpus import CORPUS_TABLE
from projections.history import HISTORY_TABLE

MAX_DOCUMENTS_AT_PATH = 20  # the documents one path names: readmissions and sources


class DocumentLookups:
    store: Store

    def documents_scrubbed_after(self, tenant_id: str, position: int, limit: int) -> list[ScrubbedDocument]:
        corpus = self.store.table(CORPUS_TABLE)
        rows = self.store.rows(
            "SELECT document_id, MIN(path) AS path, MIN(scrubbed_position) AS scrubbed_position "
            f"FROM {corpus} WHERE tenant_id=? AND live_from_position<=? "
            "AND (live_to_position IS NULL OR live_to_position>?) AND scrubbed_position>? "
            "GROUP BY document_id ORDER BY document_id LIMIT ?",
            (tenant_id, position, position, position, limit),
        )
        return [
            self._scrub(tenant_id, str(r["document_id"]), str(r["path"]), int(r["scrubbed_position"]))
            for r in rows
        ]

    def _scrub(self, tenant_id: str, document_id: str, path: str, at: int) -> ScrubbedDocument:
        """The scrub's basis (its corpus row) and moment (its entry in the history index)."""
        detail = self.store.rows(
            f"SELECT c.scrub_reason, h.recorded_at FROM {self.store.table(CORPUS_TABLE)} c "
            f"LEFT JOIN {self.store.table(HISTORY_TABLE)} h "
            "ON h.tenant_id=c.tenant_id AND h.position=c.scrubbed_position "
            "WHERE c.tenant_id=? AND c.document_id=? AND c.scrubbed_position=? LIMIT 1",
            (tenant_id, document_id, at),
        )
        first: Any = detail[0] if detail else {"scrub_reason": "", "recorded_at": ""}
        return ScrubbedDocument(
            document_id=document_id,
            path=path,
            position=at,
            reason=str(first["scrub_reason"] or ""),
            recorded_at=str(first["recorded_at"] or ""),
        )

    def documents_at_path(self, tenant_id: str, path: str, source: str | None) -> list[DocumentAtPath]:
        corpus = self.store.table(CORPUS_TABLE)
        where, params = "tenant_id=? AND path=?", [tenant_id, path]
        if source is not None:
            where, params = f"{where} AND source=?", [*params, source]
        rows = self.store.rows(
            "SELECT document_id, source, version_id, version, sensitivity, "
            "MIN(live_from_position) AS live_from, "
            "MAX(live_to_position) AS live_to, MAX(removed_reason) AS removed_reason, "
            "MIN(scrubbed_position) AS scrubbed_position, COUNT(*) AS parts "
            f"FROM {corpus} WHERE {where} "
            "GROUP BY document_id, source, version_id, version, sensitivity "
            "ORDER BY document_id, version LIMIT ?",
            (*params, MAX_DOCUMENTS_AT_PATH * 50),
        )
        found: dict[str, DocumentAtPath] = {}
        for row in rows:
            document_id = str(row["document_id"])
            if document_id not in found:
                if len(found) == MAX_DOCUMENTS_AT_PATH:
                    break
                found[document_id] = DocumentAtPath(
                    document_id=document_id,
                    source=str(row["source"]),
                    path=path,
                    versions=[],
                    receipts_citing=self._receipts_citing(tenant_id, document_id),
                    scrub=None,
                )
            doc = found[document_id]
            scrubbed = row["scrubbed_position"]
            if scrubbed is not None and doc.scrub is None:
                found[document_id] = doc = doc.with_scrub(
                    self._scrub(tenant_id, document_id, path, int(scrubbed))
                )
            doc.versions.append(
                {
                    "version_id": str(row["version_id"]),
                    "version": int(row["version"]),
                    "sensitivity": str(row["sensitivity"]),
                    "parts": int(row["parts"]),
                    "live_from_position": int(row["live_from"]),
                    "live_to_position": None if row["live_to"] is None else int(row["live_to"]),
                    "removed_reason": row["removed_reason"],
                }
            )
        return list(found.values())

    def _receipts_citing(self, tenant_id: str, document_id: str) -> int:
        rows = self.store.rows(
            f"SELECT COUNT(DISTINCT receipt_id) AS n FROM {self.store.table(CITATIONS_TABLE)} "
            "WHERE tenant_id=? AND document_id=?",
            (tenant_id, document_id),
        )
        return int(rows[0]["n"]) if rows else 0
