"""The receipt index read model (`receipts`): one row per RetrievalRecorded, keyed by
(tenant, receipt_id); a receipt's `RetrievalContinued` entries extend its citation count and parts.

A row refers to its receipt's log entries instead of copying them (version 2, schema version
5): the head's `position` and `parts`, the number of the last `RetrievalContinued` part applied
(1: the head alone; part k is the entry at `position + k - 1`). `receipt_bodies` reads a
page's entries back in one statement. What the lists filter on without an index of their own
is kept small: `task_id`, and `document_ids` (each cited document once, spaces around each).

`policy_snapshot` keeps the log's three cases apart: SQL NULL when the field
was absent (legacy post), the JSON object with its null pair when no bundle
was active, the JSON object with hash and YAML otherwise.

Version 1 (schema versions up to 4) kept a copy of the payload in a `body` column; its digest
stays computable from this version's rows and the log (`RECEIPTS_V1`), so projection
checkpoints signed before the upgrade still verify.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from itertools import islice
from typing import Any, ClassVar

import orjson

from ledger.domain.entries import RecordedEvent
from ledger.storage.store import IN_BATCH, Store
from ledger.tlog.canonical import canonical_json
from projections.base import (
    Column,
    EarlierVersion,
    IndexSpec,
    Projection,
    TableSpec,
    declare_table,
    json_text,
    payload_field,
)
from projections.digest import table_rows
from projections.history import trace_id_of

RECEIPTS_TABLE = "citeledger_rm_receipts"

TABLE = declare_table(
    RECEIPTS_TABLE,
    "tenant_id TEXT NOT NULL, receipt_id TEXT NOT NULL, position BIGINT NOT NULL, "
    "event_id TEXT NOT NULL, recorded_at TEXT NOT NULL, actor TEXT NOT NULL, run_id TEXT, "
    "trace_id TEXT, engine TEXT NOT NULL, mode TEXT NOT NULL, status TEXT NOT NULL, "
    "parent_receipt_id TEXT, subject_id TEXT, context_hash TEXT NOT NULL, "
    "policy_snapshot TEXT, policy_bundle_hash TEXT, citation_count INTEGER NOT NULL, "
    "task_id TEXT, document_ids TEXT NOT NULL, parts INTEGER NOT NULL, "
    "kid TEXT NOT NULL, signature TEXT NOT NULL",
    key=("tenant_id", "receipt_id"),
    position_column="position",
)
_COLUMNS = TABLE.insert_columns


def _v1_table() -> TableSpec:
    """Version 1's table: this one's columns without the references and filters, and `body`
    after `citation_count` (its column order is its digest's order)."""
    columns = [c for c in TABLE.columns if c.name not in ("task_id", "document_ids", "parts")]
    after = [c.name for c in columns].index("citation_count") + 1
    return replace(TABLE, columns=(*columns[:after], Column("body", "TEXT NOT NULL"), *columns[after:]))


def _v1_rows(spec: TableSpec, model: Store, log: Store, as_of: int | None) -> Iterator[dict[str, Any]]:
    """Version 1's rows: each of this version's, with `body` the receipt's payload read from
    the log and encoded as version 1 stored it (canonical JSON text, applied parts merged)."""
    rows = table_rows(TABLE, model, as_of)
    while chunk := list(islice(rows, IN_BATCH)):
        for row, body in zip(chunk, receipt_bodies(log, chunk), strict=True):
            text = canonical_json(body, checked=False).decode()
            yield {c.name: text if c.name == "body" else row[c.name] for c in spec.columns}


RECEIPTS_V1 = EarlierVersion(1, (_v1_table(),), _v1_rows)


class ReceiptsProjection(Projection):
    name: ClassVar[str] = "receipts"
    version: ClassVar[int] = 2
    tables: ClassVar[tuple[TableSpec, ...]] = (TABLE,)
    earlier_versions: ClassVar[tuple[EarlierVersion, ...]] = (RECEIPTS_V1,)

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
                    (payload.get("task") or {}).get("task_id"),
                    " " + _document_ids(payload),
                    1,
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
        counts them and refers to them. Keyed by the head's position too, so a later receipt
        reusing the id never changes the first."""
        part = int(payload_field(event, "part"))
        head = event.position - part + 1
        added = event.payload.get("selected_entries", [])
        cursor.execute(
            store.sql(
                f"UPDATE {store.table(RECEIPTS_TABLE)} SET citation_count=citation_count+?, parts=?, "
                "document_ids=document_ids||? WHERE tenant_id=? AND receipt_id=? AND position=?"
            ),
            (len(added), part, _document_ids(event.payload), event.tenant_id,
             payload_field(event, "receipt_id"), head),
        )  # fmt: skip


def _document_ids(payload: dict[str, Any]) -> str:
    """The documents `payload` cites, each once and followed by a space (a row's column starts
    with one: `LIKE '% id %'` matches whole ids)."""
    cited = dict.fromkeys(str(e.get("document_id")) for e in payload.get("selected_entries", []))
    return "".join(f"{document_id} " for document_id in cited)


def receipt_bodies(store: Store, rows: Sequence[Any]) -> list[dict[str, Any]]:
    """Each row's receipt payload as the log holds it (head and applied parts merged as one
    receipt), read by the log's key (`Store.log_entries_at`)."""
    wanted = sorted(
        {p for row in rows for p in range(int(row["position"]), int(row["position"]) + int(row["parts"]))}
    )
    entries = {position: orjson.loads(state) for position, state in store.log_entries_at(wanted)}
    return [_body(row, entries) for row in rows]


def _body(row: Any, entries: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The row's payload: the head's, then each applied part's lists, as the version-1 model
    stored it (a part adds both lists, empty or not; canonical key order)."""
    head = int(row["position"])
    envelope = entries.get(head)
    if envelope is None:
        raise LookupError(f"receipt {row['receipt_id']}: log entry {head} not found")
    body: dict[str, Any] = envelope["payload"]
    merged = False
    for part in range(2, int(row["parts"]) + 1):
        entry = entries.get(head + part - 1)
        if entry is None or entry["type"] != "RetrievalContinued" or entry["tenant_id"] != row["tenant_id"]:
            continue
        payload = entry["payload"]
        if payload.get("receipt_id") != row["receipt_id"] or payload.get("part") != part:
            continue
        body = dict(body) if not merged else body
        merged = True
        for name in ("selected_entries", "filters_applied"):
            body[name] = [*body.get(name, []), *payload.get(name, [])]
    if merged:
        body = orjson.loads(canonical_json(body, checked=False))
    return body
