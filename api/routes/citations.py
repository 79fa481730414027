"""Citation read-back under retention rules (`ledger.usecases.citations`).

200 with the chunk text; 404 with one identical body whether the id never
existed, is another tenant's, expired or was scrubbed — the sub-state only in
`x-replay-reason`; 403 for a restricted chunk without the scope. The MCP
mirror is stateless: a request with `Mcp-Session-Id` is 400.
"""

from __future__ import annotations

from typing import Any

from litestar import Response, Router, get
from litestar.params import FromPath

from api.api_error import ApiError
from api.auth import requires
from api.openapi import contract
from api.routes.common import AnyRequest, CallerDep, ServicesDep, ok
from api.routes.events import ContentMode
from api.services import Services
from ledger.schemas.answers import CitationOut
from ledger.usecases.citations import read_citation
from ledger.usecases.content import read_citation_content, require_content_scope
from ledger.usecases.context import Caller


async def _respond(
    request: AnyRequest, services: Services, caller: Caller, citation_id: str, content: str = "sealed"
) -> Response[Any]:
    plain = content == "plain"
    if plain:
        require_content_scope(caller)
    body = await services.blocking(read_citation, services.context, services.read_models, caller, citation_id)
    if plain:
        body["content"] = await services.blocking(
            read_citation_content, services.context, caller, body["receipt_id"], body["citation_id"]
        )
    return ok(request, services, {"data": body})


# `path` rather than `str`: an id with slashes in it (`..%2F..`) must reach the handler and
# get the same 404 as any other unknown id, not the router's.
@get(
    "/v1/citations/{citation_id:path}",
    guards=[requires()],
    summary="Read a cited chunk back",
    **contract(404),
)
async def get_citation(
    request: AnyRequest,
    services: ServicesDep,
    caller: CallerDep,
    citation_id: FromPath[str],
    content: ContentMode = "sealed",
) -> Response[CitationOut]:
    return await _respond(request, services, caller, citation_id.lstrip("/"), content)


@get(
    "/v1/mcp/chunks/{citation_id:path}",
    guards=[requires()],
    summary="MCP getDocumentChunk (stateless)",
    **contract(404),
)
async def get_mcp_chunk(
    request: AnyRequest, services: ServicesDep, caller: CallerDep, citation_id: FromPath[str]
) -> Response[CitationOut]:
    if request.headers.get("mcp-session-id") is not None:
        raise ApiError(400, "bad_request", "MCP session state is not supported in v1")
    return await _respond(request, services, caller, citation_id.lstrip("/"))


router = Router(path="/", route_handlers=[get_citation, get_mcp_chunk], tags=["citations"])
