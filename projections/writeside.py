"""write_side: what the write path must look up that no other read model keeps —
each document's current version, each tenant's live policy bundle, legal holds.

Chunks and receipt positions come from the corpus and receipts read models;
all of them are applied by the one projection runner, with the same tracking.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ledger.domain.entries import RecordedEvent
from ledger.storage.store import Store
from projections.base import IndexSpec, Projection, TableSpec, close_rows, declare_table, payload_field

DOCUMENTS_TABLE = "citeledger_rm_documents"
POLICIES_TABLE = "citeledger_rm_policies"
HOLDS_TABLE = "citeledger_rm_legal_holds"

DOCUMENTS = declare_table(
    DOCUMENTS_TABLE,
    "tenant_id TEXT NOT NULL, document_id TEXT NOT NULL, version BIGINT NOT NULL, "
    "version_id TEXT NOT NULL, content_sha256 TEXT NOT NULL, path TEXT NOT NULL, "
    "sensitivity TEXT NOT NULL, position BIGINT NOT NULL, removed INTEGER NOT NULL, "
    "retention_days INTEGER, subject_id TEXT",
    key=("tenant_id", "document_id"),
    position_column="position",
    undigested=("tenant_id", "document_id"),  # current state: the digest reads the key apart
)
# One row per (hold, target); target_kind is 'document' or 'subject'.
HOLDS = declare_table(
    HOLDS_TABLE,
    "tenant_id TEXT NOT NULL, hold_id TEXT NOT NULL, target_kind TEXT NOT NULL, "
    "target_id TEXT NOT NULL, position BIGINT NOT NULL, released_position BIGINT",
    key=("tenant_id", "hold_id", "target_kind", "target_id"),
    position_column="position",
    undigested=("tenant_id", "hold_id", "target_kind", "target_id"),
    later={"released_position": "released_position"},
)
_DOCUMENT_COLUMNS = DOCUMENTS.insert_columns


class WriteSideProjection(Projection):
    name: ClassVar[str] = "write_side"
    version: ClassVar[int] = 1
    as_of_digest: ClassVar[bool] = False  # current state, updated in place
    tables: ClassVar[tuple[TableSpec, ...]] = (
        DOCUMENTS,
        declare_table(
            POLICIES_TABLE,
            "tenant_id TEXT, policy_version TEXT NOT NULL, bundle_sha256 TEXT NOT NULL, "
            "bundle_yaml TEXT NOT NULL, position BIGINT NOT NULL",
            key=("tenant_id",),
            position_column="position",
            undigested=("tenant_id", "bundle_yaml"),
        ),
        HOLDS,
    )
    indexes: ClassVar[tuple[IndexSpec, ...]] = (
        DOCUMENTS.index("subject", "tenant_id, subject_id"),
        HOLDS.index("target", "tenant_id, target_kind, target_id"),
    )

    def apply(self, cursor: Any, store: Store, events: Sequence[RecordedEvent]) -> None:
        for event in events:
            event_type = self.check_known(event)
            if event_type == "DocumentIngested":
                self._document(cursor, store, event)
            elif event_type == "DocumentRemoved":
                cursor.execute(
                    store.sql(
                        f"UPDATE {store.table(DOCUMENTS_TABLE)} SET removed=1, position=? "
                        "WHERE tenant_id=? AND document_id=?"
                    ),
                    (event.position, event.tenant_id, payload_field(event, "document_id")),
                )
            elif event_type == "PolicyBundlePublished":
                cursor.execute(
                    store.sql(
                        f"INSERT INTO {store.table(POLICIES_TABLE)} (tenant_id, policy_version, "
                        "bundle_sha256, bundle_yaml, position) VALUES (?, ?, ?, ?, ?) "
                        "ON CONFLICT (tenant_id) DO UPDATE SET policy_version=excluded.policy_version, "
                        "bundle_sha256=excluded.bundle_sha256, bundle_yaml=excluded.bundle_yaml, "
                        "position=excluded.position"
                    ),
                    (
                        event.tenant_id,
                        payload_field(event, "policy_version"),
                        payload_field(event, "bundle_sha256"),
                        payload_field(event, "bundle_yaml"),
                        event.position,
                    ),
                )
            elif event_type == "LegalHoldPlaced":
                targets = [("document", d) for d in event.payload.get("document_ids", [])] + [
                    ("subject", s) for s in event.payload.get("subject_ids", [])
                ]
                cursor.executemany(
                    store.sql(
                        f"INSERT INTO {store.table(HOLDS_TABLE)} "
                        "(tenant_id, hold_id, target_kind, target_id, position) VALUES (?, ?, ?, ?, ?)"
                    ),
                    [
                        (event.tenant_id, payload_field(event, "hold_id"), kind, target, event.position)
                        for kind, target in targets
                    ],
                )
            elif event_type == "LegalHoldReleased":
                close_rows(cursor, store, HOLDS_TABLE, event, "hold_id", end="released_position")

    def _document(self, cursor: Any, store: Store, event: RecordedEvent) -> None:
        payload = event.payload
        cursor.execute(
            store.sql(
                f"INSERT INTO {store.table(DOCUMENTS_TABLE)} ({', '.join(_DOCUMENT_COLUMNS)}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?) "
                "ON CONFLICT (tenant_id, document_id) DO UPDATE SET version=excluded.version, "
                "version_id=excluded.version_id, content_sha256=excluded.content_sha256, "
                "path=excluded.path, sensitivity=excluded.sensitivity, position=excluded.position, "
                "removed=0, retention_days=excluded.retention_days, subject_id=excluded.subject_id"
            ),
            (
                event.tenant_id,
                payload_field(event, "document_id"),
                payload_field(event, "version"),
                payload_field(event, "version_id"),
                payload_field(event, "content_sha256"),
                payload_field(event, "path"),
                payload_field(event, "sensitivity"),
                event.position,
                payload.get("retention_days"),
                payload.get("subject_id"),
            ),
        )
