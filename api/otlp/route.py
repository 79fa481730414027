"""`POST /v1/traces`: OTLP/HTTP trace export, the path an OpenTelemetry exporter appends to
`OTEL_EXPORTER_OTLP_ENDPOINT`, so the ledger's base URL alone configures it.

Answers per the OTLP specification, in the request's encoding: 200 with an
`ExportTraceServiceResponse` (`partial_success` counting the retrieval spans that could not
be recorded and saying why); errors as a `google.rpc.Status` with 400 (undecodable), 413
(over a limit, named), 415 (another media type or content coding), 429/503 with
`Retry-After` when the exporter should retry. The error's code is also in the
`X-Citeledger-Error-Code` header.
"""

from __future__ import annotations

import logging
from typing import Any

from litestar import Request, Response, post
from litestar.exceptions import HTTPException
from litestar.types import Scope

from api.api_error import CODES
from api.auth import requires
from api.contract import ErrorPage, describe, with_retry_after
from api.openapi import contract
from api.otlp.decoding import (
    JSON,
    OtlpLimits,
    OtlpRefusal,
    encoding_of,
    export_response,
    inflate,
    parse_request,
    status_body,
    trace_spans,
)
from api.routes.common import AnyRequest, CallerDep, ServicesDep
from api.services import Services
from ledger.retrieval.otlp_spans import TraceSpan
from ledger.retrieval.source_registry import RegistryError
from ledger.storage.adapters import store_unavailable
from ledger.usecases.context import Caller
from ledger.usecases.span_ingest import SpansRecorded, record_spans

log = logging.getLogger("citeledger.api.otlp")
LIMITS = OtlpLimits()
RETRY_AFTER_S = 1
PATH = "/v1/traces"
MAX_MESSAGE_CHARS = 2000


def _encoding(content_type: str | None) -> str:
    """The answer's encoding: the request's, JSON for a request in neither."""
    try:
        return encoding_of(content_type)
    except OtlpRefusal:
        return JSON


def _error(
    request: Request[Any, Any, Any], status: int, code: str, message: str, headers: dict[str, str]
) -> Response[bytes]:
    encoding = _encoding(request.headers.get("content-type"))
    return Response(
        content=status_body(status, message, encoding),
        status_code=status,
        media_type=encoding,
        headers={**headers, "X-Citeledger-Error-Code": code},
    )


def otlp_error_page(scope: Scope, status: int, message: str) -> ErrorPage | None:
    """The answer to an error the server's ASGI wrapper gives before the route runs (a bad
    correlation header, the request deadline): on `/v1/traces` a google.rpc.Status in the
    request's encoding too. A deadline passed is 503 with `Retry-After` (nothing was written;
    an OTLP exporter retries a 503, not a 408)."""
    if scope.get("path") != PATH:
        return None
    code = CODES.get(status, "error")
    if status == 408:
        status, message = 503, "the export took longer than the request deadline; nothing was written; retry"
    headers = {"X-Citeledger-Error-Code": code}
    if status in (429, 503):
        headers["Retry-After"] = str(RETRY_AFTER_S)
    content_type = next(
        (v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"content-type"), None
    )
    encoding = _encoding(content_type)
    return ErrorPage(status_body(status, message, encoding), {**headers, "Content-Type": encoding}, status)


def otlp_exception_handler(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    """Every refusal of this route, the guard's and the framework's included, as an OTLP Status."""
    if isinstance(exc, OtlpRefusal):
        headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else {}
        return _error(request, exc.status, exc.code, exc.message, headers)
    if isinstance(exc, HTTPException) and exc.status_code == 413:
        message = f"request body exceeds otlp.max_request_bytes ({LIMITS.max_request_bytes})"
        return _error(request, 413, "payload_too_large", message, {})
    status, code, message, retryable, headers, _ = describe(exc)
    if status == 408:
        # OTLP exporters do not retry a 408: the groups recorded before the deadline are kept
        # and the retry records the rest (and answers the recorded ones as repeats).
        status, code, retryable = 503, "request_timeout", True
        message = "the export took longer than the request deadline; retry"
    elif code == "storage_unavailable" or store_unavailable(exc):
        status, code, message, retryable = (
            503,
            "storage_unavailable",
            "the store cannot record now; retry",
            True,
        )
    if status >= 500 and status != 503:
        log.error("unhandled error in OTLP export", exc_info=exc)
    return _error(request, status, code, message, with_retry_after(status, retryable, headers))


def _record(services: Services, caller: Caller, spans: list[TraceSpan]) -> SpansRecorded:
    """The spans recorded, with the tenant's synced sources' roots to match file paths by."""
    try:
        roots = {s.name: s.path for s in services.sources.all() if s.tenant_id == caller.tenant_id}
    except RegistryError:
        roots = {}  # an unreadable registry matches no path (documents are still matched by id)
    return record_spans(services.context, services.claims, caller, spans, roots)


def _summary(outcome: SpansRecorded) -> str:
    """Why spans were rejected (span id and rule, never a value), bounded."""
    if not outcome.rejected:
        return ""
    parts = [f"span {r.span_id}: {r.reason}" for r in outcome.rejected]
    text = f"{len(outcome.rejected)} retrieval span(s) not recorded; " + "; ".join(parts)
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 3] + "..."


@post(
    PATH,
    guards=[requires("retrieval.write")],
    status_code=200,
    summary="OTLP/HTTP trace export: retrieval spans (OpenInference, GenAI) become signed receipts",
    request_max_body_size=LIMITS.max_request_bytes,
    # Both keys: the app registers HTTPException too, and the handler nearest the class wins.
    exception_handlers={Exception: otlp_exception_handler, HTTPException: otlp_exception_handler},
    # Its contract is the OTLP specification (protobuf or OTLP/JSON in, google.rpc.Status errors),
    # not the /v1 JSON envelope the OpenAPI document describes: docs/otlp.md documents it.
    include_in_schema=False,
    tags=["otlp"],
    **contract(403, 413, 415),
)
async def export_traces(request: AnyRequest, services: ServicesDep, caller: CallerDep) -> Response[bytes]:
    encoding = encoding_of(request.headers.get("content-type"))
    raw = await request.body()
    data = inflate(raw, request.headers.get("content-encoding"), LIMITS)
    spans = trace_spans(parse_request(data, encoding), LIMITS)
    outcome = await services.blocking(_record, services, caller, spans)
    if outcome.busy:
        raise OtlpRefusal(
            503, "busy", "a cited document is being recorded by another request; retry", RETRY_AFTER_S
        )
    body = export_response(len(outcome.rejected), _summary(outcome), encoding)
    return Response(content=body, status_code=200, media_type=encoding)
