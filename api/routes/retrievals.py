"""Retrievals: a service posts a retrieval it ran itself (`ledger.usecases.retrievals`)."""

from __future__ import annotations

from litestar import Response, Router, post

from api.auth import requires
from api.openapi import contract
from api.responses import ReceiptRecordedOut
from api.routes.common import AnyRequest, CallerDep, IdempotencyKeyHeader, ServicesDep, write
from ledger.usecases.commands import RetrievalIn
from ledger.usecases.retrievals import record_retrieval


@post(
    "/",
    guards=[requires("retrieval.write")],
    status_code=201,
    summary="Record an external retrieval receipt",
    **contract(404, 409, 413, 422, dedup=ReceiptRecordedOut),
)
async def post_retrieval(
    request: AnyRequest,
    services: ServicesDep,
    caller: CallerDep,
    data: RetrievalIn,
    idempotency_key: IdempotencyKeyHeader = None,
) -> Response[ReceiptRecordedOut]:
    return await write(
        request,
        services,
        caller,
        idempotency_key,
        "POST /v1/retrievals",
        data.model_dump(mode="json"),
        lambda idem: record_retrieval(services.context, caller, data, idem),
    )


router = Router(path="/v1/retrievals", route_handlers=[post_retrieval], tags=["retrievals"])
