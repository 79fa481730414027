"""`GET /v1/receipts/{id}`, the hottest read, answered at the ASGI entry point (`ContractApp`)
without Litestar's routing, dependency injection, guard and response machinery, which were
most of its server time (`docs/benchmarks/api.md`, "where the time went").

Only the plain form is taken here: GET, no query string, an identifier the route accepts, a
valid tenant token holding `audit.read`, and a receipt that is found. Everything else -- no or
a bad token, another scope, an operator token, a query, a miss, any error -- goes on to the
route (`api.routes.receipts.get_receipt`), which answers and refuses exactly as before. The
token is checked by the same `TokenStore.authenticate` (SHA-256, constant-time compare,
revocation re-read) and the same rate limit (`RateLimiter.check`: one token per request; a
refusal is handed to the route's guard, which raises it, so the 429 is the route's); the read
is the route's `receipt_answer` for the token's tenant (another tenant's receipt is a miss, so
the route's 404), and the body is the route's: the same envelope (`answered`), encoded by the
route handler's own serializer, with the same two headers (`tests/test_api_receipt_shortcut.py`
compares them byte for byte).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from litestar import Litestar
from litestar.types import Scope, Send

from api.api_error import ApiError
from api.auth import Principal, bearer_in
from api.contract import set_principal
from api.ratelimit import RATE_CHECKED
from api.routes.common import answered, caller_for
from api.routes.listing import ID_PATTERN
from api.routes.receipts import RECEIPT_ID_MAX_CHARS, get_receipt, receipt_answer
from api.services import Services

Shortcut = Callable[[Scope, Send], Awaitable[bool]]

_PREFIX = "/v1/receipts/"
_SCOPE = "audit.read"
_ID = re.compile(ID_PATTERN)


def _bearer(scope: Scope) -> str | None:
    """`api.auth.bearer_of` on the raw headers (the first Authorization header, as there)."""
    for key, value in scope["headers"]:
        if key == b"authorization":
            return bearer_in(value.decode("latin-1"))
    return None


def receipt_shortcut(app: Litestar) -> Shortcut:
    """The shortcut for `app`: it encodes as the route handler does and names the route as
    Litestar does (for the access log and the metrics)."""
    handler, route = next(
        (h, r) for r in app.routes for h in getattr(r, "route_handlers", ()) if h.fn is get_receipt.fn
    )
    # The handler's serializer in an encoder made once (`litestar.serialization.encode_json`
    # makes one per call): the same bytes.
    encoder = msgspec.json.Encoder(enc_hook=handler.default_serializer)
    path_template = route.path_format

    def principal_of(services: Services, scope: Scope) -> Principal | None:
        bearer = _bearer(scope)
        principal = services.tokens.authenticate(bearer) if bearer else None
        if principal is None or principal.operator or _SCOPE not in principal.scopes:
            return None  # the route's guard gives the 401 or 403
        return principal

    async def answer(scope: Scope, send: Send) -> bool:
        path: str = scope["path"]
        if scope.get("method") != "GET" or scope["query_string"] or not path.startswith(_PREFIX):
            return False
        receipt_id = path[len(_PREFIX) :]
        if len(receipt_id) > RECEIPT_ID_MAX_CHARS or not _ID.match(receipt_id) or scope.get("root_path"):
            return False
        services: Services | None = getattr(app.state, "services", None)
        principal = principal_of(services, scope) if services is not None else None
        if services is None or principal is None:
            return False
        set_principal(scope, principal)
        try:
            await services.rate_limiter.check(principal.token_id)
        except ApiError as refusal:  # the route's guard raises it: the route's 429
            scope["state"][RATE_CHECKED] = refusal
            return False
        caller = caller_for(principal, scope)
        try:
            body = await receipt_answer(services, caller, receipt_id)
        except Exception:  # noqa: BLE001 - the route answers it (404, 5xx), with its own envelope
            scope["state"][RATE_CHECKED] = None
            return False
        scope["path_template"] = path_template
        content: Any = answered(services, body, caller.run_id, caller.trace_id, principal.tenant)
        encoded = encoder.encode(content)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(encoded)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": encoded, "more_body": False})
        return True

    return answer
