"""Citation read-back under retention rules (the seed `000` contract).

200 with the chunk text while the citation is live; 404 with one identical
body whether the id never existed, is another tenant's, expired or was
scrubbed — the sub-state only in `x-replay-reason`; 403 for a restricted
chunk without `knowledge.restricted.read` (recorded as a signed AccessDenied
entry). The MCP mirror is stateless: a request with `Mcp-Session-Id` is 400.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from litestar import Response, Router, get

from api.auth import Principal, requires
from api.contract import ApiError, Correlation
from api.routes.common import AnyRequest, caller, ok
from api.services import Services
from ledger.entries import EventDraft
from ledger.events import AccessDenied
from projections.queries import TextUnavailable

NOT_FOUND_MESSAGE = "The requested citation was not found"
RESTRICTED_SCOPE = "knowledge.restricted.read"
_ID_MAX = 128


def _not_found(reason: str) -> ApiError:
    # One code, one message: the body never tells "never existed" from "expired".
    return ApiError(404, "not_found", NOT_FOUND_MESSAGE, headers={"x-replay-reason": reason})


def _expired(expires_at: str | None, now: dt.datetime) -> bool:
    if expires_at is None:
        return False
    return dt.datetime.fromisoformat(expires_at.replace("Z", "+00:00")) <= now


def read_back(services: Services, principal: Principal, ids: Correlation, citation_id: str) -> dict[str, Any]:
    tenant = principal.tenant
    # Any shape of id (huge, unicode, path-like) is just an id that is not there.
    if len(citation_id) > _ID_MAX or not citation_id.isascii():
        raise _not_found("chunk_not_found")
    now = services.clock()
    citation = services.read_models.citation(tenant, citation_id, now=now)
    if citation is None or _expired(citation.expires_at, now):
        # Expired counts as not found whether or not the scrub job has run yet.
        raise _not_found("chunk_not_found")
    if citation.sensitivity == "restricted" and RESTRICTED_SCOPE not in principal.scopes:
        services.append(
            [
                EventDraft(
                    type="AccessDenied",
                    tenant_id=tenant,
                    actor=principal.actor,
                    run_id=ids.run_id,
                    trace_id=ids.trace_id,
                    payload=AccessDenied(
                        resource_type="citation",
                        resource_id=citation_id,
                        required_scope=RESTRICTED_SCOPE,
                        reason="restricted_scope_required",
                    ),
                )
            ],
            tenant,
        )
        raise ApiError(
            403,
            "forbidden",
            f"The requested citation requires {RESTRICTED_SCOPE}",
            headers={"x-replay-reason": "restricted_scope_required"},
        )
    try:
        text = services.read_models.citation_text(citation, services.ledger.sealer)
    except TextUnavailable:
        raise _not_found("chunk_retention_expired") from None
    return {
        "data": {
            "citation_id": citation.citation_id,
            "chunk_text": text,
            "receipt_id": citation.receipt_id,
            "document_id": citation.document_id,
            "version_id": citation.version_id,
            "chunk_id": citation.chunk_id,
            "path": citation.path,
            "locator": citation.locator,
            "sensitivity": citation.sensitivity,
            "expires_at": citation.expires_at,
            "position": citation.position,
        }
    }


async def _respond(request: AnyRequest, citation_id: str) -> Response[Any]:
    services, principal, ids = caller(request)
    body = await services.blocking(read_back, services, principal, ids, citation_id)
    return ok(request, body)


# `path` rather than `str`: an id with slashes in it (`..%2F..`) must reach the handler and
# get the same 404 as any other unknown id, not the router's.
@get("/v1/citations/{citation_id:path}", guards=[requires()], summary="Read a cited chunk back")
async def get_citation(request: AnyRequest, citation_id: str) -> Response[Any]:
    return await _respond(request, citation_id.lstrip("/"))


@get("/v1/mcp/chunks/{citation_id:path}", guards=[requires()], summary="MCP getDocumentChunk (stateless)")
async def get_mcp_chunk(request: AnyRequest, citation_id: str) -> Response[Any]:
    if request.headers.get("mcp-session-id") is not None:
        raise ApiError(400, "bad_request", "MCP session state is not supported in v1")
    return await _respond(request, citation_id.lstrip("/"))


router = Router(path="/", route_handlers=[get_citation, get_mcp_chunk], tags=["citations"])
