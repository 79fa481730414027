"""The projection runner: follows the notification log and applies each event
to each read model exactly once.

Tracking: one row per projection (last notification id and log position
applied, status). A batch's read-model writes and the move of its tracking
row commit in one transaction, and the move is a compare-and-set on the
previous notification id, so two runners (threads or processes) never apply
the same event twice, and a crash resumes from the last committed batch.

Why not `eventsourcing.projection.ProjectionRunner`/`TrackingRecorder`
as is: the library's tracking recorder commits tracking in its own
transaction (the shared-cursor insert is private), keeps only a notification
id (we also need the log position for lag, as-of and gap checks, and a
per-projection health status), and its SQLite recorder has no `subscribe()`.
We read the same notification log through the library's recorder
(`select_notifications`) and, on PostgreSQL, wake on the library's
LISTEN/NOTIFY channel.

Failure: an event a projection cannot apply rolls its batch back; the batch
is retried one event per transaction so everything before the culprit is
kept, then the projection is marked failed at that position (logged, visible
in `health()`) and stops; other projections go on.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ledger.domain.entries import RecordedEvent, utc_now
from ledger.storage import adapters
from ledger.storage.store import Store
from ledger.writing.collector import collector_paused
from projections.base import Projection, UnappliableEvent
from projections.batches import read_model_transaction
from projections.catalog import default_projections
from projections.tracking import (
    TRACKING_TABLE,
    Notification,
    NotificationSource,
    ProjectionLag,
    TrackingState,
    cut_batch,
    health_report,
    read_lag,
    read_states,
)
from projections.write_apply import apply_with_entries

if TYPE_CHECKING:
    from ledger.writing.application import Ledger

log = logging.getLogger("citeledger.projections")

DEFAULT_BATCH = 1_000
# Health: this far behind and not moving for this long is stalled (read when asked, not at import).
MAX_LAG_SETTING, DEFAULT_MAX_LAG = "CITELEDGER_MAX_PROJECTION_LAG", 1000
STALL_SETTING, DEFAULT_STALL_S = "CITELEDGER_PROJECTION_STALL_S", 30.0
REBUILD_BATCH = 5_000  # entries per transaction while rebuilding (fewer commits)
TRANSIENT_ERRORS: tuple[type[Exception], ...] = adapters.TRANSIENT_ERRORS


class _LostRace(Exception):
    """Another runner moved the tracking row first; re-read and continue."""


class ProjectionRunner:
    def __init__(
        self,
        store: Store,
        projections: Sequence[Projection] | None = None,
        *,
        source: NotificationSource | None = None,
        batch_size: int = DEFAULT_BATCH,
    ) -> None:
        self.store = store
        self.projections = list(projections) if projections is not None else default_projections()
        names = [p.name for p in self.projections]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate projection names: {names}")
        self.source = source or NotificationSource(store)
        for projection in self.projections:
            bind = getattr(projection, "bind_log", None)
            if bind is not None:  # a model that reads the log's key material (search_index)
                bind(self.source.store)
        self.batch_size = batch_size
        self._lock = threading.RLock()  # one catch-up at a time per process
        # (last position, names) of the batch the write transaction applied read models for.
        self._applied_with_entries: tuple[int, set[str]] = (0, set())
        self.ensure()

    # -- setup ---------------------------------------------------------------------
    def projection(self, name: str) -> Projection:
        for projection in self.projections:
            if projection.name == name:
                return projection
        raise KeyError(f"no projection named {name!r} (have {', '.join(p.name for p in self.projections)})")

    def ensure(self) -> None:
        """Create tracking and read-model tables; rebuild a model whose version changed."""
        store = self.store
        statements = store.adapter.tracking_ddl()
        for projection in self.projections:
            statements.extend(projection.ddl(store))
        store.create_tables(*statements)
        with store.transaction(commit=True) as cursor:
            for projection in self.projections:
                cursor.execute(
                    store.sql(
                        f"INSERT INTO {store.table(TRACKING_TABLE)} "
                        "(projection, version, notification_id, position, status, updated_at) "
                        "VALUES (?, ?, 0, 0, 'running', ?) ON CONFLICT (projection) DO NOTHING"
                    ),
                    (projection.name, projection.version, utc_now()),
                )
        states = self.states()
        for projection in self.projections:
            if states[projection.name].version != projection.version:
                log.warning(
                    "projection %s: stored version %d, code version %d: rebuilding from position 0",
                    projection.name,
                    states[projection.name].version,
                    projection.version,
                )
                store.create_tables(*projection.drop_statements(store), *projection.ddl(store))
                self.reset([projection.name])

    def states(self) -> dict[str, TrackingState]:
        return read_states(self.store)

    # -- applying ------------------------------------------------------------------
    def catch_up(
        self,
        *,
        until_position: int | None = None,
        stop_position: int | None = None,
        names: Sequence[str] | None = None,
        progress: Callable[[int], None] | None = None,
        interrupt: threading.Event | None = None,
    ) -> int:
        """Apply what is in the log; returns how many entries were applied (summed
        over projections). `until_position`: return once every running projection
        has reached it. `stop_position`: never apply an entry beyond it.
        `interrupt`: return after the current batch once it is set."""
        selected = [self.projection(n) for n in names] if names is not None else self.projections
        applied = 0
        with self._lock:
            while interrupt is None or not interrupt.is_set():
                states = self.states()
                active = [
                    p
                    for p in selected
                    if states[p.name].status == "running"
                    and (stop_position is None or states[p.name].position < stop_position)
                    and (until_position is None or states[p.name].position < until_position)
                ]
                if not active:
                    break
                low = min(states[p.name].notification_id for p in active)
                batch = self.source.fetch(low, self.batch_size)
                if stop_position is not None:
                    batch = cut_batch(batch, stop_position)
                if not batch:
                    break
                # Projections at the same point share one transaction per batch (a rebuild,
                # a caught-up embedded runner); on any failure each goes alone, to isolate it.
                groups: dict[int, list[Projection]] = {}
                for projection in active:
                    groups.setdefault(states[projection.name].notification_id, []).append(projection)
                reached = max((e.position for _, e in batch if e is not None), default=0)
                with collector_paused():
                    for notification_id, members in groups.items():
                        todo = [item for item in batch if item[0] > notification_id]
                        if todo:
                            applied += self._apply_group(members, states, todo)
                    # Freed now, by reference counting: alive when the collector resumes, the
                    # batch's parsed entries would be walked by the collection that follows.
                    del batch, todo
                if progress is not None:
                    progress(reached)
        return applied

    def _apply_group(
        self, members: list[Projection], states: dict[str, TrackingState], todo: list[Notification]
    ) -> int:
        if len(members) > 1:
            events = [event for _, event in todo if event is not None]
            first = states[members[0].name].position
            if all(event.position == first + i + 1 for i, event in enumerate(events)):
                try:
                    self._commit([(p, states[p.name]) for p in members], todo[-1][0], events)
                    return len(events) * len(members)
                except _LostRace:
                    return 0
                except TRANSIENT_ERRORS:
                    raise
                except Exception:
                    log.debug("group batch failed; applying projections one at a time", exc_info=True)
        return sum(self._apply(p, states[p.name], todo) for p in members)

    def _apply(self, projection: Projection, state: TrackingState, todo: list[Notification]) -> int:
        events = [event for _, event in todo if event is not None]
        expected = state.position
        for event in events:
            expected += 1
            if event.position != expected:
                self._fail(
                    projection, state, expected, f"log position {expected} missing (next is {event.position})"
                )
                return 0
        try:
            self._commit([(projection, state)], todo[-1][0], events)
            return len(events)
        except _LostRace:
            return 0
        except TRANSIENT_ERRORS:
            raise
        except Exception:  # noqa: BLE001 - find the culprit one event at a time
            if len(todo) == 1:
                self._fail_with(projection, state, events)
                return 0
        done = 0
        for notification_id, maybe_event in todo:
            single = [maybe_event] if maybe_event is not None else []
            try:
                self._commit([(projection, state)], notification_id, single)
            except _LostRace:
                return done
            except TRANSIENT_ERRORS:
                raise
            except Exception:  # noqa: BLE001
                self._fail_with(projection, state, single)
                return done
            state = TrackingState(
                projection=state.projection,
                version=state.version,
                notification_id=notification_id,
                position=single[-1].position if single else state.position,
                status=state.status,
                error=None,
                failed_position=None,
            )
            done += len(single)
        return done

    def _commit(
        self,
        members: list[tuple[Projection, TrackingState]],
        notification_id: int,
        events: list[RecordedEvent],
    ) -> None:
        store = self.store
        with read_model_transaction(store) as cursor:
            for projection, state in members:
                position = events[-1].position if events else state.position
                # Tracking first: on both databases this takes the write lock, so the
                # compare-and-set decides before any read-model row is written.
                if not store.adapter.tracking_advance(
                    cursor,
                    projection.name,
                    expected_notification_id=state.notification_id,
                    notification_id=notification_id,
                    position=position,
                    updated_at=utc_now(),
                ):
                    raise _LostRace
                projection.apply(cursor, store, events)

    def _fail_with(self, projection: Projection, state: TrackingState, events: list[RecordedEvent]) -> None:
        """Re-run the failing apply to capture its error, then record the stop."""
        position = events[0].position if events else state.position + 1
        try:
            with self.store.transaction(commit=False) as cursor:
                projection.apply(cursor, self.store, events)
            message = "apply failed only inside a batch"
        except UnappliableEvent as exc:
            message = str(exc)
        except Exception as exc:  # noqa: BLE001 - the message is the point
            message = f"position {position}: {type(exc).__name__}: {exc}"
        self._fail(projection, state, position, message)

    def _fail(self, projection: Projection, state: TrackingState, position: int, message: str) -> None:
        log.error("projection %s stopped at position %d: %s", projection.name, position, message)
        store = self.store
        with store.transaction(commit=True) as cursor:
            cursor.execute(
                store.sql(
                    f"UPDATE {store.table(TRACKING_TABLE)} SET status='failed', error=?, "
                    "failed_position=?, updated_at=? WHERE projection=? AND notification_id=?"
                ),
                (message, position, utc_now(), projection.name, state.notification_id),
            )

    # -- rebuild, retry ----------------------------------------------------------
    def reset(self, names: Sequence[str] | None = None) -> None:
        """Empty the read models and their tracking in one transaction (position 0)."""
        selected = [self.projection(n) for n in names] if names is not None else self.projections
        store = self.store
        # Relaxed durability: a reset lost to a power cut leaves the models and their tracking
        # as they were. Tracking rows first, as a batch's commit takes them: on PostgreSQL
        # TRUNCATE locks whole tables, and a runner holding a tracking row could wait on one.
        with self._lock, read_model_transaction(store) as cursor:
            for projection in selected:
                cursor.execute(
                    store.sql(
                        f"UPDATE {store.table(TRACKING_TABLE)} SET version=?, notification_id=0, "
                        "position=0, status='running', error=NULL, failed_position=NULL, updated_at=? "
                        "WHERE projection=?"
                    ),
                    (projection.version, utc_now(), projection.name),
                )
            tables = [store.table(spec.name) for projection in selected for spec in projection.tables]
            for statement in store.adapter.empty_tables(tables):
                cursor.execute(statement)

    def rebuild(
        self, names: Sequence[str] | None = None, *, progress: Callable[[int], None] | None = None
    ) -> int:
        """Empty the read models and re-apply the whole log; returns entries applied.

        Query-only indexes are dropped for the bulk load and created once at the
        end; readers see an incomplete model until the rebuild has caught up.
        Batches are larger than a worker's (fewer, bigger commits)."""
        selected = [self.projection(n) for n in names] if names is not None else self.projections
        with self._lock:
            self.reset(names)
            drops = [statement for p in selected for statement in p.deferred_index_drops(self.store)]
            if drops:
                self.store.create_tables(*drops)
            batch_size, self.batch_size = self.batch_size, max(self.batch_size, REBUILD_BATCH)
            try:
                return self.catch_up(names=names, progress=progress)
            finally:
                self.batch_size = batch_size
                self.store.create_tables(*(statement for p in selected for statement in p.ddl(self.store)))

    def retry_failed(self) -> list[str]:
        """Let stopped projections try their failing event again (after a fix is deployed)."""
        store = self.store
        with store.transaction(commit=True) as cursor:
            cursor.execute(
                f"UPDATE {store.table(TRACKING_TABLE)} SET status='running', error=NULL, "
                "failed_position=NULL WHERE status='failed'"
            )
        return [name for name, state in self.states().items() if state.status == "running"]

    # -- lag, health, embedding -----------------------------------------------------
    def lag(self) -> list[ProjectionLag]:
        return read_lag(self.store, [p.name for p in self.projections], source=self.source)

    def health(self, *, max_lag: int | None = None, stall_s: float | None = None) -> dict[str, Any]:
        """`ok` is False when a projection stopped on an event or stalled: over `max_lag` entries
        behind, no progress for `stall_s` seconds (defaults: MAX_LAG_SETTING, STALL_SETTING)."""
        lag_bound = int(os.environ.get(MAX_LAG_SETTING, DEFAULT_MAX_LAG)) if max_lag is None else max_lag
        stall_bound = float(os.environ.get(STALL_SETTING, DEFAULT_STALL_S)) if stall_s is None else stall_s
        return health_report(self.lag(), lag_bound, stall_bound)

    def applied_position(self) -> int:
        """The position every projection has reached (the minimum)."""
        states = self.states()
        return min((states[p.name].position for p in self.projections), default=0)

    def apply_in_transaction(self, cursor: Any, committed: Sequence[tuple[int, RecordedEvent]]) -> None:
        """Apply entries inside the transaction that inserts them (one commit per batch):
        the projections right behind them take part (`projections.write_apply`)."""
        if not committed:
            return
        last = committed[-1][1].position
        self._applied_with_entries = (last, set())  # should the apply raise
        self._applied_with_entries = (
            last,
            apply_with_entries(self.store, self.projections, cursor, committed),
        )

    def attach(self, ledger: Ledger) -> None:
        """Apply each local commit's entries in its own transaction; anything not applied
        there (a projection behind, or failing) catches up right after, before append returns."""

        def after_commit(committed: Sequence[tuple[int, RecordedEvent]]) -> None:
            if not committed:
                return
            if serialised:
                self._apply_after_commit(committed)
            last = committed[-1][1].position
            through, applied = self._applied_with_entries
            if through == last and len(applied) == len(self.projections):
                return  # every read model took this batch in its own transaction
            self.catch_up(until_position=last)

        # Where appends hold a sequencer (PostgreSQL), read models are written right after
        # the commit in their own transaction, not under the sequencer: workers would queue
        # on it for work that needs no order between them (`lag` shows the gap meanwhile).
        serialised = ledger.store.adapter.serialises_appends
        if not serialised:
            ledger.in_transaction(self.apply_in_transaction)
        ledger.on_commit(after_commit)

    def _apply_after_commit(self, committed: Sequence[tuple[int, RecordedEvent]]) -> None:
        """`apply_in_transaction` in a transaction of its own, for entries just committed;
        what it could not apply is left to the catch-up that follows."""
        with self._lock:
            try:
                with read_model_transaction(self.store) as cursor:
                    self.apply_in_transaction(cursor, committed)
            except Exception as exc:  # noqa: BLE001 - the catch-up applies (or isolates) it
                self._applied_with_entries = (0, set())
                log.debug("read models not applied after the commit: %s", type(exc).__name__)


def embedded(ledger: Ledger, projections: Sequence[Projection] | None = None) -> ProjectionRunner:
    """A runner on the ledger's own database, caught up and attached for read-your-writes."""
    runner = ProjectionRunner(ledger.store, projections)
    runner.catch_up()
    runner.attach(ledger)
    return runner
