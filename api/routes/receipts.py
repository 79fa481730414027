"""Receipts: one receipt, its portable bundle (with the proofs of the cited
documents), and filtered listings."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Response, Router, get
from litestar.params import Parameter, QueryParameter

from api.auth import requires
from api.contract import ApiError, not_found
from api.routes.common import AnyRequest, caller, ok
from api.routes.events import ID_PATTERN, Cursor, parse_time
from api.services import Services
from ledger.bundle import build_bundle, proof_json
from ledger.entries import RecordedEvent
from projections.queries import InvalidCursor, ReceiptFilter, ReceiptView

ReceiptId = Annotated[str, Parameter(pattern=ID_PATTERN, max_length=128)]


def receipt_body(envelope: dict[str, Any]) -> dict[str, Any]:
    payload = envelope["payload"]
    snapshot = payload.get("policy_snapshot")
    return {
        "receipt_id": payload["receipt_id"],
        "position": envelope["position"],
        "recorded_at": envelope["recorded_at"],
        "actor": envelope["actor"],
        "engine": payload["engine"],
        "mode": payload["mode"],
        "status": payload["status"],
        "parent_receipt_id": payload.get("parent_receipt_id"),
        "context_hash": payload["context_hash"],
        "policy_bundle_hash": snapshot.get("bundle_hash") if snapshot else None,
        "citations": [
            {
                "citation_id": e["citation_id"],
                "document_id": e["document_id"],
                "version_id": e.get("version_id"),
                "chunk_id": e["chunk_id"],
                "path": e["path"],
                "locator": {"start_line": e["locator"]["start_line"], "end_line": e["locator"]["end_line"]},
                "score": e["score"],
                "sensitivity": e["sensitivity"],
                "expires_at": e.get("expires_at"),
            }
            for e in payload["selected_entries"]
        ],
        "kid": envelope["kid"],
        "signature": envelope["signature"],
        "event": envelope,
    }


def find_receipt(services: Services, tenant: str, receipt_id: str) -> RecordedEvent:
    cached = services.receipt_cache.get(tenant, receipt_id)
    if cached is not None:
        return cached
    catalog = services.catalog
    view = services.read_models.receipt(tenant, receipt_id)
    position = view.position if view is not None else catalog.receipt_position(tenant, receipt_id)
    if position is None:
        catalog.catch_up(services.ledger)
        position = catalog.receipt_position(tenant, receipt_id)
    event = services.ledger.get(position) if position is not None else None
    if event is None or event.tenant_id != tenant or event.type != "RetrievalRecorded":
        raise not_found("receipt")
    services.receipt_cache.put(tenant, receipt_id, event)
    return event


@get("/{receipt_id:str}", guards=[requires("audit.read")], summary="One receipt")
async def get_receipt(request: AnyRequest, receipt_id: ReceiptId) -> Response[Any]:
    services, principal, _ = caller(request)
    # A receipt is an immutable signed entry: once found it is served from memory,
    # without a thread hop or a database read.
    event = services.receipt_cache.get(principal.tenant, receipt_id)
    if event is None:
        event = await services.blocking(find_receipt, services, principal.tenant, receipt_id)
    return ok(request, receipt_body(event.envelope))


def bundle_for(services: Services, tenant: str, receipt_id: str) -> dict[str, Any]:
    event = find_receipt(services, tenant, receipt_id)
    ledger = services.ledger
    checkpoint = ledger.checkpoint_covering(event.position)
    size = checkpoint.tree_size
    refs = [(e["document_id"], e["chunk_id"]) for e in event.payload["selected_entries"]]
    chunks = services.catalog.chunks(tenant, refs)
    citations = []
    for entry in event.payload["selected_entries"]:
        chunk = chunks.get((entry["document_id"], entry["chunk_id"]))
        document: dict[str, Any] | None = None
        if chunk is not None and chunk.position <= size:
            doc_event = ledger.get(chunk.position)
            if doc_event is not None:
                document = {
                    "entry": doc_event.envelope,
                    "inclusion_proof": proof_json(
                        chunk.position, size, ledger.inclusion_proof(chunk.position, size)
                    ),
                }
        citations.append(
            {
                "citation_id": entry["citation_id"],
                "document_id": entry["document_id"],
                "chunk_id": entry["chunk_id"],
                "document": document,
            }
        )
    return build_bundle(ledger, event.position, extra={"citations": citations})


@get("/{receipt_id:str}/bundle", guards=[requires("audit.read")], summary="Portable receipt bundle")
async def get_bundle(request: AnyRequest, receipt_id: ReceiptId) -> Response[Any]:
    services, principal, _ = caller(request)
    bundle = await services.blocking(bundle_for, services, principal.tenant, receipt_id)
    return ok(request, {"bundle": bundle})


def _summary(view: ReceiptView) -> dict[str, Any]:
    return {
        "receipt_id": view.receipt_id,
        "position": view.position,
        "recorded_at": view.recorded_at,
        "actor": view.actor,
        "run_id": view.run_id,
        "trace_id": view.trace_id,
        "engine": view.engine,
        "mode": view.mode,
        "status": view.status,
        "parent_receipt_id": view.parent_receipt_id,
        "context_hash": view.context_hash,
        "citation_count": view.citation_count,
        "citation_ids": [e["citation_id"] for e in view.body.get("selected_entries", [])],
        "kid": view.kid,
        "signature": view.signature,
    }


def receipts_page(
    services: Services, tenant: str, flt: ReceiptFilter, cursor: str | None, limit: int
) -> dict[str, Any]:
    try:
        page = services.read_models.receipts(tenant, flt, cursor=cursor, limit=limit)
    except InvalidCursor:
        raise ApiError(400, "bad_request", "cursor is not one this API returned") from None
    except ValueError as exc:
        raise ApiError(400, "bad_request", str(exc)[:200]) from None
    return {"receipts": [_summary(view) for view in page.items], "next_cursor": page.next_cursor}


@get("/", guards=[requires("audit.read")], summary="List receipts (filters, cursor pagination)")
async def list_receipts(
    request: AnyRequest,
    mode: Annotated[
        str | None, QueryParameter(name="mode", pattern="^(live|as_of_replay)$", required=False)
    ] = None,
    status: Annotated[
        str | None,
        QueryParameter(name="status", pattern="^(ok|no_hit|denied|timeout|error)$", required=False),
    ] = None,
    engine: Annotated[
        str | None, QueryParameter(name="engine", max_length=80, pattern=ID_PATTERN, required=False)
    ] = None,
    actor: Annotated[str | None, QueryParameter(name="actor", pattern=ID_PATTERN, required=False)] = None,
    trace_id: Annotated[
        str | None, QueryParameter(name="trace_id", pattern=ID_PATTERN, required=False)
    ] = None,
    run_id: Annotated[str | None, QueryParameter(name="run_id", pattern=ID_PATTERN, required=False)] = None,
    parent_receipt_id: Annotated[
        str | None, QueryParameter(name="parent_receipt_id", pattern=ID_PATTERN, required=False)
    ] = None,
    since: Annotated[str | None, QueryParameter(name="since", max_length=40, required=False)] = None,
    until: Annotated[str | None, QueryParameter(name="until", max_length=40, required=False)] = None,
    from_position: Annotated[
        int | None, QueryParameter(name="from_position", ge=1, le=2**53 - 1, required=False)
    ] = None,
    to_position: Annotated[
        int | None, QueryParameter(name="to_position", ge=1, le=2**53 - 1, required=False)
    ] = None,
    cursor: Cursor = None,
    limit: Annotated[int, QueryParameter(name="limit", ge=1, le=500)] = 100,
) -> Response[Any]:
    """`since` is inclusive, `until` exclusive (RFC 3339); positions are inclusive."""
    services, principal, _ = caller(request)
    parse_time(since, "since")
    parse_time(until, "until")
    flt = ReceiptFilter(
        mode=mode,
        status=status,
        engine=engine,
        actor=actor,
        trace_id=trace_id,
        run_id=run_id,
        parent_receipt_id=parent_receipt_id,
        from_position=from_position,
        to_position=to_position,
        recorded_from=since,
        recorded_to=until,
    )
    body = await services.blocking(receipts_page, services, principal.tenant, flt, cursor, limit)
    return ok(request, body)


router = Router(
    path="/v1/receipts", route_handlers=[get_receipt, get_bundle, list_receipts], tags=["receipts"]
)
