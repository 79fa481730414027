"""The HTTP contract every route keeps: correlation ids, the duration header,
the request deadline, one error envelope, one structured log line.

The deadline is a `ledger.deadline.Deadline` shared with the work (`deadline_of`; routes
hand it to use cases in the `Caller`): when it passes, the request is cancelled and
answered 408 only if no write has claimed it, and then no write ever will; a write that
claimed it first is waited for and answered truthfully.

`ContractApp` is the Litestar application with its ASGI entry point wrapped,
so the contract also holds for what never reaches a route handler (unknown
route, wrong method, body too large, a request that runs out of time).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson
from litestar import Litestar, Request, Response
from litestar.exceptions import (
    HTTPException,
    MethodNotAllowedException,
    NotAuthorizedException,
    NotFoundException,
    PermissionDeniedException,
    ValidationException,
)
from litestar.types import Message, Receive, Scope, Send

from api.api_error import CODES, RETRY_AFTER_S, RETRYABLE_STATUSES, ApiError
from api.errors import to_api_error
from ledger.deadline import Deadline
from ledger.domain.fields import IDENTIFIER_CHARS, IDENTIFIER_PATTERN, MAX_IDENTIFIER_CHARS
from ledger.domain.payloads import EventRejected
from ledger.domain.timestamps import utc_now
from ledger.schemas.field_rules import RULE_ERRORS

access_log = logging.getLogger("citeledger.api.access")
error_log = logging.getLogger("citeledger.api.error")

_ID = re.compile(IDENTIFIER_PATTERN)
_ID_RULE = f"1-{MAX_IDENTIFIER_CHARS} characters of [{IDENTIFIER_CHARS}]"
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")
_STATE_IDS = "citeledger.ids"
_STATE_PRINCIPAL = "citeledger.principal"
_STATE_ERROR = "citeledger.error_code"
_STATE_DEADLINE = "citeledger.deadline"


@dataclass(frozen=True)
class Correlation:
    run_id: str
    trace_id: str
    problem: str | None = None  # a correlation header that could not be accepted


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


def correlation(scope: Scope) -> Correlation:
    """The request's run and trace ids, read (or generated) once and kept in the scope."""
    state = scope.setdefault("state", {})
    cached = state.get(_STATE_IDS)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    ids = correlation_of(
        _header(scope, b"x-run-id"), _header(scope, b"x-trace-id"), _header(scope, b"traceparent")
    )
    state[_STATE_IDS] = ids
    return ids


def correlation_of(
    run_id: object,
    trace_id: object,
    traceparent: object,
    *,
    names: tuple[str, str] = ("X-Run-Id", "X-Trace-Id"),
    fallback: Correlation | None = None,
) -> Correlation:
    """The rule for correlation ids, wherever they come from (HTTP headers, an MCP call's
    `_meta`): identifiers as given, else the trace id of a W3C `traceparent`, else the
    `fallback`'s (the transport's own), else new ones."""
    problem = None
    run = run_id if isinstance(run_id, str) and _ID.match(run_id) else None
    trace = trace_id if isinstance(trace_id, str) and _ID.match(trace_id) else None
    if run_id is not None and run is None:
        problem = f"{names[0]} must be {_ID_RULE}"
    if trace_id is not None and trace is None:
        problem = f"{names[1]} must be {_ID_RULE}"
    if trace is None and isinstance(traceparent, str):
        match = _TRACEPARENT.match(traceparent.strip().lower())
        if match and match.group(1) != "0" * 32:
            trace = match.group(1)
    # New ids: 32 random hex digits each (uuid4's form; os.urandom without building a UUID, ~5%
    # of a cached receipt read's CPU in uuid4 under load), both from one call.
    fresh = os.urandom(32).hex() if fallback is None and (run is None or trace is None) else ""
    return Correlation(
        run_id=run or (fallback.run_id if fallback else "run-" + fresh[:32]),
        trace_id=trace or (fallback.trace_id if fallback else fresh[32:]),
        problem=problem,
    )


def deadline_of(scope: Scope) -> Deadline | None:
    """The request's deadline (None outside `ContractApp`, e.g. a bare Litestar test app)."""
    deadline: Deadline | None = scope.get("state", {}).get(_STATE_DEADLINE)
    return deadline


def set_principal(scope: Scope, principal: Any) -> None:
    scope.setdefault("state", {})[_STATE_PRINCIPAL] = principal


def error_body(code: str, message: str, retryable: bool, ids: Correlation) -> dict[str, Any]:
    return {
        "error": {"code": code, "message": message, "retryable": retryable},
        "run_id": ids.run_id,
        "trace_id": ids.trace_id,
    }


def _validation_message(exc: ValidationException) -> str:
    details = exc.extra if isinstance(exc.extra, list) else []
    parts = []
    for item in details[:5]:
        if isinstance(item, dict):
            key = str(item.get("key") or item.get("source") or "body")[:80]
            message = str(item.get("message", "invalid"))[:200]
            parts.append(f"{key}: {message}")
    if not parts:
        detail = str(exc.detail)
        # msgspec/JSON decode messages name a position, never echo a value; keep them short.
        parts.append(detail[:200] if detail else "invalid request")
    return "invalid request: " + "; ".join(parts)


def _where(loc: Sequence[Any]) -> str:
    """A field's place as the messages name it: `selected_entries[0].snippet`."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "body"


def rule_refusal(errors: Sequence[Mapping[str, Any]]) -> ApiError | None:
    """422 when every problem of a validation is a text rule of the commands (`RULE_ERRORS`:
    the request is well formed, a ledger rule refuses it), naming the field and the rule;
    None when something breaks the schema itself (400)."""
    if not errors or any(error.get("type") not in RULE_ERRORS for error in errors):
        return None
    first = errors[0]
    return ApiError(
        422, str(first["type"]), f"{_where(first.get('loc', ()))}: {first.get('msg', 'invalid')}"[:400]
    )


def _validation_errors(exc: ValidationException) -> list[Mapping[str, Any]]:
    # Litestar keeps pydantic's own errors (with their type) on the exception it wraps.
    errors = getattr(exc.__cause__, "errors", None)
    errors = errors() if callable(errors) else errors
    return [e for e in errors if isinstance(e, Mapping)] if isinstance(errors, list) else []


def describe(exc: Exception) -> tuple[int, str, str, bool, dict[str, str], dict[str, Any]]:
    """(status, code, message, retryable, headers, extra body) for any exception."""
    exc = to_api_error(exc) or exc
    if isinstance(exc, ApiError):
        return exc.status_code, exc.code, exc.message, exc.retryable, dict(exc.headers or {}), exc.extra_body
    # The body parsers' own refusals: nesting past the parser's depth limit, bytes that are
    # not UTF-8. Nothing was parsed, so nothing was written.
    if isinstance(exc, RecursionError):
        return 400, "bad_request", "request body nests too deeply", False, {}, {}
    if isinstance(exc, UnicodeDecodeError):
        return 400, "bad_request", "request body is not valid UTF-8", False, {}, {}
    if isinstance(exc, EventRejected):
        return 422, "invalid_event", f"{exc.field}: {exc.message}"[:400], False, {}, {}
    if isinstance(exc, ValidationException):
        refusal = rule_refusal(_validation_errors(exc))
        if refusal is not None:
            return 422, refusal.code, refusal.message, False, {}, {}
        return 400, "bad_request", _validation_message(exc), False, {}, {}
    if isinstance(exc, NotAuthorizedException):
        return (
            401,
            "unauthorized",
            "missing or invalid bearer token",
            False,
            {"WWW-Authenticate": "Bearer"},
            {},
        )
    if isinstance(exc, PermissionDeniedException):
        return 403, "forbidden", str(exc.detail)[:200] or "missing scope", False, {}, {}
    if isinstance(exc, NotFoundException):
        return 404, "not_found", "not found", False, {}, {}
    if isinstance(exc, MethodNotAllowedException):
        headers = {k: v for k, v in (exc.headers or {}).items() if k.lower() == "allow"}
        return 405, "method_not_allowed", "method not allowed on this route", False, headers, {}
    if isinstance(exc, HTTPException):
        status = exc.status_code
        detail = str(exc.detail)
        if status == 400 and detail == "Request Entity Too Large":  # multipart part limit
            status = 413
        if status == 413:
            return 413, "payload_too_large", "request body exceeds the size limit", False, {}, {}
        if status >= 500:
            return status, CODES.get(status, "internal_error"), "internal error", True, {}, {}
        message = detail[:200] if detail and status < 500 else CODES.get(status, "error")
        return status, CODES.get(status, "error"), message, status in RETRYABLE_STATUSES, {}, {}
    if isinstance(exc, TimeoutError):
        return 503, "unavailable", "the store did not answer in time", True, {}, {}
    return 500, "internal_error", "internal error", True, {}, {}


def with_retry_after(status: int, retryable: bool, headers: Mapping[str, str] | None) -> dict[str, str]:
    """Every retryable 5xx says when to come back (a 429 names its own wait)."""
    chosen = dict(headers or {})
    if status >= 500 and retryable and not any(k.lower() == "retry-after" for k in chosen):
        chosen["Retry-After"] = str(RETRY_AFTER_S)
    return chosen


def exception_handler(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    status, code, message, retryable, headers, extra = describe(exc)
    headers = with_retry_after(status, retryable, headers)
    ids = correlation(request.scope)
    request.scope.setdefault("state", {})[_STATE_ERROR] = code
    if code == "storage_unavailable":
        # The store's state, not a bug: one line, no traceback (it repeats on every request
        # while it lasts; the repeat filter counts the repeats). The driver's first line only.
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        error_log.error(
            "storage unavailable: %s", reason, extra={"run_id": ids.run_id, "trace_id": ids.trace_id}
        )
    elif status >= 500:
        error_log.error(
            "unhandled error",
            exc_info=exc if not isinstance(exc, ApiError) else None,
            extra={"run_id": ids.run_id, "trace_id": ids.trace_id},
        )
    body = {**error_body(code, message, retryable, ids), **extra}
    return Response(content=body, status_code=status, headers=headers, media_type="application/json")


Observer = Callable[[Scope, int, float], None]


class ErrorPage(NamedTuple):
    """A surface's own answer to an error the ASGI wrapper answers itself."""

    body: bytes
    headers: dict[str, str]  # its Content-Type among them
    status: int | None = None  # another status than the error's (None: the error's)


class ContractApp(Litestar):
    """Litestar with the contract applied at the ASGI entry point."""

    deadline_s: float = 10.0
    max_query_string_bytes: int = 4096
    observers: list[Observer]
    # The answer to an error answered here, where a surface wants its own form (the console's
    # HTML page, OTLP's google.rpc.Status); None: the JSON envelope.
    error_page: Callable[[Litestar, Scope, int, str], ErrorPage | None] | None = None
    # Answers taken before Litestar's routing: each says whether it answered (else the route does).
    shortcuts: Sequence[Callable[[Scope, Send], Awaitable[bool]]] = ()

    async def _shortcut(self, scope: Scope, send: Send) -> bool:
        """True when one of the `shortcuts` answered the request (`api.receipt_shortcut`)."""
        for shortcut in self.shortcuts:
            if await shortcut(scope, send):
                return True
        return False

    async def _send_error(
        self,
        scope: Scope,
        send: Send,
        status: int,
        code: str,
        message: str,
        retryable: bool,
        ids: Correlation,
    ) -> None:
        """Answer an error the ASGI wrapper itself refuses: the surface's own page, else the JSON envelope."""
        scope["state"][_STATE_ERROR] = code
        page = self.error_page(self, scope, status, message) if self.error_page is not None else None
        if page is None:
            body = orjson.dumps(error_body(code, message, retryable, ids))
            headers = {"content-type": "application/json", **with_retry_after(status, retryable, None)}
        else:
            body, headers, status = page.body, page.headers, page.status or status
        raw = [(b"content-length", str(len(body)).encode())]
        raw += [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    async def __call__(self, scope: Any, receive: Receive, send: Send) -> None:  # type: ignore[override]
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        started = time.perf_counter()
        ids = correlation(scope)
        status_holder = [500]
        response_started = [False]
        deadline = scope["state"][_STATE_DEADLINE] = Deadline(self.deadline_s)
        task = asyncio.current_task()
        timed_out = [False]

        def on_deadline() -> None:
            # Cancel only a request that has not answered and whose work has not claimed the
            # deadline to write: one that did is owed its real answer (a streaming body is
            # not cut off mid-way either). The task's own cancellation, not an anyio cancel
            # scope: a scope's enter and exit were ~7% of a cached receipt read's server time.
            if not response_started[0] and deadline.expire() and task is not None:
                timed_out[0] = True
                task.cancel()

        async def wrapped_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                response_started[0] = True
                status_holder[0] = message["status"]
                elapsed = (time.perf_counter() - started) * 1000
                headers = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if k.lower() not in (b"x-run-id", b"x-trace-id", b"x-request-duration-ms")
                ]
                headers += [
                    (b"x-run-id", ids.run_id.encode()),
                    (b"x-trace-id", ids.trace_id.encode()),
                    (b"x-request-duration-ms", f"{elapsed:.2f}".encode()),
                ]
                message = {**message, "headers": headers}
            await send(message)

        if ids.problem is not None:
            await self._send_error(scope, wrapped_send, 400, "bad_request", ids.problem, False, ids)
        elif len(scope.get("query_string", b"")) > self.max_query_string_bytes:
            await self._send_error(
                scope,
                wrapped_send,
                400,
                "query_too_long",
                f"query string exceeds the {self.max_query_string_bytes} byte limit",
                False,
                ids,
            )
        else:
            timer = asyncio.get_running_loop().call_later(self.deadline_s, on_deadline)
            try:
                if not await self._shortcut(scope, wrapped_send):
                    await super().__call__(scope, receive, wrapped_send)
            except asyncio.CancelledError:
                if not timed_out[0]:
                    raise  # not the deadline's: the server's (shutdown, a client gone)
            finally:
                timer.cancel()
                if timed_out[0] and task is not None:
                    task.uncancel()  # the deadline's cancellation ends here, answered below
            if timed_out[0] and not response_started[0]:
                await self._send_error(
                    scope,
                    wrapped_send,
                    408,
                    "request_timeout",
                    f"request exceeded the {self.deadline_s:g} s deadline; nothing was written "
                    "(a retry runs it again)",
                    True,
                    ids,
                )
        duration = time.perf_counter() - started
        self._log(scope, ids, status_holder[0], duration)
        for observer in self.observers:
            try:
                observer(scope, status_holder[0], duration)
            except Exception:  # noqa: BLE001 - metrics never fail a request
                error_log.exception("observer failed")

    @staticmethod
    def _log(scope: Scope, ids: Correlation, status: int, duration: float) -> None:
        if not access_log.isEnabledFor(logging.INFO):
            return
        state = scope.get("state", {})
        principal = state.get(_STATE_PRINCIPAL)
        line = {
            "ts": utc_now(timespec="seconds"),
            "method": scope.get("method"),
            "route": scope.get("path_template") or "unmatched",
            "status": status,
            "duration_ms": round(duration * 1000, 2),
            "run_id": ids.run_id,
            "trace_id": ids.trace_id,
            "tenant": getattr(principal, "tenant", None),
            "token_id": getattr(principal, "token_id", None),
            "error": state.get(_STATE_ERROR),
        }
        access_log.info(orjson.dumps(line).decode())
