"""What every list route shares: the query parameters that filter and page a listing
(ids, time and position bounds, cursor, limit) and the refusals of a bad page request.
`GET /v1/events` and `GET /v1/receipts` declare their parameters with these, and the
console's lists and MCP page through the same functions."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from litestar.openapi.spec.enums import OpenAPIFormat
from litestar.params import QueryParameter

from api.api_error import ApiError
from ledger.domain.fields import IDENTIFIER_PATTERN
from ledger.domain.timestamps import format_timestamp, parse_timestamp
from projections.queries import InvalidCursor

T = TypeVar("T")
ID_PATTERN = IDENTIFIER_PATTERN
MAX_POSITION = 2**53 - 1

# RFC 3339 date-time (ISO 8601 profile), as the schema documents it: the rule the server checks.
TIME_PATTERN = r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$"
_TIME = re.compile(TIME_PATTERN)


def parse_time(value: str | None, name: str) -> dt.datetime | None:
    if value is None:
        return None
    try:
        if not _TIME.match(value):
            raise ValueError(value)
        return parse_timestamp(value[:10] + "T" + value[11:].upper())
    except ValueError:
        raise ApiError(
            400, "bad_request", f"{name} must be an RFC 3339 timestamp, e.g. 2026-05-23T09:30:00Z"
        ) from None


def time_bound(value: str | None, name: str) -> str | None:
    """A `since`/`until` bound in the ledger's written form (text order is time order)."""
    moment = parse_time(value, name)
    return None if moment is None else format_timestamp(moment)


def invalid_cursor() -> ApiError:
    """A cursor of the right shape that this API never returned (or for another filter)."""
    return ApiError(422, "invalid_cursor", "cursor is not one this API returned for these filters")


def refusing_bad_pages(read: Callable[[], T]) -> T:
    """`read()` with a page request's refusals: an unknown cursor is a 422, any other bad
    value (a limit, an order, a time) a 400 naming it."""
    try:
        return read()
    except InvalidCursor:
        raise invalid_cursor() from None
    except ValueError as exc:
        raise ApiError(400, "bad_request", str(exc)[:200]) from None


def _moment(name: str, description: str) -> Any:
    """An optional RFC 3339 query parameter bounding recorded_at."""
    return QueryParameter(
        name=name,
        max_length=40,
        pattern=TIME_PATTERN,
        format=OpenAPIFormat.DATE_TIME,
        required=False,
        description=description,
    )


def _id(name: str) -> Any:
    return QueryParameter(name=name, pattern=ID_PATTERN, required=False)


def _position(name: str) -> Any:
    return QueryParameter(name=name, ge=1, le=MAX_POSITION, required=False)


Cursor = Annotated[
    str | None, QueryParameter(name="cursor", max_length=64, pattern=r"^[A-Za-z0-9_-]+$", required=False)
]
Since = Annotated[str | None, _moment("since", "Inclusive lower bound on recorded_at (RFC 3339)")]
Until = Annotated[str | None, _moment("until", "Exclusive upper bound on recorded_at (RFC 3339)")]
FromPosition = Annotated[int | None, _position("from_position")]
ToPosition = Annotated[int | None, _position("to_position")]
Limit = Annotated[int, QueryParameter(name="limit", ge=1, le=500)]
Actor = Annotated[str | None, _id("actor")]
TraceId = Annotated[str | None, _id("trace_id")]
RunId = Annotated[str | None, _id("run_id")]
