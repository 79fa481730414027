"""corpus: chunk versions, each live over `[live_from_position, live_to_position)`.

`live_from_position` is the entry holding the chunk: a version split over several entries
(`DocumentContinued`) has chunks from each, all in one commit and closed together.

A new version of a document (or its removal) closes the previous version's
chunks at that position, so "the corpus of tenant T as of position p" is one
indexed range query. Chunk text stays sealed; a scrub nulls the ciphertext.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import orjson

from ledger.domain.entries import RecordedEvent
from ledger.domain.events import DOCUMENT_CHUNK_TYPES
from ledger.storage.store import Store
from ledger.usecases.ports import ChunkState
from projections.base import (
    IndexSpec,
    Projection,
    TableSpec,
    close_rows,
    declare_table,
    json_text,
    payload_field,
)
from projections.citations import scrub_rows
from projections.rows import from_row

CORPUS_TABLE = "citeledger_rm_corpus"

TABLE = declare_table(
    CORPUS_TABLE,
    "tenant_id TEXT NOT NULL, live_from_position BIGINT NOT NULL, ordinal INTEGER NOT NULL, "
    "document_id TEXT NOT NULL, version_id TEXT NOT NULL, version BIGINT NOT NULL, "
    "chunk_id TEXT NOT NULL, source TEXT NOT NULL, path TEXT NOT NULL, sensitivity TEXT NOT NULL, "
    "content_sha256 TEXT NOT NULL, start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, "
    "heading_path TEXT, text_key_ref TEXT NOT NULL, text_commitment TEXT NOT NULL, text TEXT, "
    "live_to_position BIGINT, removed_reason TEXT, scrubbed_position BIGINT, scrub_reason TEXT, "
    "retention_days INTEGER",
    key=("tenant_id", "live_from_position", "ordinal"),
    position_column="live_from_position",
    excluded=("heading_path", "text"),
    later={
        "live_to_position": "live_to_position",
        "removed_reason": "live_to_position",
        "scrubbed_position": "scrubbed_position",
        "scrub_reason": "scrubbed_position",
    },
)
_INSERT_COLUMNS = TABLE.insert_columns


class CorpusProjection(Projection):
    name: ClassVar[str] = "corpus"
    version: ClassVar[int] = 2
    tables: ClassVar[tuple[TableSpec, ...]] = (TABLE,)

    indexes: ClassVar[tuple[IndexSpec, ...]] = (
        # Open versions of a document (closed by the next version) and scrubs: used while applying.
        TABLE.index("document", "tenant_id, document_id, live_to_position", deferrable=False),
        TABLE.index("key_ref", "tenant_id, text_key_ref", deferrable=False),
        # The write path's chunk lookup (a citation names document and chunk).
        TABLE.index("chunk", "tenant_id, document_id, chunk_id", deferrable=False),
        # A source's documents: a sync's own files, target_roots naming a source.
        TABLE.index("source", "tenant_id, source, document_id"),
        # as_of(p): rows with live_from <= p (primary key prefix) and live_to NULL or > p.
        TABLE.index("live_to", "tenant_id, live_to_position, live_from_position"),
    )

    def apply(self, cursor: Any, store: Store, events: Sequence[RecordedEvent]) -> None:
        table = store.table(CORPUS_TABLE)
        pending: list[tuple[Any, ...]] = []
        for event in events:
            event_type = self.check_known(event)
            if event_type in DOCUMENT_CHUNK_TYPES:
                document_id = payload_field(event, "document_id")
                if event_type == "DocumentIngested":  # a continuation adds to its own version
                    self._close(cursor, store, event, "superseded", pending)
                    pending = []
                for chunk in payload_field(event, "chunks"):
                    locator, text = chunk["locator"], chunk["text"]
                    pending.append(
                        (
                            event.tenant_id,
                            event.position,
                            chunk["ordinal"],
                            document_id,
                            payload_field(event, "version_id"),
                            payload_field(event, "version"),
                            chunk["chunk_id"],
                            payload_field(event, "source"),
                            payload_field(event, "path"),
                            payload_field(event, "sensitivity"),
                            payload_field(event, "content_sha256"),
                            locator["start_line"],
                            locator["end_line"],
                            json_text(locator.get("heading_path")),
                            text["key_ref"],
                            text["commitment"],
                            json_text(text),
                            event.payload.get("retention_days"),
                        )
                    )
            elif event_type == "DocumentRemoved":
                self._close(cursor, store, event, payload_field(event, "reason"), pending)
                pending = []
            elif event_type == "RetentionScrubbed":
                self._flush(cursor, table, store, pending)
                pending = []
                scrub_rows(
                    cursor,
                    store,
                    CORPUS_TABLE,
                    event,
                    sealed_columns=("text", "heading_path"),
                    by={
                        "document_id": list(event.payload.get("document_ids", [])),
                        "text_key_ref": list(payload_field(event, "key_refs")),
                    },
                )
        self._flush(cursor, table, store, pending)

    def _close(
        self, cursor: Any, store: Store, event: RecordedEvent, reason: str, pending: list[tuple[Any, ...]]
    ) -> None:
        self._flush(cursor, store.table(CORPUS_TABLE), store, pending)
        close_rows(
            cursor, store, CORPUS_TABLE, event, "document_id", end="live_to_position", removed_reason=reason
        )

    def _flush(self, cursor: Any, table: str, store: Store, rows: list[tuple[Any, ...]]) -> None:
        store.adapter.insert_many(cursor, table, _INSERT_COLUMNS, rows)


def chunk_state(row: Any) -> ChunkState:
    """A corpus row (at least the columns below) as the use cases see a chunk."""
    return from_row(
        ChunkState,
        row,
        position=int(row["live_from_position"]),
        text=orjson.loads(row["text"]) if row["text"] else None,
        heading_path=orjson.loads(row["heading_path"]) if row["heading_path"] else None,
    )
