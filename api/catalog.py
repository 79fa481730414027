"""The API's write-side index: what a request must look up before it can
append — a document's current version (dedup, supersede, remove), the chunk
a citation points to (validation, bundle proofs), a receipt's position, the
tenant's live policy bundle.

It is derived from the log alone: a side table tracks the last position
indexed, and `catch_up` applies every later DocumentIngested,
DocumentRemoved, PolicyBundlePublished and RetrievalRecorded entry
idempotently, so it survives crashes, serves every worker, and picks up
entries written by other processes (the CLI, other workers).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import orjson

from ledger.application import Ledger
from ledger.store import EVENT_TOPIC_PREFIX, LEDGER_STREAM_ID, Store

HEAD_TABLE = "citeledger_api_index_head"
DOCUMENTS_TABLE = "citeledger_api_documents"
CHUNKS_TABLE = "citeledger_api_chunks"
RECEIPTS_TABLE = "citeledger_api_receipts"
POLICIES_TABLE = "citeledger_api_policies"
CLAIMS_TABLE = "citeledger_api_document_claims"
HOLDS_TABLE = "citeledger_api_legal_holds"
CLAIM_STALE_S = 120.0  # a claim older than this belonged to a worker that died mid-ingest
_INDEXED = {
    EVENT_TOPIC_PREFIX + name
    for name in (
        "DocumentIngested",
        "DocumentRemoved",
        "PolicyBundlePublished",
        "RetrievalRecorded",
        "LegalHoldPlaced",
        "LegalHoldReleased",
    )
}
_PAGE = 2_000
_CHUNK_CACHE_MAX = 100_000  # rows; cleared (not evicted one by one) when full


@dataclass(frozen=True)
class DocumentRow:
    tenant_id: str
    document_id: str
    version: int
    version_id: str
    content_sha256: str
    path: str
    sensitivity: str
    position: int
    removed: bool
    retention_days: int | None


@dataclass(frozen=True)
class ChunkRow:
    tenant_id: str
    document_id: str
    version_id: str
    chunk_id: str
    position: int
    path: str
    start_line: int
    end_line: int
    sensitivity: str
    retention_days: int | None


@dataclass(frozen=True)
class PolicyRow:
    policy_version: str
    bundle_sha256: str
    bundle_yaml: str
    position: int


class Catalog:
    def __init__(self, store: Store) -> None:
        self.store = store
        t = store.table
        store.create_tables(
            f"CREATE TABLE IF NOT EXISTS {t(HEAD_TABLE)} (id INTEGER PRIMARY KEY, position BIGINT NOT NULL)",
            f"CREATE TABLE IF NOT EXISTS {t(DOCUMENTS_TABLE)} (tenant_id TEXT NOT NULL, "
            "document_id TEXT NOT NULL, "
            "version BIGINT NOT NULL, version_id TEXT NOT NULL, "
            "content_sha256 TEXT NOT NULL, path TEXT NOT NULL, "
            "sensitivity TEXT NOT NULL, position BIGINT NOT NULL, removed INTEGER NOT NULL, "
            "retention_days INTEGER, subject_id TEXT, "
            "PRIMARY KEY (tenant_id, document_id))",
            f"CREATE TABLE IF NOT EXISTS {t(CHUNKS_TABLE)} (tenant_id TEXT NOT NULL, "
            "document_id TEXT NOT NULL, "
            "version_id TEXT NOT NULL, chunk_id TEXT NOT NULL, position BIGINT NOT NULL, path TEXT NOT NULL, "
            "start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, sensitivity TEXT NOT NULL, "
            "retention_days INTEGER, PRIMARY KEY (tenant_id, document_id, chunk_id))",
            f"CREATE TABLE IF NOT EXISTS {t(RECEIPTS_TABLE)} (receipt_id TEXT PRIMARY KEY, "
            "tenant_id TEXT NOT NULL, "
            "position BIGINT NOT NULL)",
            f"CREATE TABLE IF NOT EXISTS {t(POLICIES_TABLE)} (tenant_id TEXT PRIMARY KEY, "
            "policy_version TEXT NOT NULL, "
            "bundle_sha256 TEXT NOT NULL, bundle_yaml TEXT NOT NULL, position BIGINT NOT NULL)",
            f"CREATE TABLE IF NOT EXISTS {t(CLAIMS_TABLE)} (tenant_id TEXT NOT NULL, "
            "document_id TEXT NOT NULL, owner TEXT NOT NULL, claimed_at DOUBLE PRECISION NOT NULL, "
            "PRIMARY KEY (tenant_id, document_id))",
            # One row per (hold, target); target_kind is 'document' or 'subject'.
            f"CREATE TABLE IF NOT EXISTS {t(HOLDS_TABLE)} (tenant_id TEXT NOT NULL, hold_id TEXT NOT NULL, "
            "target_kind TEXT NOT NULL, target_id TEXT NOT NULL, position BIGINT NOT NULL, "
            "released_position BIGINT, PRIMARY KEY (tenant_id, hold_id, target_kind, target_id))",
        )
        self._lock = threading.Lock()
        self.indexed = 0
        # (tenant, document_id, chunk_id) -> row. Safe to cache: chunk rows are inserted
        # once (ON CONFLICT DO NOTHING) and never updated or deleted.
        self._chunk_cache: dict[tuple[str, str, str], ChunkRow] = {}

    # -- indexing ----------------------------------------------------------------
    def _head(self, cursor: Any) -> int:
        cursor.execute(f"SELECT position FROM {self.store.table(HEAD_TABLE)} WHERE id=1")
        row = cursor.fetchone()
        return int(row["position"]) if row else 0

    def catch_up(self, ledger: Ledger) -> int:
        """Index every entry after the shared head; returns the new head."""
        with self._lock:
            store = self.store
            with store.transaction(commit=False) as cursor:
                head = self._head(cursor)
            while True:
                rows = ledger.recorder.select_events(LEDGER_STREAM_ID, gt=head, limit=_PAGE)
                if not rows:
                    break
                wanted = [row for row in rows if row.topic in _INDEXED]
                last = int(rows[-1].originator_version)
                with store.transaction(commit=True) as cursor:
                    for row in wanted:
                        self._apply(cursor, int(row.originator_version), orjson.loads(bytes(row.state)))
                    self._advance(cursor, last)
                head = last
                if len(rows) < _PAGE:
                    break
            self.indexed = head
            return head

    def _advance(self, cursor: Any, position: int) -> None:
        store = self.store
        table = store.table(HEAD_TABLE)
        cursor.execute(
            store.sql(
                f"INSERT INTO {table} AS h (id, position) VALUES (1, "
                "?) ON CONFLICT (id) DO UPDATE SET "
                "position = CASE WHEN h.position < excluded.position THEN excluded.position "
                "ELSE h.position END"
            ),
            (position,),
        )

    def _apply(self, cursor: Any, position: int, envelope: dict[str, Any]) -> None:
        store, t, sql = self.store, self.store.table, self.store.sql
        kind, tenant, payload = envelope["type"], envelope["tenant_id"], envelope["payload"]
        if kind == "RetrievalRecorded":
            cursor.execute(
                sql(
                    f"INSERT INTO {t(RECEIPTS_TABLE)} (receipt_id, tenant_id, position) VALUES (?, ?, "
                    ""
                    "?) "
                    "ON CONFLICT (receipt_id) DO NOTHING"
                ),
                (payload["receipt_id"], tenant, position),
            )
        elif kind == "DocumentIngested":
            docs = t(DOCUMENTS_TABLE)
            cursor.execute(
                sql(
                    f"INSERT INTO {docs} AS d (tenant_id, document_id, version, version_id, "
                    "content_sha256, path, "
                    "sensitivity, position, removed, retention_days, subject_id) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?) "
                    "ON CONFLICT (tenant_id, document_id) DO UPDATE SET version=excluded.version, "
                    "version_id=excluded.version_id, content_sha256=excluded.content_sha256, "
                    "path=excluded.path, "
                    "sensitivity=excluded.sensitivity, position=excluded.position, removed=0, "
                    "retention_days=excluded.retention_days, subject_id=excluded.subject_id "
                    "WHERE d.position < excluded.position"
                ),
                (
                    tenant,
                    payload["document_id"],
                    payload["version"],
                    payload["version_id"],
                    payload["content_sha256"],
                    payload["path"],
                    payload["sensitivity"],
                    position,
                    payload.get("retention_days"),
                    payload.get("subject_id"),
                ),
            )
            for chunk in payload["chunks"]:
                locator = chunk["locator"]
                cursor.execute(
                    sql(
                        f"INSERT INTO {t(CHUNKS_TABLE)} (tenant_id, document_id, version_id, chunk_id, "
                        ""
                        "position, "
                        "path, start_line, end_line, sensitivity, retention_days) VALUES (?, ?, ?, ?, ?, "
                        "?, ?, ?, ?, ?) "
                        "ON CONFLICT (tenant_id, document_id, chunk_id) DO NOTHING"
                    ),
                    (
                        tenant,
                        payload["document_id"],
                        payload["version_id"],
                        chunk["chunk_id"],
                        position,
                        payload["path"],
                        locator["start_line"],
                        locator["end_line"],
                        payload["sensitivity"],
                        payload.get("retention_days"),
                    ),
                )
        elif kind == "DocumentRemoved":
            docs = t(DOCUMENTS_TABLE)
            cursor.execute(
                sql(
                    f"UPDATE {docs} SET removed=1, "
                    "position=? WHERE tenant_id=? AND document_id=? AND position < ?"
                ),
                (position, tenant, payload["document_id"], position),
            )
        elif kind == "PolicyBundlePublished":
            pol = t(POLICIES_TABLE)
            cursor.execute(
                sql(
                    f"INSERT INTO {pol} AS p (tenant_id, policy_version, bundle_sha256, bundle_yaml, "
                    ""
                    "position) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant_id) DO UPDATE SET "
                    "policy_version=excluded.policy_version, bundle_sha256=excluded.bundle_sha256, "
                    "bundle_yaml=excluded.bundle_yaml, "
                    "position=excluded.position WHERE p.position < excluded.position"
                ),
                (
                    tenant,
                    payload["policy_version"],
                    payload["bundle_sha256"],
                    payload["bundle_yaml"],
                    position,
                ),
            )
        elif kind == "LegalHoldPlaced":
            targets = [("document", d) for d in payload.get("document_ids", [])] + [
                ("subject", d) for d in payload.get("subject_ids", [])
            ]
            for target_kind, target_id in targets:
                cursor.execute(
                    sql(
                        f"INSERT INTO {t(HOLDS_TABLE)} "
                        "(tenant_id, hold_id, target_kind, target_id, position) VALUES (?, ?, ?, ?, ?) "
                        "ON CONFLICT (tenant_id, hold_id, target_kind, target_id) DO NOTHING"
                    ),
                    (tenant, payload["hold_id"], target_kind, target_id, position),
                )
        elif kind == "LegalHoldReleased":
            cursor.execute(
                sql(
                    f"UPDATE {t(HOLDS_TABLE)} SET released_position=? "
                    "WHERE tenant_id=? AND hold_id=? AND released_position IS NULL"
                ),
                (position, tenant, payload["hold_id"]),
            )
        _ = store

    # -- legal holds -------------------------------------------------------------------
    def active_holds(self, tenant: str, target_kind: str, target_id: str) -> list[str]:
        """Ids of the unreleased holds on one document or data subject."""
        with self.store.transaction(commit=False) as cursor:
            cursor.execute(
                self.store.sql(
                    f"SELECT DISTINCT hold_id FROM {self.store.table(HOLDS_TABLE)} WHERE tenant_id=? "
                    "AND target_kind=? AND target_id=? AND released_position IS NULL ORDER BY hold_id"
                ),
                (tenant, target_kind, target_id),
            )
            return [row["hold_id"] for row in cursor.fetchall()]

    def hold_exists(self, tenant: str, hold_id: str) -> tuple[bool, bool]:
        """(exists, still active) for a hold id of this tenant."""
        with self.store.transaction(commit=False) as cursor:
            cursor.execute(
                self.store.sql(
                    f"SELECT MIN(CASE WHEN released_position IS NULL THEN 1 ELSE 0 END) AS released, "
                    f"COUNT(*) AS n FROM {self.store.table(HOLDS_TABLE)} WHERE tenant_id=? AND hold_id=?"
                ),
                (tenant, hold_id),
            )
            row = cursor.fetchone()
        count = int(row["n"]) if row else 0
        return count > 0, bool(count and row["released"] == 1)

    def held_scopes(self, tenant: str) -> frozenset[str]:
        """Expiry-bucket scopes retention must spare: held documents and `subject.<id>`."""
        with self.store.transaction(commit=False) as cursor:
            cursor.execute(
                self.store.sql(
                    f"SELECT DISTINCT target_kind, target_id FROM {self.store.table(HOLDS_TABLE)} "
                    "WHERE tenant_id=? AND released_position IS NULL"
                ),
                (tenant,),
            )
            return frozenset(
                row["target_id"] if row["target_kind"] == "document" else f"subject.{row['target_id']}"
                for row in cursor.fetchall()
            )

    def documents_of_subject(self, tenant: str, subject_id: str) -> list[str]:
        """Documents whose latest version carries `subject_id`."""
        with self.store.transaction(commit=False) as cursor:
            cursor.execute(
                self.store.sql(
                    f"SELECT document_id FROM {self.store.table(DOCUMENTS_TABLE)} "
                    "WHERE tenant_id=? AND subject_id=? ORDER BY document_id"
                ),
                (tenant, subject_id),
            )
            return [row["document_id"] for row in cursor.fetchall()]

    def tenants(self) -> list[str]:
        """Every tenant with a document or receipt (for the retention sweep)."""
        with self.store.transaction(commit=False) as cursor:
            cursor.execute(
                f"SELECT tenant_id FROM {self.store.table(DOCUMENTS_TABLE)} UNION "
                f"SELECT tenant_id FROM {self.store.table(RECEIPTS_TABLE)}"
            )
            return sorted(row["tenant_id"] for row in cursor.fetchall())

    # -- cross-worker document claims ------------------------------------------------
    class Busy(RuntimeError):
        """Another worker holds the document's claim."""

    @contextmanager
    def document_claim(self, tenant: str, document_id: str, wait_s: float = 2.0) -> Iterator[None]:
        """Exclusive, across every worker process, for reading a document's current version and
        appending its next one. Without it two workers ingesting a changed file at once could
        both read version N and both record version N+1. The claim is a row under the table's
        primary key (the database is the arbiter); a worker that finds it taken waits up to
        `wait_s`, then raises `Catalog.Busy` (the route answers 409, retryable). A claim left
        by a worker that died is taken over after `CLAIM_STALE_S`."""
        store, table = self.store, self.store.table(CLAIMS_TABLE)
        owner = uuid.uuid4().hex
        deadline = time.monotonic() + wait_s
        while True:
            now = time.time()
            with store.transaction(commit=True) as cursor:
                cursor.execute(
                    store.sql(
                        f"INSERT INTO {table} AS c (tenant_id, document_id, owner, claimed_at) "
                        "VALUES (?, ?, ?, ?) ON CONFLICT (tenant_id, document_id) DO UPDATE SET "
                        "owner=excluded.owner, claimed_at=excluded.claimed_at WHERE c.claimed_at < ?"
                    ),
                    (tenant, document_id, owner, now, now - CLAIM_STALE_S),
                )
                won = store.rowcount(cursor) == 1
            if won:
                break
            if time.monotonic() >= deadline:
                raise Catalog.Busy(document_id)
            time.sleep(0.02)
        try:
            yield
        finally:
            with store.transaction(commit=True) as cursor:
                cursor.execute(
                    store.sql(f"DELETE FROM {table} WHERE tenant_id=? AND document_id=? AND owner=?"),
                    (tenant, document_id, owner),
                )

    # -- lookups -------------------------------------------------------------------
    def _one(self, statement: str, params: tuple[Any, ...]) -> Any:
        with self.store.transaction(commit=False) as cursor:
            cursor.execute(self.store.sql(statement), params)
            return cursor.fetchone()

    def document(self, tenant: str, document_id: str) -> DocumentRow | None:
        row = self._one(
            f"SELECT * FROM {self.store.table(DOCUMENTS_TABLE)} WHERE tenant_id=? AND document_id=?",
            (tenant, document_id),
        )
        if row is None:
            return None
        return DocumentRow(
            tenant_id=row["tenant_id"],
            document_id=row["document_id"],
            version=int(row["version"]),
            version_id=row["version_id"],
            content_sha256=row["content_sha256"],
            path=row["path"],
            sensitivity=row["sensitivity"],
            position=int(row["position"]),
            removed=bool(row["removed"]),
            retention_days=row["retention_days"],
        )

    def chunks(self, tenant: str, refs: list[tuple[str, str]]) -> dict[tuple[str, str], ChunkRow]:
        found, missing = self._cached_chunks(tenant, refs)
        if missing:
            with self.store.transaction(commit=False) as cursor:
                self._select_chunks(cursor, tenant, missing, found)
        return found

    def retrieval_context(
        self, tenant: str, refs: list[tuple[str, str]]
    ) -> tuple[dict[tuple[str, str], ChunkRow], PolicyRow | None]:
        """The cited chunks and the tenant's live policy, in one read transaction.

        Chunk rows never change once indexed (a new version has new chunk ids), so
        they are cached in the process; the policy is read every time, because
        another worker may have published a new one a moment ago."""
        found, missing = self._cached_chunks(tenant, refs)
        with self.store.transaction(commit=False) as cursor:
            if missing:
                self._select_chunks(cursor, tenant, missing, found)
            cursor.execute(
                self.store.sql(f"SELECT * FROM {self.store.table(POLICIES_TABLE)} WHERE tenant_id=?"),
                (tenant,),
            )
            row = cursor.fetchone()
        policy = (
            PolicyRow(row["policy_version"], row["bundle_sha256"], row["bundle_yaml"], int(row["position"]))
            if row is not None
            else None
        )
        return found, policy

    def _cached_chunks(
        self, tenant: str, refs: list[tuple[str, str]]
    ) -> tuple[dict[tuple[str, str], ChunkRow], list[tuple[str, str]]]:
        found: dict[tuple[str, str], ChunkRow] = {}
        missing: list[tuple[str, str]] = []
        cache = self._chunk_cache
        for ref in sorted(set(refs)):
            row = cache.get((tenant, *ref))
            if row is None:
                missing.append(ref)
            else:
                found[ref] = row
        return found, missing

    def _select_chunks(
        self,
        cursor: Any,
        tenant: str,
        unique: list[tuple[str, str]],
        found: dict[tuple[str, str], ChunkRow],
    ) -> None:
        cache = self._chunk_cache
        if len(cache) > _CHUNK_CACHE_MAX:
            cache.clear()
        for start in range(0, len(unique), 100):
            part = unique[start : start + 100]
            where = " OR ".join(["(document_id=? AND chunk_id=?)"] * len(part))
            params: list[Any] = [tenant]
            for document_id, chunk_id in part:
                params += [document_id, chunk_id]
            cursor.execute(
                self.store.sql(
                    f"SELECT * FROM {self.store.table(CHUNKS_TABLE)} WHERE tenant_id=? AND ({where})"
                ),
                tuple(params),
            )
            for row in cursor.fetchall():
                chunk = ChunkRow(
                    tenant_id=row["tenant_id"],
                    document_id=row["document_id"],
                    version_id=row["version_id"],
                    chunk_id=row["chunk_id"],
                    position=int(row["position"]),
                    path=row["path"],
                    start_line=int(row["start_line"]),
                    end_line=int(row["end_line"]),
                    sensitivity=row["sensitivity"],
                    retention_days=row["retention_days"],
                )
                found[(chunk.document_id, chunk.chunk_id)] = chunk
                cache[(tenant, chunk.document_id, chunk.chunk_id)] = chunk

    def receipt_position(self, tenant: str, receipt_id: str) -> int | None:
        row = self._one(
            f"SELECT position FROM {self.store.table(RECEIPTS_TABLE)} WHERE receipt_id=? AND tenant_id=?",
            (receipt_id, tenant),
        )
        return int(row["position"]) if row else None

    def policy(self, tenant: str) -> PolicyRow | None:
        row = self._one(
            f"SELECT * FROM {self.store.table(POLICIES_TABLE)} WHERE tenant_id=?",
            (tenant,),
        )
        if row is None:
            return None
        return PolicyRow(
            row["policy_version"], row["bundle_sha256"], row["bundle_yaml"], int(row["position"])
        )
