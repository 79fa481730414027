"""Search: the ledger ranks the tenant's documents and records a signed receipt
(`ledger.usecases.search`). Takes the task envelope of seed 004 §9.2."""

from __future__ import annotations

from litestar import Response, Router, post
from litestar.params import JSONBody

from api.auth import requires
from api.openapi import contract
from api.routes.common import AnyRequest, CallerDep, IdempotencyKeyHeader, ServicesDep, write
from ledger.schemas.answers import SearchOut
from ledger.schemas.requests import SearchIn
from ledger.usecases.search import search


@post(
    "/",
    guards=[requires("retrieval.write")],
    status_code=200,
    summary="Search the tenant's documents; every search is recorded as a signed receipt",
    **contract(409, 422),
)
async def post_search(
    request: AnyRequest,
    services: ServicesDep,
    caller: CallerDep,
    data: JSONBody[SearchIn],
    idempotency_key: IdempotencyKeyHeader = None,
) -> Response[SearchOut]:
    return await write(
        request,
        services,
        caller,
        idempotency_key or data.idempotency_key,
        "POST /v1/search",
        data.model_dump(mode="json"),
        lambda idem: search(services.context, caller, data, idem),
        created_status=200,
    )


router = Router(path="/v1/search", route_handlers=[post_search], tags=["search"])
