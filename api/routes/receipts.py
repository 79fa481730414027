"""Receipts: one receipt, its portable bundle (with the proofs of the cited
documents), and filtered listings."""

# No `from __future__ import annotations`: `ReceiptFilters` is subclassed in another module
# (`api.routes.receipt_export`), where Litestar reads its fields' annotations as objects.

from dataclasses import dataclass
from typing import Annotated, Any

from litestar import Response, Router, get, post
from litestar.di import Provide
from litestar.params import Parameter, QueryParameter

from api.routes import listing
from api.routes.common import CallDep, IdempotencyKeyHeader, operation
from api.routes.events import ContentMode
from api.routes.listing import ID_PATTERN, listing_filter, order_of, refusing_bad_pages
from api.services import Services
from ledger.domain.entries import RecordedEvent
from ledger.retrieval.question_words import MAX_SEARCH_CHARS, MAX_SEARCH_WORDS
from ledger.schemas.reads import BundleOut, ReceiptOut, ReceiptPage, ReplayOut
from ledger.usecases.content import require_content_scope
from ledger.usecases.context import Caller, Result
from ledger.usecases.errors import NotFound
from ledger.usecases.ports import Order, ReceiptFilter
from ledger.usecases.receipt_reads import receipt_detail, receipts_page
from ledger.usecases.receipts import receipt_bundle, receipt_cose, receipt_with_chain
from ledger.usecases.replay import replay

RECEIPT_ID_MAX_CHARS = 128
ReceiptId = Annotated[str, Parameter(pattern=ID_PATTERN, max_length=RECEIPT_ID_MAX_CHARS)]


@get("/{receipt_id:str}", **operation("audit.read", "One receipt", 404))
async def get_receipt(
    call: CallDep, receipt_id: ReceiptId, content: ContentMode = "sealed"
) -> Response[ReceiptOut]:
    plain = content == "plain"
    if plain:
        require_content_scope(call.caller)  # before anything is looked up
    return call.ok(await receipt_answer(call.services, call.caller, receipt_id, content=plain))


async def receipt_answer(
    services: Services, caller: Caller, receipt_id: str, *, content: bool = False
) -> dict[str, Any]:
    """One receipt with its replay chain, sources and rules (the HTTP route and the MCP tool and
    resource): one indexed lookup of the entry and its replays; with `content`, its sealed
    fields in plain (a recorded read)."""

    def read() -> dict[str, Any]:
        event, chain = _find(services, caller.tenant_id, receipt_id)
        return receipt_detail(services.context, caller, event, chain, content=content)

    return await services.blocking(read)


def _find(services: Services, tenant_id: str, receipt_id: str) -> tuple[RecordedEvent, dict[str, Any]]:
    """One lookup (the entry, unless held in memory, and the replays); a receipt recorded
    through another process a moment ago is found after one follow round."""
    try:
        return receipt_with_chain(services.context, tenant_id, receipt_id)
    except NotFound:
        services.follow_now()
        return receipt_with_chain(services.context, tenant_id, receipt_id)


@get("/{receipt_id:str}/bundle", **operation("audit.read", "Portable receipt bundle", 404))
async def get_bundle(
    call: CallDep,
    receipt_id: ReceiptId,
    checkpoint: Annotated[
        str,
        QueryParameter(
            name="checkpoint",
            pattern="^(first|latest)$",
            required=False,
            description="`first`: the first checkpoint covering the receipt (default); `latest`: the "
            "newest one (the receipt is still in the log as it stands)",
        ),
    ] = "first",
) -> Response[BundleOut]:
    context, tenant_id, latest = call.services.context, call.caller.tenant_id, checkpoint == "latest"
    bundle = await call.services.blocking(
        lambda: receipt_bundle(context, tenant_id, receipt_id, latest=latest)
    )
    return call.ok({"bundle": bundle})


COSE_SUMMARY = (
    "The receipt's inclusion proof as a COSE Receipt (RFC 9942: COSE_Sign1, vds RFC9162_SHA256, "
    "detached root)"
)


@get(
    "/{receipt_id:str}/receipt.cose",
    media_type="application/cose",
    **operation("audit.read", COSE_SUMMARY, 404),
)
async def get_cose_receipt(call: CallDep, receipt_id: ReceiptId) -> Response[bytes]:
    services = call.services
    body = await services.blocking(receipt_cose, services.context, call.caller.tenant_id, receipt_id)
    return Response(body, media_type="application/cose")


REPLAY_SUMMARY = "Replay a receipt under its frozen policy: integrity, data drift, policy drift"


@post(
    "/{receipt_id:str}/replay",
    status_code=201,
    **operation("replay.run", REPLAY_SUMMARY, 404, 409, 422, dedup=ReplayOut),
)
async def post_replay(
    call: CallDep,
    receipt_id: ReceiptId,
    at_position: Annotated[
        int | None, QueryParameter(name="at_position", ge=1, le=2**53 - 1, required=False)
    ] = None,
    idempotency_key: IdempotencyKeyHeader = None,
) -> Response[ReplayOut]:
    """201 with the replay receipt's id; 200 with `replay_receipt_id: null` when recording the
    replay failed (the diff is still the answer)."""
    route, body = "POST /v1/receipts/{id}/replay", {"receipt_id": receipt_id, "at_position": at_position}

    def run(keyed: Caller) -> Result:
        return replay(call.services.context, keyed, receipt_id, at_position)

    return await call.write(idempotency_key, route, body, run)


def receipt_page(
    services: Services,
    caller: Caller,
    flt: ReceiptFilter,
    cursor: str | None,
    limit: int,
    order: Order,
    content: str,
) -> dict[str, Any]:
    """A page of receipts with the contract's refusals (the HTTP route and the MCP tool)."""
    return refusing_bad_pages(
        lambda: receipts_page(
            services.context,
            services.read_models,
            caller,
            flt,
            cursor=cursor,
            limit=limit,
            order=order,
            content=content == "plain",
        )
    )


@dataclass(frozen=True)
class ReceiptFilters(listing.LogFilters):
    """`GET /v1/receipts`' filters, shared by its export (a dependency: Litestar reads its fields
    as query parameters)."""

    kind: Annotated[
        str | None,
        listing.enum_query(
            "kind",
            listing.RECEIPT_KINDS,
            "`search`: the ledger ran it; `external`: another engine's, recorded; `replay`",
        ),
    ] = None
    mode: Annotated[
        str | None, listing.enum_query("mode", listing.RECEIPT_MODES, "`as_of_replay`: replays")
    ] = None
    status: Annotated[
        str | None, listing.enum_query("status", listing.RECEIPT_STATUSES, "The receipt's outcome")
    ] = None
    engine: Annotated[
        str | None, QueryParameter(name="engine", max_length=80, pattern=ID_PATTERN, required=False)
    ] = None
    parent_receipt_id: Annotated[
        str | None, QueryParameter(name="parent_receipt_id", pattern=ID_PATTERN, required=False)
    ] = None
    task_id: Annotated[str | None, QueryParameter(name="task_id", pattern=ID_PATTERN, required=False)] = None
    document_id: Annotated[
        str | None,
        QueryParameter(
            name="document_id",
            pattern=ID_PATTERN,
            required=False,
            description="Receipts citing this document",
        ),
    ] = None
    order: listing.OrderQuery = "desc"

    def filter(self) -> ReceiptFilter:
        return listing_filter(ReceiptFilter, vars(self))


@dataclass(frozen=True)
class ReceiptListing(ReceiptFilters):
    """`GET /v1/receipts`' query: the filters, the question words (not on the export) and the page."""

    q: Annotated[
        str | None,
        QueryParameter(
            name="q",
            min_length=1,
            max_length=MAX_SEARCH_CHARS,
            required=False,
            description="Receipts whose question holds every one of these words (at most "
            f"{MAX_SEARCH_WORDS}; matched as search matches them). Needs audit.content; each "
            "search is recorded as a signed ContentRead",
        ),
    ] = None
    cursor: listing.Cursor = None
    limit: listing.Limit = 100
    content: ContentMode = "sealed"


@get(
    "/",
    dependencies={"receipts": Provide(ReceiptListing, sync_to_thread=False)},
    **operation("audit.read", "List receipts (filters, cursor pagination, total)", 422),
)
async def list_receipts(call: CallDep, receipts: ReceiptListing) -> Response[ReceiptPage]:
    """Newest first unless `order=asc`; `since` is inclusive, `until` exclusive (an RFC 3339
    time, or a day: the whole day); positions are inclusive. `total` counts every match
    (`total_exact: false`: more than that many)."""
    page = (receipts.filter(), receipts.cursor, receipts.limit, order_of(receipts.order), receipts.content)
    return await call.answer(receipt_page, call.services, call.caller, *page)


router = Router(
    path="/v1/receipts",
    route_handlers=[get_receipt, get_bundle, get_cose_receipt, post_replay, list_receipts],
    tags=["receipts"],
)
