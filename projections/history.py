"""history: one row per log entry, indexed for compliance queries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ledger.domain.entries import RecordedEvent
from ledger.storage.store import Store
from projections.base import IndexSpec, Projection, TableSpec, declare_table

HISTORY_TABLE = "citeledger_rm_history"

TABLE = declare_table(
    HISTORY_TABLE,
    "position BIGINT, tenant_id TEXT NOT NULL, type TEXT NOT NULL, "
    "actor TEXT NOT NULL, run_id TEXT, trace_id TEXT, receipt_id TEXT, "
    "event_id TEXT NOT NULL, recorded_at TEXT NOT NULL",
    key=("position",),
    position_column="position",
)
_COLUMNS = TABLE.insert_columns


def receipt_id_of(envelope: dict[str, Any]) -> str | None:
    """The receipt an entry is about, if any (the receipt itself, a replay, a denial)."""
    event_type, payload = envelope["type"], envelope["payload"]
    if event_type == "RetrievalRecorded":
        return str(payload["receipt_id"])
    if event_type == "ReplayRecorded":
        return str(payload["original_receipt_id"])
    if event_type == "AccessDenied" and payload.get("resource_type") == "receipt":
        return str(payload["resource_id"])
    if event_type == "ContentRead" and len(payload.get("receipt_ids", ())) == 1:
        # A read of one receipt is found by its id; a page's read lists several.
        return str(payload["receipt_ids"][0])
    return None


def trace_id_of(envelope: dict[str, Any]) -> str | None:
    trace = envelope.get("trace_id")
    if trace is None and envelope["type"] == "RetrievalRecorded":
        trace = envelope["payload"].get("task", {}).get("trace_id")
    return None if trace is None else str(trace)


class HistoryProjection(Projection):
    name: ClassVar[str] = "history"
    version: ClassVar[int] = 1
    tables: ClassVar[tuple[TableSpec, ...]] = (TABLE,)

    # Every filter is tenant-scoped and pages by position, so each index ends in position.
    indexes: ClassVar[tuple[IndexSpec, ...]] = (
        *(
            TABLE.index(column, f"tenant_id, {column}, position")
            for column in ("type", "actor", "run_id", "trace_id", "receipt_id", "recorded_at")
        ),
        TABLE.index("tenant", "tenant_id, position"),
    )

    def apply(self, cursor: Any, store: Store, events: Sequence[RecordedEvent]) -> None:
        rows = []
        for event in events:
            self.check_known(event)
            envelope = event.envelope
            rows.append(
                (
                    event.position,
                    envelope["tenant_id"],
                    envelope["type"],
                    envelope["actor"],
                    envelope.get("run_id"),
                    trace_id_of(envelope),
                    receipt_id_of(envelope),
                    envelope["event_id"],
                    envelope["recorded_at"],
                )
            )
        store.adapter.insert_many(cursor, store.table(HISTORY_TABLE), _COLUMNS, rows)
