"""What every list route shares: the query parameters that filter and page a listing
(ids, time and position bounds, cursor, limit) and the refusals of a bad page request.
`GET /v1/events` and `GET /v1/receipts` declare their parameters with these, and the
console's lists and MCP page through the same functions."""

# No `from __future__ import annotations`: `LogFilters` is a Litestar dependency subclassed in
# other modules, and Litestar resolves its field annotations at run time.

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Annotated, Any, TypeVar

from litestar.params import QueryParameter

from api.api_error import ApiError
from ledger.domain.fields import IDENTIFIER_PATTERN
from ledger.domain.timestamps import BOUND_HELP, BOUND_PATTERN, format_timestamp, parse_bound
from ledger.retrieval.question_words import BadQuestionSearch
from ledger.usecases.ports import Order
from projections.views import InvalidCursor

T = TypeVar("T")
F = TypeVar("F")
ID_PATTERN = IDENTIFIER_PATTERN
MAX_POSITION = 2**53 - 1

_BOUND = re.compile(BOUND_PATTERN)
ORDERS = ("desc", "asc")
RECEIPT_STATUSES = ("ok", "no_hit", "denied", "timeout", "error")
RECEIPT_KINDS = ("search", "external", "replay")
RECEIPT_MODES = ("live", "as_of_replay")
TIME_PATTERN = BOUND_PATTERN


def time_bound(value: str | None, name: str, *, end: bool = False) -> str | None:
    """A `since`/`until` bound in the ledger's written form (text order is time order): an
    RFC 3339 time, or a bare day as the whole UTC day (`end`: the midnight after it)."""
    if value is None:
        return None
    try:
        return format_timestamp(parse_bound(value, end=end))
    except ValueError as exc:
        # The documented shape but no such moment (2026-02-30, year 0): a rule, not a form.
        status, code = (422, "invalid_time") if _BOUND.match(value) else (400, "bad_request")
        raise ApiError(status, code, f"{name} {exc}") from None


def choice(value: str | None, name: str, allowed: tuple[str, ...]) -> str | None:
    """`value` if it is one of `allowed`: else a 400 listing them (never a silently empty list)."""
    if value is not None and value not in allowed:
        raise ApiError(400, "bad_request", f"{name} must be one of: {', '.join(allowed)}")
    return value


def listing_filter(cls: Callable[..., F], query: Mapping[str, Any]) -> F:
    """A listing's filter (`HistoryFilter`, `ReceiptFilter`) from its query's values by name (the
    HTTP parameters, the MCP tool's arguments): `since`/`until` become checked bounds on
    recorded_at in the ledger's written form; what is not a filter (cursor, limit) is left out."""
    names = {field.name for field in dataclasses.fields(cls)}  # type: ignore[arg-type]
    given = {name: value for name, value in query.items() if name in names}
    for name, allowed in (("status", RECEIPT_STATUSES), ("kind", RECEIPT_KINDS), ("mode", RECEIPT_MODES)):
        if name in given:
            choice(given[name], name, allowed)
    since = time_bound(query.get("since"), "since")
    until = time_bound(query.get("until"), "until", end=True)
    return cls(**given, recorded_from=since, recorded_to=until)


def order_of(value: str | None) -> Order:
    """A list's order: `desc` (newest first, the default) or `asc`."""
    return "asc" if choice(value, "order", ORDERS) == "asc" else "desc"


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
    except BadQuestionSearch as exc:  # a well-formed q the question index cannot search
        raise ApiError(422, "unprocessable", str(exc)[:200]) from None
    except ValueError as exc:
        raise ApiError(400, "bad_request", str(exc)[:200]) from None


def _moment(name: str, description: str) -> Any:
    """An optional bound on recorded_at, checked by `time_bound` (a 400 naming it)."""
    return QueryParameter(
        name=name,
        max_length=40,
        required=False,
        description=f"{description}: {BOUND_HELP}",
        # Documented, not enforced by the framework: its refusal would quote the pattern.
        schema_extra={"pattern": BOUND_PATTERN},
    )


def enum_query(name: str, allowed: tuple[str, ...], description: str) -> Any:
    """An optional choice, checked by `choice` (a 400 listing the values), shown as an enum."""
    return QueryParameter(
        name=name,
        max_length=20,
        required=False,
        description=description,
        schema_extra={"enum": list(allowed)},
    )


def _id(name: str) -> Any:
    return QueryParameter(name=name, pattern=ID_PATTERN, required=False)


def position_query(name: str) -> Any:
    """An optional query parameter naming a log position or tree size."""
    return QueryParameter(name=name, ge=1, le=MAX_POSITION, required=False)


Cursor = Annotated[
    str | None, QueryParameter(name="cursor", max_length=64, pattern=r"^[A-Za-z0-9_-]+$", required=False)
]
Since = Annotated[str | None, _moment("since", "Recorded at or after")]
Until = Annotated[str | None, _moment("until", "Recorded before (a day: up to its end)")]
OrderQuery = Annotated[
    str, enum_query("order", ORDERS, "`desc`: newest first (the default); `asc`: oldest first")
]
FromPosition = Annotated[int | None, position_query("from_position")]
ToPosition = Annotated[int | None, position_query("to_position")]
TreeSize = Annotated[int | None, position_query("tree_size")]
Limit = Annotated[int, QueryParameter(name="limit", ge=1, le=500)]
Actor = Annotated[str | None, _id("actor")]
TraceId = Annotated[str | None, _id("trace_id")]
RunId = Annotated[str | None, _id("run_id")]


@dataclasses.dataclass(frozen=True)
class LogFilters:
    """The query filters the event and receipt listings share (as Litestar dependencies their
    fields are read as query parameters): who wrote an entry, under which run and trace, when,
    and where in the log."""

    actor: Actor = None
    trace_id: TraceId = None
    run_id: RunId = None
    since: Since = None
    until: Until = None
    from_position: FromPosition = None
    to_position: ToPosition = None
