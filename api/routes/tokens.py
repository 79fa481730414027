"""The operator's token routes: list, create (the secret shown once), revoke.

Operator token only (bound to no tenant): a tenant's token, even with `admin`, gets 403 —
a token that could mint tokens could mint itself any scope of any tenant. Each create and
revoke is a signed entry (`api.token_admin`) whose actor is the operator token.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from litestar import Response, Router, delete, get, post, route
from litestar.enums import HttpMethod
from litestar.params import JSONBody, Parameter
from pydantic import BaseModel, ConfigDict, Field

from api.auth import principal_of, requires_operator
from api.openapi import contract
from api.routes.common import AnyRequest, ServicesDep, ok
from api.token_admin import issue_token, list_tokens, parse_expiry, revoke_token
from ledger.domain.fields import IDENTIFIER_PATTERN, MAX_AUTH_SCOPES, MAX_IDENTIFIER_CHARS
from ledger.schemas.answers import Answer
from ledger.usecases.scopes import SCOPES

TokenId = Annotated[str, Parameter(max_length=MAX_IDENTIFIER_CHARS, pattern=IDENTIFIER_PATTERN)]
Scope = Literal[SCOPES]  # type: ignore[valid-type]


class TokenIn(BaseModel):
    """A token to create: a tenant's (`tenant` and `scopes`) or an operator's (`operator: true`,
    neither); optionally expiring (`expires_in` like `30d`, or `expires_at`, not both)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    tenant: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")] | None = None
    scopes: Annotated[list[Scope], Field(max_length=MAX_AUTH_SCOPES)] = []
    operator: bool = False
    expires_in: Annotated[str, Field(pattern=r"^[1-9][0-9]{0,5}[smhd]$")] | None = None
    expires_at: Annotated[str, Field(max_length=40)] | None = None


class TokenOut(BaseModel):
    """A token as it may be shown: never its secret nor its hash."""

    token_id: str
    kind: Literal["tenant", "operator"]
    tenant: str | None
    scopes: list[str]
    created_at: str | None
    expires_at: str | None
    revoked_at: str | None
    last_used_at: str | None = Field(description="Coarse: late by at most a minute per worker")
    status: Literal["active", "expired", "revoked"]


class TokenListOut(Answer):
    tokens: list[TokenOut]


class TokenCreatedOut(Answer):
    token: TokenOut
    bearer: str = Field(description="The bearer value: shown this once, only its hash is kept")
    position: int = Field(ge=1, description="The log position of its signed `TokenIssued` entry")


class TokenRevokedOut(Answer):
    token: TokenOut
    already_revoked: bool
    position: int | None = Field(description="The position of its `TokenRevoked` entry (null if already)")


@get(
    "/v1/operator/tokens",
    guards=[requires_operator],
    summary="Every token (revoked and expired too), without secrets; operator token only",
    **contract(),
)
async def get_tokens(request: AnyRequest, services: ServicesDep) -> Response[TokenListOut]:
    tokens = await services.blocking(list_tokens, services.config.token_path)
    return ok(request, services, {"tokens": tokens})


@post(
    "/v1/operator/tokens",
    guards=[requires_operator],
    status_code=201,
    summary="Create a token (its bearer value is in this answer only); operator token only",
    **contract(409, 422),
)
async def post_token(
    request: AnyRequest, services: ServicesDep, data: JSONBody[TokenIn]
) -> Response[TokenCreatedOut]:
    actor = principal_of(request).actor

    def run() -> dict[str, Any]:
        expiry = parse_expiry(data.expires_in, data.expires_at)
        bearer, view, position = issue_token(
            services.ledger,
            services.config.token_path,
            actor=actor,
            tenant=data.tenant,
            scopes=list(data.scopes),
            operator=data.operator,
            expires_at=expiry,
        )
        services.tokens.refresh()
        return {"token": view, "bearer": bearer, "position": position}

    return ok(request, services, await services.blocking(run), 201)


@delete(
    "/v1/operator/tokens/{token_id:str}",
    guards=[requires_operator],
    status_code=200,
    summary="Revoke a token: every worker refuses it within about a second; operator token only",
    **contract(404, 409),
)
async def delete_token(
    request: AnyRequest, services: ServicesDep, token_id: TokenId
) -> Response[TokenRevokedOut]:
    actor = principal_of(request).actor

    def run() -> dict[str, Any]:
        try:
            view, position = revoke_token(services.ledger, services.config.token_path, token_id, actor=actor)
        finally:
            services.tokens.refresh()  # revoked in the file even when its entry could not be written
        return {"token": view, "already_revoked": position is None, "position": position}

    return ok(request, services, await services.blocking(run))


@route("/v1/operator/tokens", http_method=[HttpMethod.OPTIONS], include_in_schema=False, sync_to_thread=False)
def tokens_options() -> Response[None]:
    """Litestar (2.25) answers OPTIONS on a path of two handlers with the first one's methods
    only; registered first, this one names both."""
    return Response(None, status_code=204, headers={"Allow": "GET, OPTIONS, POST"})


router = Router(
    path="/", route_handlers=[tokens_options, get_tokens, post_token, delete_token], tags=["operator"]
)
