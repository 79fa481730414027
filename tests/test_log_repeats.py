"""`RepeatFilter`: a failure that repeats is logged once (with its traceback), then one
line per interval with the count; other records and INFO lines pass untouched."""

from __future__ import annotations

import io
import logging
import re
import time

from ledger.storage.log_repeats import RepeatFilter


def _handler(interval_s: float) -> tuple[logging.Logger, io.StringIO, RepeatFilter]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    repeats = RepeatFilter(handler, interval_s)
    handler.addFilter(repeats)
    logger = logging.getLogger(f"test.repeats.{id(stream)}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    return logger, stream, repeats


def test_a_repeated_failure_is_logged_once_then_counted() -> None:
    logger, stream, repeats = _handler(0.3)
    for _ in range(2_000):
        try:
            raise OSError("database or disk is full")
        except OSError:
            logger.exception("storage unavailable: %s", "disk full")
    logger.info("an access line")  # INFO: never counted
    logger.warning("another kind of failure")
    time.sleep(0.6)  # the interval ends: its count is reported
    lines = stream.getvalue().splitlines()
    assert lines.count("storage unavailable: disk full") == 1
    assert sum(1 for line in lines if line.startswith("Traceback")) == 1
    summary = [line for line in lines if "[repeated" in line]
    assert len(summary) == 1 and re.fullmatch(
        r"storage unavailable: disk full \[repeated 1999 more times in 0\.\d s\]", summary[0]
    ), lines
    assert "an access line" in lines and "another kind of failure" in lines
    assert len(lines) < 20
    # A kind quiet for a whole interval starts afresh (logged in full again).
    time.sleep(0.4)
    logger.error("storage unavailable: %s", "disk full")
    repeats.flush()
    assert stream.getvalue().splitlines().count("storage unavailable: disk full") == 2


def test_a_zero_interval_logs_every_record() -> None:
    logger, stream, _ = _handler(0)
    for _ in range(5):
        logger.error("same failure")
    assert stream.getvalue().splitlines() == ["same failure"] * 5
