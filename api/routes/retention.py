"""Erasure requests and legal holds (`ledger.usecases.retention`)."""

from __future__ import annotations

from typing import Annotated

from litestar import Response, Router, delete, post
from litestar.params import JSONBody, Parameter

from api.auth import requires
from api.openapi import contract
from api.routes.common import AnyRequest, CallerDep, ServicesDep, ok
from ledger.domain.fields import IDENTIFIER_PATTERN, MAX_IDENTIFIER_CHARS
from ledger.schemas.answers import ErasureOut, HoldOut, HoldReleasedOut
from ledger.schemas.requests import ErasureIn, LegalHoldIn
from ledger.usecases.retention import erase, place_hold, release_hold

HoldId = Annotated[str, Parameter(max_length=MAX_IDENTIFIER_CHARS, pattern=IDENTIFIER_PATTERN)]


@post(
    "/v1/erasures",
    guards=[requires("admin")],
    status_code=200,
    summary="Erase a document or data subject",
    **contract(404, 409, 413, 422),
)
async def post_erasure(
    request: AnyRequest, services: ServicesDep, caller: CallerDep, data: JSONBody[ErasureIn]
) -> Response[ErasureOut]:
    return ok(request, services, await services.blocking(erase, services.context, caller, data))


@post(
    "/v1/legal-holds",
    guards=[requires("admin")],
    status_code=201,
    summary="Place a legal hold",
    **contract(404, 409, 413, 422),
)
async def post_hold(
    request: AnyRequest, services: ServicesDep, caller: CallerDep, data: JSONBody[LegalHoldIn]
) -> Response[HoldOut]:
    return ok(request, services, await services.blocking(place_hold, services.context, caller, data), 201)


@delete(
    "/v1/legal-holds/{hold_id:str}",
    guards=[requires("admin")],
    status_code=200,
    summary="Release a hold",
    **contract(404, 409),
)
async def delete_hold(
    request: AnyRequest, services: ServicesDep, caller: CallerDep, hold_id: HoldId
) -> Response[HoldReleasedOut]:
    return ok(request, services, await services.blocking(release_hold, services.context, caller, hold_id))


router = Router(path="/", route_handlers=[post_erasure, post_hold, delete_hold], tags=["retention"])
