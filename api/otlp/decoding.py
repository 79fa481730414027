"""OTLP/HTTP trace requests in, answers out: the two encodings (`application/x-protobuf`,
`application/json`), gzip inflated with a bound (a bomb stops at the limit), the limits on
bytes, spans and attributes, and the decoded spans flattened into plain `TraceSpan`s.

Every refusal is an `OtlpRefusal` naming its limit or field, never a value of the request.
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from ledger.retrieval.otlp_spans import TraceSpan
from ledger.usecases.span_ingest import TENANT_ATTRIBUTE

PROTOBUF = "application/x-protobuf"
JSON = "application/json"

# gRPC status codes carried in the error body (google.rpc.Status), by HTTP status.
_GRPC_CODES = {400: 3, 401: 16, 403: 7, 408: 4, 413: 8, 415: 3, 429: 8, 503: 14}


@dataclass(frozen=True)
class OtlpLimits:
    max_request_bytes: int = 8 * 1024 * 1024  # on the wire and once inflated
    max_spans: int = 4096  # per request
    max_attributes: int = 2048  # per span (and per resource)
    max_value_depth: int = 8  # nested arrays / key-value lists inside one attribute


class OtlpRefusal(Exception):
    def __init__(self, status: int, code: str, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.retry_after = status, code, message, retry_after


def encoding_of(content_type: str | None) -> str:
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media not in (PROTOBUF, JSON):
        raise OtlpRefusal(415, "unsupported_media_type", f"Content-Type must be {PROTOBUF} or {JSON}")
    return media


def inflate(body: bytes, content_encoding: str | None, limits: OtlpLimits) -> bytes:
    """The request body, gunzipped when sent with `Content-Encoding: gzip`; never more than
    `max_request_bytes` of output is produced, whatever the ratio."""
    coding = (content_encoding or "identity").strip().lower()
    if coding == "identity":
        return body
    if coding != "gzip":
        raise OtlpRefusal(415, "unsupported_content_encoding", "Content-Encoding must be gzip or identity")
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(body, limits.max_request_bytes + 1)
    except zlib.error:
        raise OtlpRefusal(400, "bad_gzip", "request body is not valid gzip") from None
    if len(out) > limits.max_request_bytes:
        raise OtlpRefusal(
            413,
            "payload_too_large",
            f"inflated request body exceeds otlp.max_request_bytes ({limits.max_request_bytes})",
        )
    if not inflater.eof:
        raise OtlpRefusal(400, "bad_gzip", "gzip stream is truncated")
    return out


_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def _hex_ids_to_base64(message: dict[str, Any]) -> None:
    """OTLP/JSON writes trace and span ids as hex, where protobuf's JSON mapping reads base64."""
    for name in _ID_FIELDS:
        value = message.get(name)
        if isinstance(value, str):
            try:
                message[name] = base64.b64encode(bytes.fromhex(value)).decode()
            except ValueError:
                raise OtlpRefusal(400, "bad_request", f"span {name}: not a hex id") from None


def _json_spans(document: Any) -> Iterator[dict[str, Any]]:
    if not isinstance(document, dict):
        raise OtlpRefusal(400, "bad_request", "request body is not an ExportTraceServiceRequest object")
    for resource_spans in document.get("resourceSpans") or document.get("resource_spans") or []:
        if not isinstance(resource_spans, dict):
            continue  # ParseDict names the wrong type below
        for scope_spans in resource_spans.get("scopeSpans") or resource_spans.get("scope_spans") or []:
            if isinstance(scope_spans, dict):
                for span in scope_spans.get("spans") or []:
                    if isinstance(span, dict):
                        yield span
                        for link in span.get("links") or []:
                            if isinstance(link, dict):
                                yield link


def parse_request(data: bytes, encoding: str) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    if encoding == PROTOBUF:
        try:
            request.ParseFromString(data)
        except (DecodeError, RecursionError):
            raise OtlpRefusal(
                400, "bad_request", "request body is not a valid protobuf ExportTraceServiceRequest"
            ) from None
        return request
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise OtlpRefusal(400, "bad_request", "request body is not valid JSON (or not UTF-8)") from None
    for span in _json_spans(document):
        _hex_ids_to_base64(span)
    try:
        json_format.ParseDict(document, request, ignore_unknown_fields=True, max_recursion_depth=64)
    except (json_format.ParseError, RecursionError, ValueError, TypeError) as exc:
        where = str(exc).split(":", 1)[0][:200] if isinstance(exc, json_format.ParseError) else "body"
        raise OtlpRefusal(400, "bad_request", f"not an ExportTraceServiceRequest ({where})") from None
    return request


def _value(value: AnyValue, depth: int, limits: OtlpLimits) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind in ("array_value", "kvlist_value"):
        if depth >= limits.max_value_depth:
            raise OtlpRefusal(
                400, "bad_request", f"attribute value nests deeper than {limits.max_value_depth}"
            )
        if kind == "array_value":
            return [_value(item, depth + 1, limits) for item in value.array_value.values]
        return {kv.key: _value(kv.value, depth + 1, limits) for kv in value.kvlist_value.values}
    return getattr(value, kind)


def _attributes(attributes: Any, where: str, limits: OtlpLimits) -> dict[str, Any]:
    if len(attributes) > limits.max_attributes:
        raise OtlpRefusal(
            413,
            "payload_too_large",
            f"{where}: more than otlp.max_attributes ({limits.max_attributes}) attributes",
        )
    flat: dict[str, Any] = {}
    item: KeyValue
    for item in attributes:
        flat[item.key] = _value(item.value, 0, limits)
    return flat


def trace_spans(request: ExportTraceServiceRequest, limits: OtlpLimits) -> list[TraceSpan]:
    """The request's spans as plain values, after the count limits."""
    total = sum(len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans)
    if total > limits.max_spans:
        raise OtlpRefusal(
            413, "payload_too_large", f"more than otlp.max_spans ({limits.max_spans}) spans per request"
        )
    spans: list[TraceSpan] = []
    for resource in request.resource_spans:
        resource_attributes = _attributes(resource.resource.attributes, "resource", limits)
        service = resource_attributes.get("service.name")
        claimed = resource_attributes.get(TENANT_ATTRIBUTE)
        for scope in resource.scope_spans:
            for span in scope.spans:
                spans.append(
                    TraceSpan(
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex() or None,
                        name=span.name,
                        service_name=service if isinstance(service, str) else "",
                        attributes=_attributes(span.attributes, "span", limits),
                        claimed_tenant=str(claimed) if claimed is not None else None,
                    )
                )
    return spans


def encode_message(message: Any, encoding: str) -> bytes:
    if encoding == PROTOBUF:
        return bytes(message.SerializeToString())
    return orjson.dumps(json_format.MessageToDict(message))


def export_response(rejected: int, message: str, encoding: str) -> bytes:
    response = ExportTraceServiceResponse()
    if rejected or message:
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = message
    return encode_message(response, encoding)


def status_body(status: int, message: str, encoding: str) -> bytes:
    """The OTLP error body: a google.rpc.Status in the request's encoding."""
    return encode_message(status_pb2.Status(code=_GRPC_CODES.get(status, 2), message=message), encoding)
