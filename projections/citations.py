"""citations: one row per selected entry of a receipt, keyed by (tenant, citation_id).

The chunk text snapshot is kept only as its sealed JSON (ciphertext), read
by decrypting on demand; a RetentionScrubbed entry nulls it and records when
and why. Whether a citation is expired by time is decided at read time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ledger.domain.entries import RecordedEvent
from ledger.storage.store import Store, in_batches
from projections.base import IndexSpec, Projection, TableSpec, declare_table, json_text, payload_field

CITATIONS_TABLE = "citeledger_rm_citations"

TABLE = declare_table(
    CITATIONS_TABLE,
    "tenant_id TEXT NOT NULL, citation_id TEXT NOT NULL, receipt_id TEXT NOT NULL, "
    "position BIGINT NOT NULL, document_id TEXT NOT NULL, version_id TEXT, chunk_id TEXT NOT NULL, "
    "path TEXT NOT NULL, start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, "
    "locator TEXT NOT NULL, score TEXT NOT NULL, sensitivity TEXT NOT NULL, expires_at TEXT, "
    "snapshot_key_ref TEXT NOT NULL, snapshot_commitment TEXT NOT NULL, snapshot TEXT, "
    "scrubbed_position BIGINT, scrub_reason TEXT",
    key=("tenant_id", "citation_id"),
    position_column="position",
    excluded=("snapshot",),
    later={"scrubbed_position": "scrubbed_position", "scrub_reason": "scrubbed_position"},
)
_INSERT_COLUMNS = TABLE.insert_columns


def scrub_rows(
    cursor: Any,
    store: Store,
    table: str,
    event: RecordedEvent,
    *,
    sealed_columns: tuple[str, ...],
    by: dict[str, list[str]],
) -> None:
    """Mark rows of the event's tenant matching any `column IN values` as scrubbed
    (first scrub wins) and drop their ciphertext."""
    nulls = ", ".join(f"{column}=NULL" for column in sealed_columns)
    for column, values in by.items():
        for batch, marks in in_batches(values):
            cursor.execute(
                store.sql(
                    f"UPDATE {store.table(table)} SET scrubbed_position=?, scrub_reason=?, {nulls} "
                    f"WHERE tenant_id=? AND scrubbed_position IS NULL AND {column} IN ({marks})"
                ),
                (event.position, event.payload["reason"], event.tenant_id, *batch),
            )


class CitationsProjection(Projection):
    name: ClassVar[str] = "citations"
    version: ClassVar[int] = 1
    tables: ClassVar[tuple[TableSpec, ...]] = (TABLE,)

    indexes: ClassVar[tuple[IndexSpec, ...]] = (
        TABLE.index("receipt", "tenant_id, receipt_id"),
        TABLE.index("position", "tenant_id, position"),
        # Used by scrubs while applying: never dropped.
        TABLE.index("document", "tenant_id, document_id", deferrable=False),
        TABLE.index("key_ref", "tenant_id, snapshot_key_ref", deferrable=False),
    )

    def apply(self, cursor: Any, store: Store, events: Sequence[RecordedEvent]) -> None:
        pending: list[tuple[Any, ...]] = []
        for event in events:
            event_type = self.check_known(event)
            if event_type in ("RetrievalRecorded", "RetrievalContinued"):
                receipt_id = payload_field(event, "receipt_id")
                # A continuation's citations belong to the receipt at its head's position.
                receipt_position = event.position - int(event.payload.get("part", 1)) + 1
                for entry in payload_field(event, "selected_entries"):
                    locator, snapshot = entry["locator"], entry["snapshot"]
                    pending.append(
                        (
                            event.tenant_id,
                            entry["citation_id"],
                            receipt_id,
                            receipt_position,
                            entry["document_id"],
                            entry.get("version_id"),
                            entry["chunk_id"],
                            entry["path"],
                            locator["start_line"],
                            locator["end_line"],
                            json_text(locator),
                            # The column predates absent scores: "" stands for none.
                            entry.get("score", ""),
                            entry["sensitivity"],
                            entry.get("expires_at"),
                            snapshot["key_ref"],
                            snapshot["commitment"],
                            json_text(snapshot),
                        )
                    )
            elif event_type == "RetentionScrubbed":
                # Updates must see every earlier insert: flush first, keep log order.
                self._insert(cursor, store, pending)
                pending = []
                payload = event.payload
                scrub_rows(
                    cursor,
                    store,
                    CITATIONS_TABLE,
                    event,
                    sealed_columns=("snapshot",),
                    by={
                        "citation_id": list(payload.get("citation_ids", [])),
                        "document_id": list(payload.get("document_ids", [])),
                        "snapshot_key_ref": list(payload_field(event, "key_refs")),
                    },
                )
        self._insert(cursor, store, pending)

    def _insert(self, cursor: Any, store: Store, rows: list[tuple[Any, ...]]) -> None:
        table = store.table(CITATIONS_TABLE)
        store.adapter.insert_many(
            cursor, table, _INSERT_COLUMNS, rows, first_wins_on="tenant_id, citation_id"
        )
