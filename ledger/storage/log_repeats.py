"""A failure that repeats is logged once, then counted.

While the store is full or read-only every request fails the same way; logging
each one (with its traceback) wrote megabytes a second. `RepeatFilter` sits on
a handler: the first record of a kind (logger, level, message template,
exception class) goes through whole; the next ones within `interval_s` are
only counted, and at the end of the interval one line says how many there were
(no traceback, nothing but the first record's own message). A kind that stays
quiet for a whole interval starts afresh. Only WARNING and above are counted:
the access log's INFO lines are each different and each wanted.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from ledger.config import SettingError

DEFAULT_INTERVAL_S = 60.0
INTERVAL_SETTING = "CITELEDGER_LOG_REPEAT_INTERVAL_S"
MAX_KINDS = 1_000  # kinds remembered at once; the oldest is forgotten beyond it
_SUMMARY = "citeledger_repeat_summary"

Kind = tuple[str, int, str, str]


@dataclass
class _Window:
    started: float
    first: logging.LogRecord
    suppressed: int = 0
    timer: threading.Timer | None = None


class RepeatFilter(logging.Filter):
    """Passes the first record of a kind, counts the repeats, reports the count once per
    interval through `handler` (the handler this filter is attached to)."""

    def __init__(self, handler: logging.Handler, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        super().__init__()
        self.handler = handler
        self.interval_s = interval_s
        self._windows: OrderedDict[Kind, _Window] = OrderedDict()
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or getattr(record, _SUMMARY, False) or self.interval_s <= 0:
            return True
        kind = _kind(record)
        now = time.monotonic()
        with self._lock:
            window = self._windows.get(kind)
            if window is None or (window.suppressed == 0 and now - window.started >= self.interval_s):
                self._windows[kind] = _Window(started=now, first=record)
                self._windows.move_to_end(kind)
                while len(self._windows) > MAX_KINDS:
                    _, dropped = self._windows.popitem(last=False)
                    if dropped.timer is not None:
                        dropped.timer.cancel()
                return True
            window.suppressed += 1
            if window.timer is None:
                window.timer = threading.Timer(
                    max(0.0, window.started + self.interval_s - now), self._report, (kind,)
                )
                window.timer.daemon = True
                window.timer.start()
            return False

    def _report(self, kind: Kind) -> None:
        """End of an interval with repeats: one line with their count; a new interval begins."""
        with self._lock:
            window = self._windows.get(kind)
            if window is None or window.suppressed == 0:
                return
            count, window.suppressed, window.timer = window.suppressed, 0, None
            elapsed = time.monotonic() - window.started
            window.started = time.monotonic()
            first = window.first
        summary = logging.LogRecord(
            first.name,
            first.levelno,
            first.pathname,
            first.lineno,
            "%s [repeated %d more times in %.1f s]",
            (_first_line(first), count, elapsed),
            None,
        )
        setattr(summary, _SUMMARY, True)
        self.handler.handle(summary)

    def flush(self) -> None:
        """Report every pending count now (at shutdown)."""
        with self._lock:
            kinds = list(self._windows)
        for kind in kinds:
            self._report(kind)


def _kind(record: logging.LogRecord) -> Kind:
    exc_type = record.exc_info[0] if record.exc_info and record.exc_info[0] else None
    return (record.name, record.levelno, str(record.msg), exc_type.__name__ if exc_type else "")


def _first_line(record: logging.LogRecord) -> str:
    try:
        message = record.getMessage()
    except Exception:  # noqa: BLE001 - a record whose arguments do not fit its template
        message = str(record.msg)
    lines = message.splitlines()
    return lines[0][:300] if lines else ""


def interval_from_env(env: Mapping[str, str] | None = None) -> float:
    """`CITELEDGER_LOG_REPEAT_INTERVAL_S` (seconds, 0 logs every repeat); `SettingError` names a bad one."""
    raw = (os.environ if env is None else env).get(INTERVAL_SETTING, str(DEFAULT_INTERVAL_S))
    try:
        value = float(raw)
    except ValueError:
        raise SettingError(f"{INTERVAL_SETTING}={raw!r}: must be a number") from None
    if not 0 <= value <= 86_400:
        raise SettingError(f"{INTERVAL_SETTING}={raw}: must be between 0 and 86400")
    return value


def install(interval_s: float = DEFAULT_INTERVAL_S, loggers: tuple[str, ...] = ("", "uvicorn")) -> None:
    """Put a `RepeatFilter` on every handler of `loggers` (the root logger, where ours
    propagate, and uvicorn's own); a handler that has one keeps it. With no handler on
    the root, one to stderr is added first (a worker process uvicorn spawned has none)."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(format="%(message)s")
    for name in loggers:
        for handler in logging.getLogger(name).handlers:
            if not any(isinstance(f, RepeatFilter) for f in handler.filters):
                handler.addFilter(RepeatFilter(handler, interval_s))


def flush_all(loggers: tuple[str, ...] = ("", "uvicorn")) -> None:
    for name in loggers:
        for handler in logging.getLogger(name).handlers:
            for item in handler.filters:
                if isinstance(item, RepeatFilter):
                    item.flush()


def log_failure(logger: logging.Logger, what: str, exc: BaseException) -> None:
    """A background task's failure: one line without a traceback when the store cannot serve
    (its state, not a bug; it lasts until the fault is gone), else with the traceback."""
    from ledger.storage.adapters import store_unavailable  # the adapters import the drivers

    if store_unavailable(exc):
        reason = str(exc).strip().splitlines()
        logger.warning("%s: storage unavailable: %s", what, reason[0][:200] if reason else type(exc).__name__)
    else:
        logger.error(what, exc_info=exc)
