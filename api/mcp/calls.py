"""Who calls an MCP tool or reads a resource, on either transport.

The SDK runs each message's handler in a task of its own; `bind_request` (a server
middleware) keeps the message's context in a context variable so tools and resources
alike can find their request. A `Surface` answers the rest:

- `/mcp` (Streamable HTTP): the route's guard (`api.auth.requires`) already checked the
  bearer token and the rate limit of the HTTP request; the principal and correlation ids
  are that request's.
- stdio: one process, one token (`CITELEDGER_TOKEN`), checked again on every call (a
  revoked token stops working) and counted against the same rate limit.
- stdio in front of a remote ledger (`citeledger mcp --url`, `api.mcp.remote`): each call
  goes to its `/v1` twin, where that ledger checks the token.

A tool or resource is an `Operation` (its scopes, its arguments' model, the work done in the
ledger's process and its `/v1` twin as a `Forward`); the surface decides which runs.

Either way `_meta` may carry `traceparent` (W3C), `trace_id` and `run_id`, under the rule of
the HTTP headers (`api.contract.correlation_of`); they win over the transport's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from pydantic import BaseModel, ValidationError

from api.api_error import ApiError
from api.auth import Principal, check_scopes, principal_for
from api.contract import Correlation, correlation, correlation_of, rule_refusal
from api.mcp.outcomes import invalid_arguments
from api.routes.common import answered
from api.services import Services
from ledger.deadline import Deadline
from ledger.usecases.context import Caller

_PRINCIPAL = "citeledger.principal"
_DEADLINE_SHARE = 0.9
_current: ContextVar[ServerRequestContext[Any, Any] | None] = ContextVar(
    "citeledger_mcp_request", default=None
)


async def bind_request(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware: the message's context, for the handler it reaches."""
    token = _current.set(ctx)
    try:
        return await call_next(ctx)
    finally:
        _current.reset(token)


def refuse_unknown_tools(tools: Sequence[Any]) -> ServerMiddleware[Any]:
    """Server middleware: calling a tool that does not exist is protocol misuse (a JSON-RPC
    error, as the MCP specification has it), not a tool's failure."""
    names = frozenset(tool.name for tool in tools)

    async def refuse(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call":
            name = (ctx.params or {}).get("name")
            if isinstance(name, str) and name not in names:
                raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {name[:80]}")
        return await call_next(ctx)

    return refuse


def current_request() -> ServerRequestContext[Any, Any]:
    ctx = _current.get()
    if ctx is None:  # a handler reached without the middleware: a wiring bug, never the caller's
        raise RuntimeError("no MCP request in context")
    return ctx


Work = Callable[[Services, Caller, Any], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Forward:
    """A call's `/v1` twin, for a surface that forwards to a remote ledger (`--url`):
    method, path, body, query and Idempotency-Key; `then` finishes the answer locally."""

    method: str
    path: str
    json: Any = None
    params: dict[str, Any] | None = None
    idempotency_key: str | None = None
    then: Callable[[Any, dict[str, Any]], Awaitable[dict[str, Any]]] | None = None


@dataclass(frozen=True)
class Operation:
    """What a tool or resource does: the scopes it needs, its arguments' model, the work in
    the ledger's own process, and its `/v1` twin for a remote ledger."""

    scopes: tuple[str, ...]
    model: type[BaseModel] | None
    work: Work
    forward: Callable[[Any], Forward]


class Surface(Protocol):
    transport: str

    def correlation(self, request: ServerRequestContext[Any, Any]) -> Correlation: ...

    def answer(
        self, call: Call, operation: Operation, arguments: Mapping[str, Any] | None
    ) -> Awaitable[dict[str, Any]]: ...


def parse(model: type[BaseModel] | None, arguments: Mapping[str, Any] | None) -> Any:
    """The arguments validated by `model` (400 naming the fields)."""
    try:
        return model.model_validate(arguments or {}) if model is not None else None
    except ValidationError as exc:
        # A ledger text rule (a control character, a deceptive path) is the 422 `/v1` answers.
        raise rule_refusal(exc.errors()) or invalid_arguments(exc) from None


class LocalSurface:
    """A transport served inside the ledger's process: the use cases run here."""

    transport = "local"

    def services(self, request: ServerRequestContext[Any, Any]) -> Services:
        raise NotImplementedError

    async def principal(self, request: ServerRequestContext[Any, Any], services: Services) -> Principal:
        raise NotImplementedError

    def correlation(self, request: ServerRequestContext[Any, Any]) -> Correlation:
        raise NotImplementedError

    async def answer(
        self, call: Call, operation: Operation, arguments: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """Check the caller (401, 429, 403), validate the arguments (400), run the work within
        the request deadline (408) and answer as `/v1` does (correlation ids, server and
        policy versions)."""
        services = self.services(call.request)
        # Within the HTTP deadline of the same request, so the call's own 408 is what answers.
        # The work carries the deadline: a write claims it before it commits, and the 408 is
        # answered only if it can expire it first, so a 408 means nothing was (or will be)
        # written, and a write that claimed it is answered, late (as `ContractApp` does).
        deadline = Deadline(services.config.request_deadline_s * _DEADLINE_SHARE)
        cancel_scope = anyio.CancelScope()

        def on_deadline() -> None:
            if deadline.expire():
                cancel_scope.cancel()

        timer = asyncio.get_running_loop().call_later(deadline.seconds, on_deadline)
        try:
            with cancel_scope:
                if call.ids.problem is not None:
                    raise ApiError(400, "bad_request", call.ids.problem)
                principal = call.principal = await self.principal(call.request, services)
                check_scopes(principal, operation.scopes)
                caller = Caller(
                    tenant_id=principal.tenant,
                    actor=principal.actor,
                    scopes=principal.scopes,
                    run_id=call.ids.run_id,
                    trace_id=call.ids.trace_id,
                    deadline=deadline,
                )
                parsed = parse(operation.model, arguments)
                body = await operation.work(services, caller, parsed)
                return answered(services, body, caller.run_id, caller.trace_id, caller.tenant_id)
        finally:
            timer.cancel()
        assert cancel_scope.cancelled_caught
        raise ApiError(
            408,
            "request_timeout",
            f"request exceeded the {deadline.seconds:g} s deadline; nothing was written (a retry runs "
            "it again)",
            retryable=True,
        )


def _scope(request: ServerRequestContext[Any, Any]) -> Any:
    scope = getattr(request.request, "scope", None)
    if not isinstance(scope, dict):
        raise RuntimeError("an MCP message over HTTP without its HTTP request")
    return scope


class HttpSurface(LocalSurface):
    transport = "streamable-http"

    def services(self, request: ServerRequestContext[Any, Any]) -> Services:
        services: Services = _scope(request)["litestar_app"].state.services
        return services

    def correlation(self, request: ServerRequestContext[Any, Any]) -> Correlation:
        return correlation(_scope(request))

    async def principal(self, request: ServerRequestContext[Any, Any], services: Services) -> Principal:
        principal = _scope(request).get("state", {}).get(_PRINCIPAL)
        if not isinstance(principal, Principal):  # the mount's guard sets it; never reached without
            raise RuntimeError("an MCP request over HTTP without its principal")
        return principal


class StdioSurface(LocalSurface):
    transport = "stdio"

    def __init__(self, services: Services, bearer: str) -> None:
        self._services = services
        self._bearer = bearer

    def services(self, request: ServerRequestContext[Any, Any]) -> Services:
        return self._services

    def correlation(self, request: ServerRequestContext[Any, Any]) -> Correlation:
        return correlation_of(None, None, None)

    async def principal(self, request: ServerRequestContext[Any, Any], services: Services) -> Principal:
        principal = principal_for(services.tokens, self._bearer)
        await services.rate_limiter.check(principal.token_id)
        return principal


def _meta_of(request: ServerRequestContext[Any, Any]) -> Mapping[str, Any]:
    meta = request.meta
    if meta is None and request.params:
        meta = request.params.get("_meta")
    return meta if isinstance(meta, Mapping) else {}


@dataclass
class Call:
    """One tool call or resource read: its request, its correlation ids and, once the token
    passed (in the ledger's process), the principal."""

    surface: Surface
    request: ServerRequestContext[Any, Any]
    ids: Correlation
    principal: Principal | None = None

    @classmethod
    def begin(cls, surface: Surface) -> Call:
        request = current_request()
        ids = surface.correlation(request)
        meta = _meta_of(request)
        if any(key in meta for key in ("run_id", "trace_id", "traceparent")):
            ids = correlation_of(
                meta.get("run_id"),
                meta.get("trace_id"),
                meta.get("traceparent"),
                names=("_meta.run_id", "_meta.trace_id"),
                fallback=ids,
            )
        return cls(surface, request, ids)

    async def answer(self, operation: Operation, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        return await self.surface.answer(self, operation, arguments)
