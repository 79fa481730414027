"""Read models applied inside the transaction that inserts their entries (SQLite), or right
after it in a transaction of their own (PostgreSQL): `ProjectionRunner.apply_in_transaction`.

On PostgreSQL (`read_models_together`), the common case, every projection right behind the
entries (their tracking rows at the same notification id), costs one savepoint and one tracking
compare-and-set for all of them (a search's receipt: 4 statements, not 7 savepoints and 7
updates, each a round trip). On SQLite, where a statement is a call, not a round trip, one
savepoint per projection measured cheaper (single commits 0.83x the CPU). Otherwise, or when that
fails (a row moved meanwhile, one projection's apply raised), the projections right behind
are applied one by one, each under its own savepoint: one that fails is rolled back alone
and left to the after-commit catch-up, which isolates the failing event.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ledger.domain.entries import RecordedEvent, utc_now
from ledger.storage.store import Store
from projections.base import Projection
from projections.tracking import TRACKING_TABLE

log = logging.getLogger("citeledger.projections")

_SAVEPOINT = "citeledger_projection"


class _Moved(Exception):
    """A tracking row is not where it was read: another runner moved it first."""


def apply_with_entries(
    store: Store,
    projections: Sequence[Projection],
    cursor: Any,
    committed: Sequence[tuple[int, RecordedEvent]],
) -> set[str]:
    """Apply `committed` (notification id, entry) to each projection right behind it, in
    the caller's transaction; the names of those applied."""
    first_id, first = committed[0][0], committed[0][1].position
    events = [event for _, event in committed]
    moved_to = (committed[-1][0], events[-1].position)
    cursor.execute(f"SELECT projection, notification_id, position, status FROM {store.table(TRACKING_TABLE)}")
    states = {row["projection"]: row for row in cursor.fetchall()}
    behind = [
        (projection, int(state["notification_id"]))
        for projection in projections
        if (state := states.get(projection.name)) is not None
        and state["status"] == "running"
        and int(state["position"]) == first - 1
        and int(state["notification_id"]) < first_id
    ]
    together = store.adapter.read_models_together  # where it is cheaper (the adapter says)
    if together and len(behind) == len(projections) and len({at for _, at in behind}) == 1:
        try:
            _apply_all(store, projections, cursor, events, behind[0][1], moved_to)
        except Exception:  # a row moved meanwhile, or one failed: one by one
            log.debug("read models not applied together; one at a time", exc_info=True)
        else:
            return {projection.name for projection in projections}
    return _apply_each(store, behind, cursor, events, moved_to)


def _apply_all(
    store: Store,
    projections: Sequence[Projection],
    cursor: Any,
    events: list[RecordedEvent],
    at_id: int,
    moved_to: tuple[int, int],
) -> None:
    """Every projection under one savepoint, their tracking moved by one compare-and-set."""
    cursor.execute(f"SAVEPOINT {_SAVEPOINT}")
    try:
        if not store.adapter.tracking_advance_many(
            cursor,
            [projection.name for projection in projections],
            expected_notification_id=at_id,
            notification_id=moved_to[0],
            position=moved_to[1],
            updated_at=utc_now(),
        ):
            raise _Moved
        for projection in projections:
            projection.apply(cursor, store, events)
    except BaseException:
        cursor.execute(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}")
        cursor.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")
        raise
    cursor.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")


def _apply_each(
    store: Store,
    behind: Sequence[tuple[Projection, int]],
    cursor: Any,
    events: list[RecordedEvent],
    moved_to: tuple[int, int],
) -> set[str]:
    """Each projection right behind (with the notification id its tracking row was read at)
    under a savepoint of its own."""
    applied: set[str] = set()
    for projection, at_id in behind:
        cursor.execute(f"SAVEPOINT {_SAVEPOINT}")
        try:
            if not store.adapter.tracking_advance(
                cursor,
                projection.name,
                expected_notification_id=at_id,
                notification_id=moved_to[0],
                position=moved_to[1],
                updated_at=utc_now(),
            ):
                raise _Moved
            projection.apply(cursor, store, events)
            applied.add(projection.name)
        except Exception:
            cursor.execute(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}")
            log.debug("projection %s: not applied in the write transaction", projection.name, exc_info=True)
        cursor.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")
    return applied
