"""The receipt index read model (`receipts`): one row per RetrievalRecorded, keyed by
(tenant, receipt_id); a receipt's `RetrievalContinued` entries extend its row's body and citation count.

`policy_snapshot` keeps the log's three cases apart: SQL NULL when the field
was absent (legacy post), the JSON object with its null pair when no bundle
was active, the JSON object with hash and YAML otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import orjson

from ledger.domain.entries import RecordedEvent
from ledger.storage.store import Store
from ledger.tlog.canonical import canonical_json
from projections.base import IndexSpec, Projection, TableSpec, declare_table, json_text, payload_field
from projections.history import trace_id_of

RECEIPTS_TABLE = "citeledger_rm_receipts"

TABLE = declare_table(
    RECEIPTS_TABLE,
    "tenant_id TEXT NOT NULL, receipt_id TEXT NOT NULL, position BIGINT NOT NULL, "
    "event_id TEXT NOT NULL, recorded_at TEXT NOT NULL, actor TEXT NOT NULL, run_id TEXT, "
    "trace_id TEXT, engine TEXT NOT NULL, mode TEXT NOT NULL, status TEXT NOT NULL, "
    "parent_receipt_id TEXT, subject_id TEXT, context_hash TEXT NOT NULL, "
    "policy_snapshot TEXT, policy_bundle_hash TEXT, citation_count INTEGER NOT NULL, "
    "body TEXT NOT NULL, kid TEXT NOT NULL, signature TEXT NOT NULL",
    key=("tenant_id", "receipt_id"),
    position_column="position",
)
_COLUMNS = TABLE.insert_columns


class ReceiptsProjection(Projection):
    name: ClassVar[str] = "receipts"
    version: ClassVar[int] = 1
    tables: ClassVar[tuple[TableSpec, ...]] = (TABLE,)

    indexes: ClassVar[tuple[IndexSpec, ...]] = (
        TABLE.index("position", "tenant_id, position"),
        # With the position, a receipt's replays are one index range already in log order
        # (without it SQLite ordered by the position index: a scan of the tenant's receipts).
        TABLE.index("parent_position", "tenant_id, parent_receipt_id, position"),
        TABLE.index("trace", "tenant_id, trace_id, position"),
    )

    def apply(self, cursor: Any, store: Store, events: Sequence[RecordedEvent]) -> None:
        rows: list[tuple[Any, ...]] = []
        for event in events:
            event_type = self.check_known(event)
            if event_type == "RetrievalContinued":
                self._insert(cursor, store, rows)
                rows = []
                self._continue(cursor, store, event)
                continue
            if event_type != "RetrievalRecorded":
                continue
            envelope, payload = event.envelope, event.payload
            snapshot = payload.get("policy_snapshot")  # absent -> None -> SQL NULL
            rows.append(
                (
                    event.tenant_id,
                    payload_field(event, "receipt_id"),
                    event.position,
                    envelope["event_id"],
                    envelope["recorded_at"],
                    envelope["actor"],
                    envelope.get("run_id"),
                    trace_id_of(envelope),
                    payload_field(event, "engine"),
                    payload_field(event, "mode"),
                    payload_field(event, "status"),
                    payload.get("parent_receipt_id"),
                    payload.get("subject_id"),
                    payload_field(event, "context_hash"),
                    json_text(snapshot) if "policy_snapshot" in payload else None,
                    snapshot.get("bundle_hash") if isinstance(snapshot, dict) else None,
                    len(payload_field(event, "selected_entries")),
                    canonical_json(payload, checked=False).decode(),
                    envelope["kid"],
                    envelope["signature"],
                )
            )
        self._insert(cursor, store, rows)

    def _insert(self, cursor: Any, store: Store, rows: list[tuple[Any, ...]]) -> None:
        # First receipt wins on a duplicate id: a later one is still in history,
        # and the result must not depend on batch boundaries.
        table = store.table(RECEIPTS_TABLE)
        store.adapter.insert_many(cursor, table, _COLUMNS, rows, first_wins_on="tenant_id, receipt_id")

    def _continue(self, cursor: Any, store: Store, event: RecordedEvent) -> None:
        """A receipt's further entries (`RetrievalContinued`, right after its head): its row
        reads as the whole receipt. Keyed by the head's position too, so a later receipt
        reusing the id never changes the first."""
        table = store.table(RECEIPTS_TABLE)
        head = event.position - int(payload_field(event, "part")) + 1
        key = (event.tenant_id, payload_field(event, "receipt_id"), head)
        cursor.execute(
            store.sql(f"SELECT body FROM {table} WHERE tenant_id=? AND receipt_id=? AND position=?"), key
        )
        found = cursor.fetchone()
        if found is None:
            return
        body = orjson.loads(found["body"])
        added = event.payload.get("selected_entries", [])
        for name in ("selected_entries", "filters_applied"):
            body[name] = [*body.get(name, []), *event.payload.get(name, [])]
        cursor.execute(
            store.sql(
                f"UPDATE {table} SET body=?, citation_count=citation_count+? "
                "WHERE tenant_id=? AND receipt_id=? AND position=?"
            ),
            (canonical_json(body, checked=False).decode(), len(added), *key),
        )
