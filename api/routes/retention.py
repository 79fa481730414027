"""Erasure requests and legal holds (`ledger.usecases.retention`)."""

from __future__ import annotations

from typing import Annotated

from litestar import Response, Router, delete, post
from litestar.params import JSONBody, Parameter

from api.routes.common import CallDep, operation
from ledger.domain.fields import IDENTIFIER_PATTERN, MAX_IDENTIFIER_CHARS
from ledger.schemas.answers import ErasureOut, HoldOut, HoldReleasedOut
from ledger.schemas.requests import ErasureIn, LegalHoldIn
from ledger.usecases.retention import erase, place_hold, release_hold

HoldId = Annotated[str, Parameter(max_length=MAX_IDENTIFIER_CHARS, pattern=IDENTIFIER_PATTERN)]


@post(
    "/v1/erasures",
    status_code=200,
    **operation("admin", "Erase a document or data subject", 404, 409, 413, 422),
)
async def post_erasure(call: CallDep, data: JSONBody[ErasureIn]) -> Response[ErasureOut]:
    return await call.answer(erase, call.services.context, call.caller, data)


@post("/v1/legal-holds", status_code=201, **operation("admin", "Place a legal hold", 404, 409, 413, 422))
async def post_hold(call: CallDep, data: JSONBody[LegalHoldIn]) -> Response[HoldOut]:
    return await call.answer(place_hold, call.services.context, call.caller, data, status=201)


@delete("/v1/legal-holds/{hold_id:str}", status_code=200, **operation("admin", "Release a hold", 404, 409))
async def delete_hold(call: CallDep, hold_id: HoldId) -> Response[HoldReleasedOut]:
    return await call.answer(release_hold, call.services.context, call.caller, hold_id)


router = Router(path="/", route_handlers=[post_erasure, post_hold, delete_hold], tags=["retention"])
