"""Search: the ledger ranks the tenant's documents and records a signed receipt
(`ledger.usecases.search`). Takes the task envelope of seed 004 §9.2."""

from __future__ import annotations

from litestar import Response, Router, post
from litestar.params import JSONBody

from api.routes.common import CallDep, IdempotencyKeyHeader, operation
from ledger.schemas.answers import SearchOut
from ledger.schemas.requests import SearchIn
from ledger.usecases.search import search

SUMMARY = "Search the tenant's documents; every search is recorded as a signed receipt"


@post("/", status_code=200, **operation("retrieval.write", SUMMARY, 409, 422))
async def post_search(
    call: CallDep, data: JSONBody[SearchIn], idempotency_key: IdempotencyKeyHeader = None
) -> Response[SearchOut]:
    key = idempotency_key or data.idempotency_key
    return await call.write_command("POST /v1/search", search, data, key, created_status=200)


router = Router(path="/v1/search", route_handlers=[post_search], tags=["search"])
