"""search_index: what a search needs to rank a tenant's corpus as of any position.

Tables (rebuildable from the log like every read model):

- `citeledger_rm_search_chunks`: one row per chunk version, keyed like the
  corpus (tenant, live_from_position, ordinal), live over
  `[live_from_position, live_to_position)`, with its token length and its
  postings: the chunk's distinct terms with their counts (`terms`), and the
  terms of its title, heading path and file name (`fields`). Terms are stored
  only as keyed 64-bit hashes (`ledger.retrieval.search_text.TermHasher`), packed.
- `citeledger_rm_search_erasures`: positions of scrubs that dropped rows, so
  an in-memory copy knows to reload.

A scrub deletes the rows of the erased documents: no derivative of erased
text survives in the index. A rebuild cannot decrypt an erased chunk and so
never indexes it; deleting on scrub makes the incremental model end the same.
Chunk text is decrypted here, through the data keys of the store whose log is
projected (`bind_log`), and never written anywhere.

The query side, `SearchIndex`, is `projections/search_query.py`.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from ledger.domain.entries import RecordedEvent
from ledger.retrieval.search_text import TermHasher, filename_words, forget_words, term_counts, term_key
from ledger.storage import adapters
from ledger.storage.store import Store, in_batches
from ledger.tlog.signing import KeyDirectory
from ledger.writing.sealing import KeyDestroyed, SealBroken, Sealer, shared_data_keys
from projections.base import IndexSpec, Projection, TableSpec, close_rows, declare_table, payload_field

log = logging.getLogger("citeledger.search_index")

SEARCH_CHUNKS_TABLE = "citeledger_rm_search_chunks"
SEARCH_ERASURES_TABLE = "citeledger_rm_search_erasures"
PROJECTION_NAME = "search_index"
TRACKING_TABLE = adapters.TRACKING_TABLE
FIELD_TITLE, FIELD_HEADING, FIELD_FILENAME = 1, 2, 4
FLUSH_ROWS = 64
BODY_DTYPE = np.dtype([("h", "<u8"), ("tf", "<u4")])
FIELDS_DTYPE = np.dtype([("h", "<u8"), ("f", "u1")])

CHUNKS = declare_table(
    SEARCH_CHUNKS_TABLE,
    "tenant_id TEXT NOT NULL, live_from_position BIGINT NOT NULL, ordinal INTEGER NOT NULL, "
    "document_id TEXT NOT NULL, text_key_ref TEXT NOT NULL, path TEXT NOT NULL, "
    "sensitivity TEXT NOT NULL, length INTEGER NOT NULL, terms TEXT NOT NULL, "
    "fields TEXT NOT NULL, live_to_position BIGINT",
    key=("tenant_id", "live_from_position", "ordinal"),
    position_column="live_from_position",
    uninserted=("live_to_position",),
)
_INSERT_COLUMNS = CHUNKS.insert_columns


def _pack(array: npt.NDArray[Any]) -> str:
    return base64.b64encode(array.tobytes()).decode("ascii")


class TermKeys:
    """Per-tenant term hashers and the sealer that opens chunk text, both from the
    key material of the ledger whose log is projected."""

    def __init__(self, store: Store) -> None:
        master = KeyDirectory(store.config.keys_dir).master_key()
        self.sealer = Sealer(shared_data_keys(store, master))
        self._master = master
        self._hashers: dict[str, TermHasher] = {}
        self._lock = threading.Lock()

    def hasher(self, tenant_id: str) -> TermHasher:
        with self._lock:
            hasher = self._hashers.get(tenant_id)
            if hasher is None:
                hasher = self._hashers[tenant_id] = TermHasher(term_key(self._master, tenant_id))
            return hasher


class SearchIndexProjection(Projection):
    name: ClassVar[str] = PROJECTION_NAME
    version: ClassVar[int] = 1
    # Rows of erased documents are deleted, so an as-of digest of the past is not reproducible.
    as_of_digest: ClassVar[bool] = False
    tables: ClassVar[tuple[TableSpec, ...]] = (
        CHUNKS,
        declare_table(
            SEARCH_ERASURES_TABLE,
            "tenant_id TEXT NOT NULL, position BIGINT NOT NULL",
            key=("tenant_id", "position"),
            position_column="position",
        ),
    )
    indexes: ClassVar[tuple[IndexSpec, ...]] = (
        CHUNKS.index("document", "tenant_id, document_id, live_to_position", deferrable=False),
        CHUNKS.index("key_ref", "tenant_id, text_key_ref", deferrable=False),
        # Catching a loaded copy up: versions closed after its position.
        CHUNKS.index("live_to", "tenant_id, live_to_position"),
    )

    def __init__(self) -> None:
        self._keys: TermKeys | None = None
        self._log_store: Store | None = None

    def bind_log(self, store: Store) -> None:
        """The store whose log (and data keys) this model follows (a scratch rebuild
        writes its rows elsewhere but still reads the keys of the ledger it rebuilds)."""
        self._log_store = store

    def keys(self, store: Store) -> TermKeys:
        if self._keys is None:
            self._keys = TermKeys(self._log_store or store)
        return self._keys

    def table_ddl(self, store: Store) -> list[str]:
        self.keys(store)  # opens the data-key table now, never inside an apply's transaction
        return super().table_ddl(store)

    def apply(self, cursor: Any, store: Store, events: Sequence[RecordedEvent]) -> None:
        pending: list[tuple[Any, ...]] = []
        for event in events:
            event_type = self.check_known(event)
            if event_type == "DocumentIngested":
                self._close(cursor, store, event, pending)
                self._add_rows(cursor, store, event, pending)
            elif event_type == "DocumentContinued":  # more chunks of the version just opened
                self._add_rows(cursor, store, event, pending)
            elif event_type == "DocumentRemoved":
                self._close(cursor, store, event, pending)
            elif event_type == "RetentionScrubbed":
                self._flush(cursor, store, pending)
                self._erase(cursor, store, event)
        self._flush(cursor, store, pending)

    def _add_rows(
        self, cursor: Any, store: Store, event: RecordedEvent, pending: list[tuple[Any, ...]]
    ) -> None:
        """An event's rows, written every `FLUSH_ROWS`: tokenizing a large file's chunks takes
        seconds, and a PostgreSQL session idle in its transaction that long is cut off."""
        for row in self._rows(store, event):
            pending.append(row)
            if len(pending) >= FLUSH_ROWS:
                self._flush(cursor, store, pending)

    def _rows(self, store: Store, event: RecordedEvent) -> Iterator[tuple[Any, ...]]:
        keys = self.keys(store)
        tenant = event.tenant_id
        hasher = keys.hasher(tenant)
        path = payload_field(event, "path")

        def opened(sealed: dict[str, Any] | None) -> str | None:
            if sealed is None:
                return None
            try:
                return keys.sealer.unseal(sealed, tenant_id=tenant)
            except (KeyDestroyed, SealBroken):
                return None  # erased (or unreadable): never indexed, as a rebuild would find it

        title = opened(event.payload.get("title"))
        document_fields: dict[int, int] = {}
        for text, code in ((title, FIELD_TITLE), (filename_words(path), FIELD_FILENAME)):
            for term in term_counts(text or "")[0]:
                key = hasher(term)
                document_fields[key] = document_fields.get(key, 0) | code
        for chunk in payload_field(event, "chunks"):
            text = opened(chunk["text"])
            if text is None:
                continue
            counts, length = term_counts(text)
            body = np.array([(hasher(t), n) for t, n in sorted(counts.items())], dtype=BODY_DTYPE)
            fields = dict(document_fields)
            heading = opened(chunk["locator"].get("heading_path"))
            for term in term_counts(heading or "")[0]:
                key = hasher(term)
                fields[key] = fields.get(key, 0) | FIELD_HEADING
            field_array = np.array(sorted(fields.items()), dtype=FIELDS_DTYPE)
            yield (
                tenant,
                event.position,
                chunk["ordinal"],
                payload_field(event, "document_id"),
                chunk["text"]["key_ref"],
                path,
                payload_field(event, "sensitivity"),
                length,
                _pack(body),
                _pack(field_array),
            )

    def _close(self, cursor: Any, store: Store, event: RecordedEvent, pending: list[tuple[Any, ...]]) -> None:
        self._flush(cursor, store, pending)
        close_rows(cursor, store, SEARCH_CHUNKS_TABLE, event, "document_id", end="live_to_position")

    def _erase(self, cursor: Any, store: Store, event: RecordedEvent) -> None:
        table = store.table(SEARCH_CHUNKS_TABLE)
        by = {
            "document_id": list(event.payload.get("document_ids", [])),
            "text_key_ref": list(payload_field(event, "key_refs")),
        }
        for column, values in by.items():
            for batch, marks in in_batches(values):
                cursor.execute(
                    store.sql(f"DELETE FROM {table} WHERE tenant_id=? AND {column} IN ({marks})"),
                    (event.tenant_id, *batch),
                )
        cursor.execute(
            store.sql(
                f"INSERT INTO {store.table(SEARCH_ERASURES_TABLE)} (tenant_id, position) VALUES (?, ?)"
            ),
            (event.tenant_id, event.position),
        )
        self.forget_terms(event.tenant_id)

    def forget_terms(self, tenant_id: str) -> None:
        """Drop the plaintext words this process cached (stems, term hashes) once an erasure is
        seen: applied here, or found by a copy that another process's apply left behind."""
        forget_words()
        if self._keys is not None:
            self._keys.hasher(tenant_id).forget()

    def _flush(self, cursor: Any, store: Store, rows: list[tuple[Any, ...]]) -> None:
        store.adapter.insert_many(cursor, store.table(SEARCH_CHUNKS_TABLE), _INSERT_COLUMNS, rows)
        rows.clear()
