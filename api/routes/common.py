"""Helpers every route module uses: the services, the caller, success bodies."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from litestar import Request, Response

from api.auth import Principal, principal_of
from api.contract import Correlation, correlation
from api.services import Services

AnyRequest = Request[Any, Any, Any]


def services_of(request: AnyRequest) -> Services:
    services: Services = request.app.state.services
    return services


def caller(request: AnyRequest) -> tuple[Services, Principal, Correlation]:
    return services_of(request), principal_of(request), correlation(request.scope)


def ok(
    request: AnyRequest, body: dict[str, Any], status: int = 200, *, tenant: str | None = None
) -> Response[Any]:
    """A success body: always with server_version, policy_version and the correlation ids."""
    services = services_of(request)
    ids = correlation(request.scope)
    principal = request.scope.get("state", {}).get("citeledger.principal")
    tenant = tenant or getattr(principal, "tenant", None)
    body = {
        **body,
        "run_id": ids.run_id,
        "trace_id": ids.trace_id,
        "server_version": services.server_version,
        "policy_version": services.policy_version(tenant),
    }
    return Response(content=body, status_code=status, media_type="application/json")


def fingerprint(route: str, value: Any) -> str:
    """What makes two requests 'the same body' for Idempotency-Key."""
    return hashlib.sha256(
        route.encode() + b"\0" + orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    ).hexdigest()
