"""The HTTP contract from the client's side, without I/O: settings, correlation headers
(`X-Run-Id`, `X-Trace-Id` or `traceparent`), timeouts per call kind, and reading an answer —
size-capped, chunk by chunk as the transport receives it — into data or a typed error."""

from __future__ import annotations

import email.utils
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from client.errors import BadResponse, RateLimited, for_status

CallKind = Literal["search", "write", "read"]
FALLBACK_RETRYABLE = frozenset({408, 429, 502, 503, 504})  # a status without our envelope (a proxy)


@dataclass
class ClientSettings:
    base_url: str
    token: str
    run_id: str = field(default_factory=lambda: "run-" + uuid.uuid4().hex)
    search_timeout_s: float = 2.0  # the contract: search answers within 2 s
    write_timeout_s: float = 12.0  # writes within 12 s
    read_timeout_s: float = 10.0
    max_attempts: int = 4
    backoff_base_s: float = 0.1
    backoff_max_s: float = 5.0
    retry_after_max_s: float = 30.0
    max_response_bytes: int = 8 * 1024 * 1024
    breaker_threshold: int = 5  # consecutive failures (5xx, timeouts, unreachable) that open it
    breaker_cooldown_s: float = 10.0  # open for this long, then one probe (half-open)
    spool_dir: str | None = None  # where writes go when the ledger cannot take them
    drain_interval_s: float | None = 5.0  # background delivery of the spool (None: only on demand)
    # The newest checkpoint seen is kept in spool_dir (else in memory); when log vkeys are
    # given (`citeledger vkey`), a checkpoint must also be signed by one of them.
    log_vkeys: tuple[str, ...] = ()

    def timeout(self, kind: CallKind) -> float:
        return {"search": self.search_timeout_s, "write": self.write_timeout_s, "read": self.read_timeout_s}[
            kind
        ]


def traceparent() -> str | None:
    """The W3C traceparent of the active OpenTelemetry span, when opentelemetry-api is
    installed and a span is recording; otherwise None (the import is optional)."""
    try:
        from opentelemetry import trace  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


@dataclass(frozen=True)
class Call:
    """One logical call: retried with the same key and the same correlation ids."""

    method: str
    path: str
    kind: CallKind
    json: Any = None
    params: dict[str, Any] | None = None
    idempotency_key: str | None = None
    trace_id: str | None = None
    traceparent: str | None = None

    def headers(self, settings: ClientSettings) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {settings.token}", "X-Run-Id": settings.run_id}
        if self.traceparent is not None:
            headers["traceparent"] = self.traceparent
        elif self.trace_id is not None:
            headers["X-Trace-Id"] = self.trace_id
        if self.idempotency_key is not None:
            headers["Idempotency-Key"] = self.idempotency_key
        return headers


def new_key() -> str:
    return uuid.uuid4().hex


def make_call(
    method: str,
    path: str,
    kind: CallKind,
    *,
    json: Any = None,
    params: dict[str, Any] | None = None,
    idempotency_key: str | None = None,
    trace_id: str | None = None,
) -> Call:
    parent = None if trace_id is not None else traceparent()
    if parent is not None:
        trace_id = parent.split("-")[1]
    return Call(method, path, kind, json, params, idempotency_key, trace_id or uuid.uuid4().hex, parent)


def retry_after_s(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if value else None
        return None if when is None else max(0.0, when.timestamp() - time.time())


def interpret(call: Call, settings: ClientSettings, status: int, headers: Any, body: bytes) -> dict[str, Any]:
    """The body of a success, or the typed error of anything else."""
    run_id = headers.get("x-run-id") or settings.run_id
    trace_id = headers.get("x-trace-id") or call.trace_id
    parsed: Any = None
    if body:
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            parsed = None
    if 200 <= status < 300:
        if not body:
            raise BadResponse(
                "empty_response", "the server answered with an empty body", retryable=True,
                run_id=run_id, trace_id=trace_id, status=status,
            )  # fmt: skip
        if not isinstance(parsed, dict):
            raise BadResponse(
                "bad_response", "the server's answer is not a JSON object", retryable=True,
                run_id=run_id, trace_id=trace_id, status=status,
            )  # fmt: skip
        return parsed
    envelope = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(envelope, dict) and {"code", "message", "retryable"} <= set(envelope):
        code, message, retryable = (
            str(envelope["code"]),
            str(envelope["message"]),
            envelope["retryable"] is True,
        )
        run_id = parsed.get("run_id") or run_id
        trace_id = parsed.get("trace_id") or trace_id
    else:
        code, message = f"http_{status}", "the answer carries no error envelope"
        retryable = status in FALLBACK_RETRYABLE
    error = for_status(status, code)(
        code, message, retryable=retryable, run_id=run_id, trace_id=trace_id, status=status
    )
    if isinstance(error, RateLimited):
        error.retry_after_s = retry_after_s(headers.get("retry-after"))  # type: ignore[attr-defined]
    raise error


def too_large(call: Call, settings: ClientSettings, status: int) -> BadResponse:
    return BadResponse(
        "response_too_large",
        f"the answer exceeds {settings.max_response_bytes} bytes",
        retryable=False, run_id=settings.run_id, trace_id=call.trace_id, status=status,
    )  # fmt: skip


class Answer:
    """One answer, fed chunk by chunk as the transport receives it: refused as soon as it
    declares or grows past `max_response_bytes` (never held whole in memory), then read."""

    def __init__(self, call: Call, settings: ClientSettings, status: int, headers: Mapping[str, str]) -> None:
        self.call, self.settings, self.status, self.headers = call, settings, status, headers
        self._chunks: list[bytes] = []
        self._size = 0
        declared = headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > settings.max_response_bytes:
            raise too_large(call, settings, status)

    def feed(self, chunk: bytes) -> None:
        self._size += len(chunk)
        if self._size > self.settings.max_response_bytes:
            raise too_large(self.call, self.settings, self.status)
        self._chunks.append(chunk)

    def data(self) -> dict[str, Any]:
        """The body of a success; raises the typed error of anything else."""
        return interpret(self.call, self.settings, self.status, self.headers, b"".join(self._chunks))
