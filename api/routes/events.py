"""The event history: one event with its signature, filtered listings with
cursor pagination, and inclusion proofs."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Annotated, Any

from litestar import Response, Router, get
from litestar.di import Provide
from litestar.params import Parameter, QueryParameter

from api.api_error import ApiError, not_found
from api.routes import listing
from api.routes.common import CallDep, operation
from api.routes.listing import ID_PATTERN, listing_filter, order_of, refusing_bad_pages
from api.services import Services
from ledger.domain.entries import SYSTEM_TENANT, RecordedEvent
from ledger.domain.payloads import EventType
from ledger.evidence.bundle import proof_json
from ledger.schemas.reads import EventOut, EventPage, InclusionProofOut
from ledger.usecases.content import read_content, require_content_scope
from ledger.usecases.context import Caller
from ledger.usecases.ports import Order
from projections.views import HistoryFilter

Position = Annotated[int, Parameter(ge=1, le=2**53 - 1)]


def visible(event: RecordedEvent, tenant: str) -> bool:
    """A tenant sees its own entries and the ledger's public key entries; nothing else exists for it."""
    return event.tenant_id in (tenant, SYSTEM_TENANT)


def event_body(event: RecordedEvent) -> dict[str, Any]:
    return {"position": event.position, "leaf_hash": event.leaf_hash.hex(), "event": event.envelope}


ContentMode = Annotated[
    str,
    QueryParameter(
        name="content",
        pattern="^(sealed|plain)$",
        required=False,
        description="`plain` (scope `audit.content`): also the sealed fields (query, snippets, heading "
        "paths) in plain, or why they are unreadable (`erased`, `expired`); the read is recorded as a "
        "signed ContentRead entry",
    ),
]


def history_page(
    services: Services,
    caller: Caller,
    flt: HistoryFilter,
    *,
    cursor: str | None = None,
    limit: int = 100,
    content: str = "sealed",
    order: Order = "desc",
) -> dict[str, Any]:
    """A page of the tenant's events (newest first unless `order` is `asc`) and how many match."""
    tenant = caller.tenant_id
    if content == "plain":
        require_content_scope(caller)
    page = refusing_bad_pages(
        lambda: services.read_models.events(tenant, flt, cursor=cursor, limit=limit, order=order)
    )
    events = []
    for entry in page.items:
        event = services.ledger.get(entry.position)
        if event is not None and event.tenant_id == tenant:
            events.append(event)
    body: dict[str, Any] = {
        "events": [e.envelope for e in events],
        "next_cursor": page.next_cursor,
        "total": page.total,
        "total_exact": page.total_exact,
    }
    if content == "plain":
        plain = read_content(services.context, caller, events)
        body["content"] = {str(position): value for position, value in plain.items()}
    return body


@dataclass(frozen=True)
class HistoryListing(listing.LogFilters):
    """`GET /v1/events`' query (a dependency: Litestar reads its fields as query parameters)."""

    event_type: Annotated[list[EventType] | None, QueryParameter(name="type", required=False)] = None
    receipt_id: Annotated[
        str | None, QueryParameter(name="receipt_id", pattern=ID_PATTERN, required=False)
    ] = None
    cursor: listing.Cursor = None
    limit: listing.Limit = 100
    order: listing.OrderQuery = "desc"
    content: ContentMode = "sealed"

    def filter(self) -> HistoryFilter:
        types = list(self.event_type) if self.event_type else None
        return replace(listing_filter(HistoryFilter, vars(self)), types=types)


@get(
    "/",
    dependencies={"history": Provide(HistoryListing, sync_to_thread=False)},
    **operation("audit.read", "List events (filters, cursor pagination)", 422),
)
async def list_events(call: CallDep, history: HistoryListing) -> Response[EventPage]:
    """Newest first unless `order=asc`; `since` is inclusive, `until` exclusive (an RFC 3339
    time, or a day: the whole day); positions are inclusive."""
    page = partial(
        history_page,
        cursor=history.cursor,
        limit=history.limit,
        content=history.content,
        order=order_of(history.order),
    )
    return await call.answer(page, call.services, call.caller, history.filter())


def _event(services: Services, tenant: str, position: int) -> RecordedEvent:
    event = services.ledger.get(position)
    if event is None or not visible(event, tenant):
        raise not_found("event")
    return event


def _event_read(services: Services, caller: Caller, position: int, content: str) -> dict[str, Any]:
    if content == "plain":
        require_content_scope(caller)
    event = _event(services, caller.tenant_id, position)
    body = event_body(event)
    if content == "plain":
        body["content"] = read_content(services.context, caller, [event]).get(event.position)
    return body


@get("/{position:int}", **operation("audit.read", "One event with its signature", 404))
async def get_event(call: CallDep, position: Position, content: ContentMode = "sealed") -> Response[EventOut]:
    return await call.answer(_event_read, call.services, call.caller, position, content)


def _inclusion(services: Services, tenant: str, position: int, tree_size: int | None) -> dict[str, Any]:
    event = _event(services, tenant, position)
    ledger = services.ledger
    if tree_size is None:
        checkpoint = ledger.checkpoint_covering(position)
        size = checkpoint.tree_size
        checkpoint_json: dict[str, Any] | None = checkpoint.to_json()
    else:
        size = tree_size
        head = ledger.sync()
        if size > head:
            raise not_found(f"tree of size {size} (the log has {head} entries)")
        if size < position:
            raise ApiError(422, "invalid_range", f"tree_size must be at least the position ({position})")
        checkpoint_json = next((c.to_json() for c in ledger.checkpoints() if c.tree_size == size), None)
    hashes = ledger.inclusion_proof(position, size)
    return {
        "position": position,
        "leaf_hash": event.leaf_hash.hex(),
        "tree_size": size,
        "root": ledger.tree.root(size).hex(),
        "inclusion_proof": proof_json(position, size, hashes),
        "checkpoint": checkpoint_json,
    }


@get("/{position:int}/inclusion-proof", **operation("audit.read", "Inclusion proof of one event", 404, 422))
async def inclusion_proof(
    call: CallDep, position: Position, tree_size: listing.TreeSize = None
) -> Response[InclusionProofOut]:
    return await call.answer(_inclusion, call.services, call.caller.tenant_id, position, tree_size)


router = Router(path="/v1/events", route_handlers=[list_events, get_event, inclusion_proof], tags=["events"])
