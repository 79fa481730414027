"""Where each projection stands: the notification log the runner reads
(`NotificationSource`), a projection's tracking row (`TrackingState`), and its lag
behind the log's head (`ProjectionLag`, `read_lag`, `health_report`) for metrics,
health and the console.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ledger.domain.entries import RecordedEvent
from ledger.domain.timestamps import parse_timestamp
from ledger.storage import adapters
from ledger.storage.store import LEDGER_STREAM_ID, Store

TRACKING_TABLE = adapters.TRACKING_TABLE

Notification = tuple[int, RecordedEvent | None]  # (notification id, ledger entry or None)


class NotificationSource:
    """The ledger's notification log, read through eventsourcing's recorder.

    Notifications of other streams (signed log checkpoints) come back as None:
    they move tracking but are not log entries.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.recorder: Any = store.recorder

    def fetch(self, after: int, limit: int) -> list[Notification]:
        rows = self.recorder.select_notifications(start=after, limit=limit, inclusive_of_start=False)
        return [
            (
                int(row.id),
                RecordedEvent(position=row.originator_version, entry=bytes(row.state))
                if row.originator_id == LEDGER_STREAM_ID
                else None,
            )
            for row in rows
        ]

    def head_position(self) -> int:
        rows = self.recorder.select_events(LEDGER_STREAM_ID, desc=True, limit=1)
        return int(rows[0].originator_version) if rows else 0


@dataclass(frozen=True)
class TrackingState:
    projection: str
    version: int
    notification_id: int
    position: int
    status: str  # "running" | "failed"
    error: str | None
    failed_position: int | None


@dataclass(frozen=True)
class ProjectionLag:
    projection: str
    head_position: int
    applied_position: int
    status: str
    error: str | None
    failed_position: int | None
    updated_at: str | None = None  # when its tracking last moved

    @property
    def lag(self) -> int:
        return max(0, self.head_position - self.applied_position)

    def stalled(self, max_lag: int, stall_s: float) -> bool:
        """Behind by more than `max_lag` with no progress for `stall_s` seconds (a dead or
        stuck worker): an idle log with a caught-up model is never stalled."""
        if self.lag <= max_lag or self.updated_at is None:
            return False
        try:
            moved = parse_timestamp(self.updated_at)
        except ValueError:
            return True
        return (datetime.now(UTC) - moved).total_seconds() > stall_s


def read_states(store: Store) -> dict[str, TrackingState]:
    """Where each projection stands, as its tracking row says."""
    rows = store.rows(  # one statement: no BEGIN and ROLLBACK around it
        "SELECT projection, version, notification_id, position, status, error, failed_position "
        f"FROM {store.table(TRACKING_TABLE)}"
    )
    return {
        row["projection"]: TrackingState(
            projection=row["projection"],
            version=int(row["version"]),
            notification_id=int(row["notification_id"]),
            position=int(row["position"]),
            status=row["status"],
            error=row["error"],
            failed_position=row["failed_position"],
        )
        for row in rows
    }


def read_lag(
    store: Store, names: Sequence[str] | None = None, *, source: NotificationSource | None = None
) -> list[ProjectionLag]:
    """Head position minus applied position, per projection (for metrics and health)."""
    head = (source or NotificationSource(store)).head_position()
    with store.transaction(commit=False) as cursor:
        cursor.execute(
            f"SELECT projection, position, status, error, failed_position, updated_at "
            f"FROM {store.table(TRACKING_TABLE)} ORDER BY projection"
        )
        rows = {row["projection"]: row for row in cursor.fetchall()}
    return [
        ProjectionLag(
            projection=name,
            head_position=head,
            applied_position=int(rows[name]["position"]),
            status=rows[name]["status"],
            error=rows[name]["error"],
            failed_position=rows[name]["failed_position"],
            updated_at=rows[name]["updated_at"],
        )
        for name in (names if names is not None else list(rows))
        if name in rows
    ]


def health_report(lags: Sequence[ProjectionLag], max_lag: int, stall_s: float) -> dict[str, Any]:
    """`ok` is False when any projection has stopped on an event, or has stalled: more
    than `max_lag` entries behind with no progress for `stall_s` seconds."""
    return {
        "ok": all(item.status == "running" and not item.stalled(max_lag, stall_s) for item in lags),
        "projections": {
            item.projection: {
                "status": "stalled"
                if item.status == "running" and item.stalled(max_lag, stall_s)
                else item.status,
                "applied_position": item.applied_position,
                "head_position": item.head_position,
                "lag": item.lag,
                "failed_position": item.failed_position,
                "error": item.error,
            }
            for item in lags
        },
    }


def cut_batch(batch: list[Notification], stop_position: int) -> list[Notification]:
    """The batch up to the last entry at or before `stop_position`."""
    for index, (_, event) in enumerate(batch):
        if event is not None and event.position > stop_position:
            return batch[:index]
    return batch
