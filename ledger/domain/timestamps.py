"""Timestamps: the one form the ledger writes and the one parser it reads with.

Written form: RFC 3339 in UTC with a `Z` suffix, `2026-05-23T09:30:00.123456Z`
(microseconds: `recorded_at`, checkpoint and projection times; fixed width,
so they sort as text) or to the second, `2026-05-23T00:00:00Z` (retention
expiries, key and token bookkeeping, log lines). The parser accepts what the
API has always accepted (`datetime.fromisoformat`, `Z` for UTC, no offset
meaning UTC) and raises ValueError for anything else, impossible dates too.

Retention works in whole UTC days: `utc_day` names a day, `end_of_utc_day`
is the midnight that closes it.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from typing import Literal

Timespec = Literal["microseconds", "seconds"]
ONE_DAY = timedelta(days=1)


def _utc(moment: datetime) -> datetime:
    """`moment` in UTC; a naive datetime is taken to be UTC already."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def format_timestamp(moment: datetime, *, timespec: Timespec = "microseconds") -> str:
    """`moment` in the ledger's written form (see the module docstring)."""
    m = _utc(moment)
    text = f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}"
    return f"{text}.{m.microsecond:06d}Z" if timespec == "microseconds" else f"{text}Z"


def utc_now(*, timespec: Timespec = "microseconds") -> str:
    """The current time in the ledger's written form."""
    return format_timestamp(datetime.now(UTC), timespec=timespec)


def parse_timestamp(value: str) -> datetime:
    """An ISO 8601 / RFC 3339 timestamp as an aware UTC datetime.

    Raises ValueError for text that is not a timestamp or names an impossible
    moment (`2026-02-30`, hour 24).
    """
    try:
        return _utc(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except OverflowError:  # a valid moment whose UTC form leaves years 1-9999
        raise ValueError(f"timestamp out of range: {value[:40]}") from None


def utc_day(moment: datetime) -> str:
    """The UTC day `moment` falls on, `YYYY-MM-DD` (sorts as text)."""
    m = _utc(moment)
    return f"{m.year:04d}-{m.month:02d}-{m.day:02d}"


def end_of_utc_day(moment: datetime) -> datetime:
    """The UTC midnight that ends the day `moment` falls on (always later than `moment`)."""
    m = _utc(moment)
    return datetime(m.year, m.month, m.day, tzinfo=UTC) + ONE_DAY


# What a list's `since`/`until` takes: an RFC 3339 time (seconds at least, a zone) or a bare day.
BOUND_PATTERN = (
    r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"
    r"([Tt ]([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,9})?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d))?$"
)
BOUND_HELP = "an RFC 3339 time (2026-05-23T09:30:00Z) or a day (2026-05-23: the whole UTC day)"
_BOUND = re.compile(BOUND_PATTERN)


def parse_bound(value: str, *, end: bool = False) -> datetime:
    """A list's time bound: an RFC 3339 time as given, or a bare day as the whole UTC day
    (its midnight for a lower bound; with `end`, the next midnight, for an exclusive upper
    bound). ValueError, naming the accepted forms, for anything else."""
    if _BOUND.match(value) is None:
        raise ValueError(f"must be {BOUND_HELP}")
    try:
        if len(value) == 10:
            start = datetime.combine(date.fromisoformat(value), datetime.min.time(), UTC)
            return start + ONE_DAY if end else start
        return parse_timestamp(value[:10] + "T" + value[11:].upper())
    except (ValueError, OverflowError):
        raise ValueError(f"must be {BOUND_HELP} (this date or time does not exist)") from None


__all__ = [
    "BOUND_HELP",
    "BOUND_PATTERN",
    "ONE_DAY",
    "Timespec",
    "end_of_utc_day",
    "format_timestamp",
    "parse_bound",
    "parse_timestamp",
    "utc_day",
    "utc_now",
]
