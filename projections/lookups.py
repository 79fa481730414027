"""The write path's lookups (`ledger.usecases.ports.WriteLookups`), served from
read models the projection runner maintains: documents, policies and holds
(`write_side`), chunks (`corpus`), receipt positions (`receipts`).

Hot lookups come from memory: receipt entries never change once recorded, and
chunks are cached per document until this process records its next version (a
worker that missed another process's newer version answers with an older
version holding the very same text: ids are derived from content); the live policy is cached and refreshed
from the commits this process sees (and re-read after a short time for
commits of other processes). `refresh()` catches the write-side read models
up with the log before a decision that must see every earlier entry.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from ledger.domain.entries import RecordedEvent, with_continuations
from ledger.domain.fields import MAX_TARGET_ROOTS
from ledger.storage.store import LEDGER_STREAM_ID, Store
from ledger.usecases.ports import (
    ChunkState,
    ChunkVersion,
    DocumentState,
    PolicyState,
    ReceiptRecord,
)
from projections.corpus import CORPUS_TABLE, chunk_state
from projections.document_lookups import DocumentLookups
from projections.history import HISTORY_TABLE
from projections.receipt_index import RECEIPTS_TABLE
from projections.rows import from_row
from projections.runner import ProjectionRunner
from projections.writeside import DOCUMENTS_TABLE, HOLDS_TABLE, POLICIES_TABLE

WRITE_PATH_PROJECTIONS = ("write_side", "corpus", "receipts")
POLICY_TTL_S = 1.0  # how stale a policy published by another process may be
_CACHE_MAX = 100_000  # rows per cache; cleared (not evicted one by one) when full
_ENTRY_CACHE_MAX = 20_000  # receipt entries (a few KB each)


class ProjectedLookups(DocumentLookups):
    def __init__(
        self, store: Store, runner: ProjectionRunner, read_entry: Callable[[int], RecordedEvent | None]
    ) -> None:
        self.store = store
        self.runner = runner
        self.read_entry = read_entry
        # Signed receipt entries are immutable (scrubbing destroys keys, never bytes): a hit
        # never goes stale, so reads of recent receipts need no database at all.
        self._receipt_entries: dict[tuple[str, str], RecordedEvent] = {}
        # (tenant, document) -> chunk id -> the chunk in the newest version that holds it;
        # dropped when this process records a new version or removal of the document.
        self._chunks: dict[tuple[str, str], dict[str, ChunkState]] = {}  # per document
        self._chunk_count = 0  # the rows in `_chunks`, which _CACHE_MAX bounds
        self._policies: dict[str, tuple[float, PolicyState | None]] = {}
        self._lock = threading.Lock()

    # -- following commits ------------------------------------------------------------
    def observe(self, committed: Sequence[tuple[int, RecordedEvent]]) -> None:
        """Commit listener: remember what this process has just written."""
        events = [event for _, event in committed]
        for event in events:
            event_type = event.type
            if event_type == "RetrievalRecorded":
                # Its continuations were committed with it, right after it.
                event = with_continuations(event, lambda a, b: [e for e in events if a <= e.position <= b])
                self._remember_entry(event.tenant_id, event.payload["receipt_id"], event)
            elif event_type == "PolicyBundlePublished":
                state = from_row(PolicyState, event.payload, position=event.position)
                self._policies[event.tenant_id] = (time.monotonic(), state)
            elif event_type in ("DocumentIngested", "DocumentContinued", "DocumentRemoved"):
                dropped = self._chunks.pop((event.tenant_id, event.payload["document_id"]), {})
                self._chunk_count -= len(dropped)
            elif event_type == "RetentionScrubbed":
                self._chunks.clear()  # cached sealed texts may now be gone
                self._chunk_count = 0

    def refresh(self) -> None:
        self.runner.catch_up(names=WRITE_PATH_PROJECTIONS)

    # -- lookups ---------------------------------------------------------------------
    def document(self, tenant_id: str, document_id: str) -> DocumentState | None:
        return self.documents(tenant_id, [document_id]).get(document_id)

    def documents(self, tenant_id: str, document_ids: Sequence[str]) -> dict[str, DocumentState]:
        wanted = sorted(set(document_ids))
        found: dict[str, DocumentState] = {}
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            rows = self.store.rows(
                f"SELECT * FROM {self.store.table(DOCUMENTS_TABLE)} WHERE tenant_id=? "
                f"AND document_id IN ({', '.join('?' * len(part))})",
                (tenant_id, *part),
            )
            for row in rows:
                found[row["document_id"]] = from_row(DocumentState, row)
        return found

    def chunks(self, tenant_id: str, refs: list[tuple[str, str]]) -> dict[tuple[str, str], ChunkState]:
        """Each (document, chunk) as in the newest version of its document that holds it
        (chunk ids are derived from content, so an unchanged section is in several)."""
        found: dict[tuple[str, str], ChunkState] = {}
        missing = []
        for ref in sorted(set(refs)):
            cached = self._chunks.get((tenant_id, ref[0]), {}).get(ref[1])
            if cached is None:
                missing.append(ref)
            else:
                found[ref] = cached
        if not missing:
            return found
        if self._chunk_count > _CACHE_MAX:
            self._chunks.clear()
            self._chunk_count = 0
        for start in range(0, len(missing), 100):
            part = missing[start : start + 100]
            wanted = set(part)
            documents = sorted({document for document, _ in part})
            chunk_ids = sorted({chunk_id for _, chunk_id in part})
            # Two IN lists, not an OR of pairs: with two or more pairs SQLite took the OR for a
            # scan of the tenant's corpus (20 ms a read at 1M entries), while IN lists use the
            # (tenant, document, chunk) index on both stores. The few cross pairs are dropped below.
            rows = self._chunk_rows(
                f"tenant_id=? AND document_id IN ({', '.join('?' * len(documents))}) "
                f"AND chunk_id IN ({', '.join('?' * len(chunk_ids))})",
                (tenant_id, *documents, *chunk_ids),
            )
            # Oldest first, so the newest version's row is the one left in `found`. Sorted here,
            # not by SQL: an ORDER BY on the position made SQLite walk the tenant's whole corpus
            # by primary key instead of using the chunk index (50-230 ms at 30k chunk rows).
            for chunk in sorted(rows, key=lambda row: row.position):
                if (chunk.document_id, chunk.chunk_id) not in wanted:
                    continue
                found[(chunk.document_id, chunk.chunk_id)] = chunk
                of_document = self._chunks.setdefault((tenant_id, chunk.document_id), {})
                self._chunk_count += chunk.chunk_id not in of_document
                of_document[chunk.chunk_id] = chunk
        return found

    def chunk_in_version(
        self, tenant_id: str, document_id: str, chunk_id: str, version_id: str
    ) -> ChunkState | None:
        """The chunk as recorded in one given version of its document."""
        rows = self._chunk_rows(
            "tenant_id=? AND document_id=? AND chunk_id=? AND version_id=?",
            (tenant_id, document_id, chunk_id, version_id),
        )
        return rows[0] if rows else None

    def _chunk_rows(self, where: str, params: tuple[Any, ...]) -> list[ChunkState]:
        rows = self.store.rows(
            "SELECT tenant_id, document_id, version_id, chunk_id, live_from_position, path, "
            "start_line, end_line, sensitivity, retention_days, text, heading_path, source "
            f"FROM {self.store.table(CORPUS_TABLE)} WHERE {where}",
            params,
        )
        return [chunk_state(row) for row in rows]

    def erased_documents(self, tenant_id: str) -> tuple[frozenset[str], frozenset[str]]:
        rows = self.store.rows(
            f"SELECT DISTINCT document_id, content_sha256 FROM {self.store.table(CORPUS_TABLE)} "
            "WHERE tenant_id=? AND scrub_reason='erasure_request'",
            (tenant_id,),
        )
        return frozenset(r["document_id"] for r in rows), frozenset(r["content_sha256"] for r in rows)

    def documents_of_sources(self, tenant_id: str, sources: Sequence[str]) -> dict[str, str]:
        names = list(dict.fromkeys(sources))[:MAX_TARGET_ROOTS]
        if not names:
            return {}
        rows = self.store.rows(
            f"SELECT DISTINCT document_id, source FROM {self.store.table(CORPUS_TABLE)} "
            f"WHERE tenant_id=? AND source IN ({', '.join('?' * len(names))})",
            (tenant_id, *names),
        )
        return {row["document_id"]: row["source"] for row in rows}

    def source_documents(self, tenant_id: str, source: str) -> dict[str, str]:
        """Path -> document id of the tenant's live (not removed) documents from `source`."""
        rows = self.store.rows(
            f"SELECT DISTINCT path, document_id FROM {self.store.table(CORPUS_TABLE)} "
            "WHERE tenant_id=? AND source=? AND live_to_position IS NULL ORDER BY path, document_id",
            (tenant_id, source),
        )
        return {row["path"]: row["document_id"] for row in rows}

    def policy_version(self, tenant_id: str) -> str | None:
        """The tenant's live policy version as this process last saw it: memory only, so
        every response can carry it without a database read on the event loop."""
        cached = self._policies.get(tenant_id)
        return cached[1].policy_version if cached is not None and cached[1] is not None else None

    def load_policies(self) -> None:
        """Refresh every tenant's live policy from the read model (the follower calls this)."""
        rows = self.store.rows(
            f"SELECT tenant_id, policy_version, bundle_sha256, bundle_yaml, position "
            f"FROM {self.store.table(POLICIES_TABLE)}",
            (),
        )
        now = time.monotonic()
        for row in rows:
            state = from_row(PolicyState, row)
            cached = self._policies.get(row["tenant_id"])
            if cached is None or cached[1] is None or state.position >= cached[1].position:
                self._policies[row["tenant_id"]] = (now, state)

    def live_policy(self, tenant_id: str) -> PolicyState | None:
        cached = self._policies.get(tenant_id)
        if cached is not None and time.monotonic() - cached[0] < POLICY_TTL_S:
            return cached[1]
        rows = self.store.rows(
            f"SELECT * FROM {self.store.table(POLICIES_TABLE)} WHERE tenant_id=?", (tenant_id,)
        )
        state = from_row(PolicyState, rows[0]) if rows else None
        if cached is None or state is None or cached[1] is None or state.position >= cached[1].position:
            self._policies[tenant_id] = (time.monotonic(), state)
            return state
        return cached[1]

    def active_holds(self, tenant_id: str, target_kind: str, target_id: str) -> list[str]:
        rows = self.store.rows(
            f"SELECT DISTINCT hold_id FROM {self.store.table(HOLDS_TABLE)} WHERE tenant_id=? "
            "AND target_kind=? AND target_id=? AND released_position IS NULL ORDER BY hold_id",
            (tenant_id, target_kind, target_id),
        )
        return [row["hold_id"] for row in rows]

    def hold(self, tenant_id: str, hold_id: str) -> tuple[bool, bool]:
        rows = self.store.rows(
            f"SELECT released_position FROM {self.store.table(HOLDS_TABLE)} WHERE tenant_id=? AND hold_id=?",
            (tenant_id, hold_id),
        )
        return bool(rows), any(row["released_position"] is None for row in rows)

    def held_scopes(self, tenant_id: str) -> frozenset[str]:
        rows = self.store.rows(
            f"SELECT DISTINCT target_kind, target_id FROM {self.store.table(HOLDS_TABLE)} "
            "WHERE tenant_id=? AND released_position IS NULL",
            (tenant_id,),
        )
        return frozenset(
            row["target_id"] if row["target_kind"] == "document" else f"subject.{row['target_id']}"
            for row in rows
        )

    def documents_of_subject(self, tenant_id: str, subject_id: str) -> list[str]:
        rows = self.store.rows(
            f"SELECT document_id FROM {self.store.table(DOCUMENTS_TABLE)} "
            "WHERE tenant_id=? AND subject_id=? ORDER BY document_id",
            (tenant_id, subject_id),
        )
        return [row["document_id"] for row in rows]

    def tenants(self) -> list[str]:
        rows = self.store.rows(
            f"SELECT tenant_id FROM {self.store.table(DOCUMENTS_TABLE)} UNION "
            f"SELECT tenant_id FROM {self.store.table(RECEIPTS_TABLE)}",
            (),
        )
        return sorted(row["tenant_id"] for row in rows)

    def receipt_position(self, tenant_id: str, receipt_id: str) -> int | None:
        rows = self.store.rows(
            f"SELECT position FROM {self.store.table(RECEIPTS_TABLE)} WHERE tenant_id=? AND receipt_id=?",
            (tenant_id, receipt_id),
        )
        # Reads never write: an entry of another process shows up within the lag.
        return int(rows[0]["position"]) if rows else None

    def cached_receipt(self, tenant_id: str, receipt_id: str) -> RecordedEvent | None:
        """The receipt's entry if this process holds it in memory (never touches the database)."""
        return self._receipt_entries.get((tenant_id, receipt_id))

    def receipt(self, tenant_id: str, receipt_id: str) -> RecordedEvent | None:
        cached = self.cached_receipt(tenant_id, receipt_id)
        if cached is not None:
            return cached
        position = self.receipt_position(tenant_id, receipt_id)
        event = self.read_entry(position) if position is not None else None
        if event is None or event.tenant_id != tenant_id or event.type != "RetrievalRecorded":
            return None
        event = self._whole(event)
        self._remember_entry(tenant_id, receipt_id, event)
        return event

    def _whole(self, event: RecordedEvent) -> RecordedEvent:
        """A receipt head with its continuation entries (`RecordedEvent.payload` then reads
        the whole receipt)."""

        def read(first: int, last: int) -> list[RecordedEvent]:
            found = [self.read_entry(position) for position in range(first, last + 1)]
            return [e for e in found if e is not None]

        return with_continuations(event, read)

    def receipt_with_replays(
        self, tenant_id: str, receipt_id: str
    ) -> tuple[RecordedEvent, list[tuple[str, int]]] | None:
        """The receipt's entry and its replays (id, position; log order) in one statement of
        index lookups: the receipt's key, the entry's key in the log, the replays' index
        (parent, position). An entry held in memory is not read again."""
        receipts = self.store.table(RECEIPTS_TABLE)
        replays_sql = (
            f"SELECT position, receipt_id FROM {receipts} WHERE tenant_id=? AND parent_receipt_id=? "
            "ORDER BY position LIMIT ?"
        )
        replay_params = (tenant_id, receipt_id, _MAX_REPLAYS_LISTED)
        event = self.cached_receipt(tenant_id, receipt_id)
        if event is not None:
            rows = self.store.rows(replays_sql, replay_params)
            return event, [(row["receipt_id"], int(row["position"])) for row in rows]
        events = self.store.table(self.store.events_table)
        rows = self.store.rows(
            f"SELECT r.position AS position, e.state AS state, NULL AS receipt_id FROM {receipts} r "
            f"JOIN {events} e ON e.originator_id=? AND e.originator_version=r.position "
            "WHERE r.tenant_id=? AND r.receipt_id=? "
            f"UNION ALL SELECT position, NULL, receipt_id FROM ({replays_sql}) replays",
            (self.store.adapter.stream_param(LEDGER_STREAM_ID), tenant_id, receipt_id, *replay_params),
        )
        found = [row for row in rows if row["receipt_id"] is None]
        if not found:
            return None
        event = RecordedEvent(position=int(found[0]["position"]), entry=bytes(found[0]["state"]))
        if event.tenant_id != tenant_id or event.type != "RetrievalRecorded":
            return None
        event = self._whole(event)
        self._remember_entry(tenant_id, receipt_id, event)
        replays = sorted(
            (int(row["position"]), row["receipt_id"]) for row in rows if row["receipt_id"] is not None
        )
        return event, [(replay_id, position) for position, replay_id in replays]

    # -- replay -----------------------------------------------------------------------
    def receipt_record(self, tenant_id: str, receipt_id: str) -> ReceiptRecord | None:
        rows = self.store.rows(
            f"SELECT {_RECORD_COLUMNS} FROM {self.store.table(RECEIPTS_TABLE)} "
            "WHERE tenant_id=? AND receipt_id=?",
            (tenant_id, receipt_id),
        )
        return _record(rows[0]) if rows else None

    def replays_of(self, tenant_id: str, receipt_id: str) -> list[ReceiptRecord]:
        rows = self.store.rows(
            f"SELECT {_RECORD_COLUMNS} FROM {self.store.table(RECEIPTS_TABLE)} "
            "WHERE tenant_id=? AND parent_receipt_id=? ORDER BY position LIMIT ?",
            (tenant_id, receipt_id, _MAX_REPLAYS_LISTED),
        )
        return [_record(row) for row in rows]

    def policy_as_of(self, tenant_id: str, position: int) -> PolicyState | None:
        rows = self.store.rows(
            f"SELECT position FROM {self.store.table(HISTORY_TABLE)} WHERE tenant_id=? "
            "AND type='PolicyBundlePublished' AND position<=? ORDER BY position DESC LIMIT 1",
            (tenant_id, position),
        )
        event = self.read_entry(int(rows[0]["position"])) if rows else None
        if event is None:
            return None
        return from_row(PolicyState, event.payload, position=event.position)

    def document_chunks(self, tenant_id: str, document_id: str, position: int) -> list[ChunkVersion]:
        rows = self.store.rows(
            "SELECT document_id, version_id, version, chunk_id, ordinal, path, sensitivity, text, "
            "live_from_position, live_to_position, removed_reason, scrubbed_position, scrub_reason "
            f"FROM {self.store.table(CORPUS_TABLE)} WHERE tenant_id=? AND document_id=? "
            # `+`: no index range on the position, so the planner (SQLite has no statistics)
            # takes the document's index, not a scan of the tenant's whole corpus by key.
            "AND +live_from_position<=? ORDER BY +live_from_position, ordinal LIMIT ?",
            (tenant_id, document_id, position, _MAX_DOCUMENT_CHUNKS),
        )
        versions = []
        for row in rows:
            live_to = row["live_to_position"]
            closed = live_to is not None and live_to <= position
            scrubbed = row["scrubbed_position"]
            scrubbed_then = scrubbed is not None and scrubbed <= position
            versions.append(
                from_row(
                    ChunkVersion,
                    row,
                    text=orjson.loads(row["text"]) if row["text"] else None,
                    live_from=int(row["live_from_position"]),
                    live_to=int(live_to) if closed else None,
                    removed_reason=row["removed_reason"] if closed else None,
                    scrubbed_position=int(scrubbed) if scrubbed_then else None,
                    scrub_reason=row["scrub_reason"] if scrubbed_then else None,
                )
            )
        return versions

    def _remember_entry(self, tenant_id: str, receipt_id: str, event: RecordedEvent) -> None:
        # Keep the bytes only, not the parsed envelope: thousands of cached dicts would make
        # every full garbage collection walk them (a latency spike on every request).
        event = RecordedEvent(
            position=event.position,
            entry=event.entry,
            continuations=tuple(RecordedEvent(c.position, c.entry) for c in event.continuations),
        )
        with self._lock:
            if len(self._receipt_entries) > _ENTRY_CACHE_MAX:
                self._receipt_entries.clear()
            self._receipt_entries[(tenant_id, receipt_id)] = event


_RECORD_COLUMNS = "tenant_id, receipt_id, position, engine, mode, policy_snapshot"
_MAX_REPLAYS_LISTED = 100
_MAX_DOCUMENT_CHUNKS = 50_000  # every version's chunks: versions x chunks per version, bounded


def _record(row: Any) -> ReceiptRecord:
    snapshot = row["policy_snapshot"]
    return from_row(
        ReceiptRecord,
        row,
        has_policy_snapshot=snapshot is not None,
        policy_snapshot=_snapshot_json(snapshot),
    )


def _snapshot_json(text: str | None) -> dict[str, Any] | None:
    """The column as JSON; a value that is not a JSON object (a damaged row) reads as an empty
    object, which replay then refuses as an invalid snapshot."""
    if text is None:
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
