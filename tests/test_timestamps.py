"""The one timestamp form and parser (ledger.timestamps)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from ledger.domain.timestamps import end_of_utc_day, format_timestamp, parse_timestamp, utc_day, utc_now

LOG_FORM = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")


def test_written_forms() -> None:
    moment = datetime(2026, 5, 23, 9, 30, 1, 42, tzinfo=UTC)
    assert format_timestamp(moment) == "2026-05-23T09:30:01.000042Z"
    assert format_timestamp(moment, timespec="seconds") == "2026-05-23T09:30:01Z"
    assert format_timestamp(moment.astimezone(timezone(timedelta(hours=-5)))) == "2026-05-23T09:30:01.000042Z"
    assert format_timestamp(datetime(5, 1, 2, tzinfo=UTC)) == "0005-01-02T00:00:00.000000Z"  # fixed width
    assert LOG_FORM.match(utc_now())
    assert re.match(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$", utc_now(timespec="seconds"))


def test_parse_accepts_what_the_api_accepts() -> None:
    expected = datetime(2026, 5, 23, 9, 30, tzinfo=UTC)
    for text in (
        "2026-05-23T09:30:00Z",
        "2026-05-23T09:30:00.000000Z",
        "2026-05-23T09:30:00+00:00",
        "2026-05-23T11:30:00+02:00",
        "2026-05-23T09:30:00",  # no offset: UTC
        "2026-05-23 09:30",
    ):
        parsed = parse_timestamp(text)
        assert parsed == expected and parsed.tzinfo is UTC, text
    moment = datetime(2026, 5, 23, 9, 30, 1, 42, tzinfo=UTC)
    assert parse_timestamp(format_timestamp(moment)) == moment


@pytest.mark.parametrize(
    "text", ["", "yesterday", "2026-02-30T00:00:00Z", "2026-13-01T00:00:00Z", "2026-05-23T24:00:00Z"]
)
def test_parse_rejects_impossible_moments(text: str) -> None:
    with pytest.raises(ValueError):
        parse_timestamp(text)


def test_day_helpers() -> None:
    late = datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC)
    assert utc_day(late) == "2026-12-31"
    assert end_of_utc_day(late) == datetime(2027, 1, 1, tzinfo=UTC)
    midnight = datetime(2026, 5, 23, tzinfo=UTC)
    assert end_of_utc_day(midnight) == datetime(2026, 5, 24, tzinfo=UTC)
    assert utc_day(datetime(2026, 5, 23, 1, 0, tzinfo=timezone(timedelta(hours=2)))) == "2026-05-22"
