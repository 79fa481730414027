"""The scale-out projection worker: follows the log until told to stop.

After each pass it waits for new entries: on PostgreSQL it LISTENs on the
channel eventsourcing NOTIFYs on every insert (so lag is one round trip, not
a poll interval); on SQLite, which has no notifications, it polls.
A transient database error is logged and retried; an event a projection
cannot apply stops that projection only (see `runner`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import psycopg

from ledger.store import Store, pg_connect
from projections.runner import TRANSIENT_ERRORS, ProjectionRunner

log = logging.getLogger("citeledger.projections.worker")


class LogWaiter:
    """Blocks until the log may have grown, or `timeout` passes."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._conn: psycopg.Connection[Any] | None = None
        if store.dialect == "postgres":
            self._listen()

    def _listen(self) -> None:
        self._conn = pg_connect(self.store.config)
        channel = self.store.recorder.channel_name
        self._conn.execute(f'LISTEN "{channel}"')

    def wait(self, timeout: float, stop: threading.Event) -> None:
        if self._conn is None:
            stop.wait(timeout)
            return
        try:
            for _ in self._conn.notifies(timeout=timeout, stop_after=1):
                pass
        except psycopg.OperationalError:
            log.warning("lost the LISTEN connection; reconnecting", exc_info=True)
            self.close()
            stop.wait(timeout)
            self._listen()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def run_worker(
    runner: ProjectionRunner,
    stop: threading.Event,
    *,
    poll_s: float = 0.5,
    after_pass: Callable[[int], None] | None = None,
) -> None:
    """Apply the log until `stop` is set. `after_pass(applied)` runs after each pass."""
    waiter = LogWaiter(runner.store)
    try:
        while not stop.is_set():
            try:
                applied = runner.catch_up(interrupt=stop)
            except TRANSIENT_ERRORS:
                log.warning("database unavailable; retrying", exc_info=True)
                stop.wait(1.0)
                continue
            if after_pass is not None:
                after_pass(applied)
            if applied == 0:
                waiter.wait(poll_s, stop)
    finally:
        waiter.close()
