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

from ledger.storage.adapters import AppendListener
from ledger.storage.log_repeats import log_failure
from ledger.storage.store import Store
from projections.runner import TRANSIENT_ERRORS, ProjectionRunner

log = logging.getLogger("citeledger.projections.worker")


class LogWaiter:
    """Blocks until the log may have grown, or `timeout` passes (the store adapter's
    append listener where the backend has one, else a plain sleep: polling)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._listener: AppendListener | None = store.adapter.listen_appends()
        self._listens = self._listener is not None  # the backend has notifications

    def wait(self, timeout: float, stop: threading.Event) -> None:
        if self._listener is None:
            stop.wait(timeout)
            if self._listens:  # lost earlier and the database was still down: try again
                self._listen()
            return
        try:
            self._listener.wait(timeout)
        except TRANSIENT_ERRORS as exc:
            log_failure(log, "lost the LISTEN connection; reconnecting", exc)
            self.close()
            stop.wait(timeout)
            self._listen()

    def _listen(self) -> None:
        try:
            self._listener = self.store.adapter.listen_appends()
        except TRANSIENT_ERRORS as exc:  # still down: poll, and try again next time
            log_failure(log, "could not LISTEN; polling until the database is back", exc)
            self._listener = None

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None


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
            except TRANSIENT_ERRORS as exc:
                log_failure(log, "database unavailable; retrying", exc)
                stop.wait(1.0)
                continue
            if after_pass is not None:
                after_pass(applied)
            if applied == 0:
                waiter.wait(poll_s, stop)
    finally:
        waiter.close()
