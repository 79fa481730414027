"""Read models applied inside the transaction that inserts their entries (SQLite), or right
after it in a transaction of their own (PostgreSQL): `ProjectionRunner.apply_in_transaction`.

The common case, every projection right behind the entries, costs one savepoint and one
tracking update for all of them (a search's receipt: 3 statements, not 7 savepoints and 7
updates). Where the tracking row a projection stands at is known from this runner's last
commit, it is not read again: the update is a compare-and-set on it, so a row another runner
(or process) moved meanwhile fails it, and the projections are then applied one by one, each
under its own savepoint, from the rows as read, exactly as before: one that fails is rolled
back alone and left to the after-commit catch-up, which isolates the failing event.
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

# (notification id, log position) each projection's tracking row holds.
Standing = dict[str, tuple[int, int]]


class _Moved(Exception):
    """A tracking row is not where this runner last left it."""


class EmbeddedApply:
    """Applies committed entries to the read models in the caller's transaction, and remembers
    where the tracking rows stand after each of its own commits (`settled`)."""

    def __init__(self, store: Store, projections: Sequence[Projection]) -> None:
        self.store = store
        self.projections = list(projections)
        self._known: Standing | None = None  # as of this runner's last commit (None: read them)

    def settled(self, applied: set[str], through: tuple[int, int]) -> None:
        """The transaction that applied `applied` to the entries up to `through` (notification
        id, position) committed: with every projection, remember that they stand there; else
        forget (the catch-up that follows moves them). Commits of other threads may be
        reported out of order: a stale memory only fails the next compare-and-set."""
        if len(applied) == len(self.projections):
            self._known = dict.fromkeys((p.name for p in self.projections), through)
        else:
            self._known = None

    def apply(self, cursor: Any, committed: Sequence[tuple[int, RecordedEvent]]) -> set[str]:
        """Apply `committed` to each projection right behind it; the names applied."""
        first_id, first = committed[0][0], committed[0][1].position
        events = [event for _, event in committed]
        moved_to = (committed[-1][0], events[-1].position)
        known = self._known
        self._known = None  # until this transaction is known to have committed
        standing = {known.get(p.name) for p in self.projections} if known is not None else set()
        if len(standing) == 1 and None not in standing:
            at_id, at_position = next(iter(standing))  # type: ignore[misc]
            if at_position == first - 1 and at_id < first_id:
                try:
                    self._apply_all(cursor, events, at_id, moved_to)
                except Exception:  # moved meanwhile, or one failed: one by one
                    log.debug("read models not applied together; one at a time", exc_info=True)
                else:
                    return {p.name for p in self.projections}
        return self._apply_each(cursor, committed, events, moved_to)

    def _apply_all(
        self, cursor: Any, events: list[RecordedEvent], at_id: int, moved_to: tuple[int, int]
    ) -> None:
        """Every projection under one savepoint, their tracking moved by one compare-and-set."""
        store = self.store
        cursor.execute(f"SAVEPOINT {_SAVEPOINT}")
        try:
            if not store.adapter.tracking_advance_many(
                cursor,
                [p.name for p in self.projections],
                expected_notification_id=at_id,
                notification_id=moved_to[0],
                position=moved_to[1],
                updated_at=utc_now(),
            ):
                raise _Moved
            for projection in self.projections:
                projection.apply(cursor, store, events)
        except BaseException:
            cursor.execute(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}")
            cursor.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")
            raise
        cursor.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")

    def _apply_each(
        self,
        cursor: Any,
        committed: Sequence[tuple[int, RecordedEvent]],
        events: list[RecordedEvent],
        moved_to: tuple[int, int],
    ) -> set[str]:
        """Each projection whose tracking row (as read) is right behind the entries, under a
        savepoint of its own."""
        store = self.store
        first_id, first = committed[0][0], committed[0][1].position
        cursor.execute(
            f"SELECT projection, notification_id, position, status FROM {store.table(TRACKING_TABLE)}"
        )
        states = {row["projection"]: row for row in cursor.fetchall()}
        applied: set[str] = set()
        for projection in self.projections:
            state = states.get(projection.name)
            if (
                state is None
                or state["status"] != "running"
                or int(state["position"]) != first - 1
                or int(state["notification_id"]) >= first_id
            ):
                continue
            cursor.execute(f"SAVEPOINT {_SAVEPOINT}")
            try:
                if not store.adapter.tracking_advance(
                    cursor,
                    projection.name,
                    expected_notification_id=int(state["notification_id"]),
                    notification_id=moved_to[0],
                    position=moved_to[1],
                    updated_at=utc_now(),
                ):
                    raise _Moved
                projection.apply(cursor, store, events)
                applied.add(projection.name)
            except Exception:
                cursor.execute(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}")
                log.debug(
                    "projection %s: not applied in the write transaction", projection.name, exc_info=True
                )
            cursor.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")
        return applied
