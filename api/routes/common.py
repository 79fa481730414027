"""What every route module shares: dependencies (`Provide`), the one way a route declares its
guard, summary and contract (`operation`), the request it serves (`RouteCall`: its caller and
services, its success bodies), and running a use case with `Idempotency-Key`."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Annotated, Any, Literal, TypeVar, get_args

import orjson
from litestar import Request, Response
from litestar.di import NamedDependency, Provide
from litestar.enums import RequestEncodingType
from litestar.params import HeaderParameter, ParameterKwarg
from litestar.types import Scope
from pydantic import BaseModel

from api.api_error import ApiError
from api.auth import Principal, principal_of, requires
from api.contract import correlation, deadline_of
from api.openapi import contract
from api.services import Services
from ledger.usecases.context import Caller, Result, UseCaseContext
from ledger.usecases.visibility import sees_restricted
from ledger.writing.idempotency import KEY_PATTERN, IdempotencyKey, lookup
from projections.queries import ReadModels

AnyRequest = Request[Any, Any, Any]
WriteUseCase = Callable[[Caller], Result]  # run as the request's caller, its key set
C = TypeVar("C", bound=BaseModel)
CommandUseCase = Callable[[UseCaseContext, Caller, C], Result]
IdempotencyKeyHeader = Annotated[
    str | None,
    HeaderParameter(
        name="Idempotency-Key",
        required=False,
        min_length=1,
        max_length=255,
        pattern=KEY_PATTERN.pattern,
        description="At most one write per (tenant, key): a repeat with the same body gets the first "
        "answer (200, `dedup: true`); another body is 409",
    ),
]


_DIGITS = re.compile(r"^[0-9]{1,16}$")


def _integer_query_names(handler: Any) -> tuple[str, ...]:
    """The parameters of a handler typed as integers (query or path), by their name in the URL;
    worked out once and kept in the handler's own options (its signature never changes)."""
    known: tuple[str, ...] | None = handler.opt.get("citeledger_integer_names")
    if known is None:
        known = handler.opt["citeledger_integer_names"] = _integer_names_of(handler)
    return known


def _integer_names_of(handler: Any) -> tuple[str, ...]:
    names = []
    # A listing's query parameters may sit in a dependency of its own (`events.HistoryListing`).
    signatures = [handler.parsed_fn_signature]
    signatures += [provide.parsed_fn_signature for provide in handler.resolve_dependencies().values()]
    parameters = [item for signature in signatures for item in signature.parameters.items()]
    for name, field in parameters:
        kwarg = field.kwarg_definition
        if isinstance(kwarg, ParameterKwarg) and (kwarg.header or kwarg.cookie):
            continue
        if int in (field.annotation, *get_args(field.annotation)):
            names.append(kwarg.query if isinstance(kwarg, ParameterKwarg) and kwarg.query else name)
    return tuple(names)


async def strict_query_integers(request: AnyRequest) -> None:
    """Before every handler: an integer query parameter is digits, given once. Litestar alone
    would read `null` as no value and keep the last of repeated ones — both silently."""
    for name in _integer_query_names(request.route_handler):
        if name in request.path_params:
            continue
        values = request.query_params.getall(name, [])
        if len(values) > 1:
            raise ApiError(400, "bad_request", f"invalid request: {name}: give it at most once")
        if values and not _DIGITS.match(values[0]):
            raise ApiError(400, "bad_request", f"invalid request: {name}: must be a whole number")


def _body_media_type(handler: Any) -> tuple[str, bool] | None:
    """(media type, optional) of the handler's request body, None when it takes none; worked
    out once and kept in the handler's own options."""
    known: tuple[str, bool] | Literal[False] | None = handler.opt.get("citeledger_body", False)
    if known is False:
        data = handler.parsed_fn_signature.parameters.get("data")
        kwarg = data.kwarg_definition if data is not None else None
        media = RequestEncodingType(getattr(kwarg, "media_type", None) or RequestEncodingType.JSON).value
        known = handler.opt["citeledger_body"] = (media, data.is_optional) if data is not None else None
    return known


def _has_body(request: AnyRequest) -> bool:
    length = request.headers.get("content-length")
    return "transfer-encoding" in request.headers or (length is not None and length.strip() not in ("", "0"))


async def body_media_type(request: AnyRequest) -> None:
    """Before every handler that takes a body: it comes as the type the route reads (JSON, or a
    multipart form for the upload), else 415 naming that type; an optional body may be left out.
    Litestar alone would parse any body as JSON, whatever its Content-Type says."""
    expected = _body_media_type(request.route_handler)
    if expected is None:
        return
    media, optional = expected
    given = request.headers.get("content-type")
    if given is None and optional and not _has_body(request):
        return
    if given is not None and given.split(";", 1)[0].strip().lower() == media:
        return
    raise ApiError(415, "unsupported_media_type", f"Content-Type must be {media}")


async def check_request(request: AnyRequest) -> None:
    """What every request must satisfy before its handler reads it."""
    await strict_query_integers(request)
    await body_media_type(request)


def _services(request: AnyRequest) -> Services:
    services: Services = request.app.state.services
    return services


def caller_of(request: AnyRequest) -> Caller:
    """Who calls, from the request's token and correlation ids (after the route's guard)."""
    return caller_for(principal_of(request), request.scope)


def caller_for(principal: Principal, scope: Scope) -> Caller:
    """Who calls with this token, under the correlation ids and deadline of the request `scope`."""
    ids = correlation(scope)
    return Caller(
        tenant_id=principal.tenant,
        actor=principal.actor,
        scopes=principal.scopes,
        run_id=ids.run_id,
        trace_id=ids.trace_id,
        deadline=deadline_of(scope),
    )


def _caller(request: AnyRequest, services: NamedDependency[Services]) -> Caller:
    # Depending on `services` orders the two: Litestar then resolves them one after the
    # other instead of spawning a task group for every request.
    return caller_of(request)


@dataclass(frozen=True)
class RouteCall:
    """One HTTP request to a use case, as its route sees it: who calls, with which services, and
    the answer's envelope. One dependency instead of the same three in every signature."""

    request: AnyRequest
    services: Services

    @cached_property
    def caller(self) -> Caller:
        # Read when used: a public route has no token, so no caller.
        return caller_of(self.request)

    def ok(self, body: dict[str, Any], status: int = 200) -> Response[Any]:
        return ok(self.request, self.services, body, status)

    async def answer(
        self, read: Callable[..., dict[str, Any]], *args: Any, status: int = 200
    ) -> Response[Any]:
        """The success answer of `read(*args)`, run off the event loop."""
        return self.ok(await self.services.blocking(read, *args), status)

    async def write(
        self, key: str | None, route: str, body: Any, use_case: WriteUseCase, *, created_status: int = 201
    ) -> Response[Any]:
        """Run a write use case at most once per (tenant, Idempotency-Key): a repeat of a
        recorded request gets the first answer (`dedup: true`) without running again."""
        result = await run_write(self.services, self.caller, key, route, body, use_case)
        return self.ok(result.body, created_status if result.created else 200)

    async def write_command(
        self,
        route: str,
        use_case: CommandUseCase[C],
        command: C,
        key: str | None,
        *,
        created_status: int = 201,
    ) -> Response[Any]:
        """`write` of the common use case: `use_case(context, caller, command)` on the
        request's body, which is also what makes two requests the same."""

        def run(keyed: Caller) -> Result:
            return use_case(self.services.context, keyed, command)

        body = command.model_dump(mode="json")
        return await self.write(key, route, body, run, created_status=created_status)


def _route_call(request: AnyRequest, services: NamedDependency[Services]) -> RouteCall:
    return RouteCall(request, services)


def _context(services: NamedDependency[Services]) -> UseCaseContext:
    return services.context


def _read_models(services: NamedDependency[Services]) -> ReadModels:
    return services.read_models


ServicesDep = NamedDependency[Services]
CallerDep = NamedDependency[Caller]
CallDep = NamedDependency[RouteCall]

DEPENDENCIES = {
    "services": Provide(_services, sync_to_thread=False),
    "caller": Provide(_caller, sync_to_thread=False),
    "call": Provide(_route_call, sync_to_thread=False),
    "ctx": Provide(_context, sync_to_thread=False),
    "read_models": Provide(_read_models, sync_to_thread=False),
}


def operation(
    scope: str, summary: str, *statuses: int, dedup: type[BaseModel] | None = None
) -> dict[str, Any]:
    """A route decorator's keywords besides its path and status: the token scope it needs
    (`api.auth.requires`), its summary and its contract (`api.openapi.contract`)."""
    return {"guards": [requires(scope)], "summary": summary, **contract(*statuses, dedup=dedup)}


def ok(
    request: AnyRequest,
    services: Services,
    body: dict[str, Any],
    status: int = 200,
    *,
    tenant: str | None = None,
) -> Response[Any]:
    """A success body: always with server_version, policy_version and the correlation ids."""
    ids = correlation(request.scope)
    principal = request.scope.get("state", {}).get("citeledger.principal")
    tenant = tenant or getattr(principal, "tenant", None)
    content = answered(services, body, ids.run_id, ids.trace_id, tenant)
    return Response(content=content, status_code=status, media_type="application/json")


def answered(
    services: Services, body: dict[str, Any], run_id: str | None, trace_id: str | None, tenant: str | None
) -> dict[str, Any]:
    """What every success answer carries beside its own fields (HTTP bodies and MCP results)."""
    return {
        **body,
        "run_id": run_id,
        "trace_id": trace_id,
        "server_version": services.server_version,
        "policy_version": services.policy_version(tenant),
    }


def fingerprint(route: str, value: Any, caller: Caller) -> str:
    """What makes two requests 'the same body' for Idempotency-Key. A stored answer can hold
    what only `knowledge.restricted.read` may see, so a request with the scope is never the
    same request as one without it (another token of the tenant reusing the key gets 409,
    not the first answer)."""
    audience = b"\0restricted" if sees_restricted(caller.scopes) else b""
    return hashlib.sha256(
        route.encode() + b"\0" + orjson.dumps(value, option=orjson.OPT_SORT_KEYS) + audience
    ).hexdigest()


async def run_write(
    services: Services,
    caller: Caller,
    key: str | None,
    route: str,
    body: Any,
    use_case: WriteUseCase,
) -> Result:
    """`RouteCall.write` without HTTP (the MCP tools share it): the same key over either surface is the
    same request, since `route` names the HTTP route in both."""
    if key is None:
        return await services.blocking(use_case, caller)
    try:
        idempotency = IdempotencyKey(caller.tenant_id, key, fingerprint(route, body, caller))
    except ValueError:
        raise ApiError(400, "bad_request", "Idempotency-Key must be 1-255 visible ASCII characters") from None
    stored = await services.blocking(lookup, services.ledger.store, caller.tenant_id, key)
    if stored is not None:
        # A different body: 409 via api.errors; text shredded since: withheld, with the reason.
        created, answer = stored.replay(idempotency, services.ledger.sealer)
        return Result(answer, created=bool(created))
    return await services.blocking(use_case, replace(caller, idempotency=idempotency))
