"""Bad OTLP input against a real server: truncated protobuf, wrong field types, a million
attributes, gzip bombs, invalid UTF-8, another tenant's resource, other media types; each a
4xx in the OTLP form (google.rpc.Status in the request's encoding) naming the rule, nothing
written, never a 5xx. And a retrieval span that cannot be recorded is rejected in
`partial_success` while the others of the export are recorded."""

from __future__ import annotations

import base64
import gzip
import json
import zlib
from collections.abc import Iterator

import httpx
import orjson
import pytest
from google.protobuf import json_format
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from api.otlp.decoding import OtlpLimits
from tests import loopback_http
from tests.otlp_support import OtlpServer, serve

PROTOBUF = "application/x-protobuf"
LIMITS = OtlpLimits()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OtlpServer]:
    yield from serve(str(request.param), tmp_path_factory.mktemp("otlp-refusals"))


def _request(
    *spans: Span, service: str = "bad-input", tenant: str | None = None
) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    resource = request.resource_spans.add()
    resource.resource.attributes.add(key="service.name", value=AnyValue(string_value=service))
    if tenant is not None:
        resource.resource.attributes.add(key="citeledger.tenant_id", value=AnyValue(string_value=tenant))
    resource.scope_spans.add().spans.extend(spans)
    return request


def _span(number: int, **attributes: str | float) -> Span:
    span = Span(trace_id=bytes([1] * 15 + [number]), span_id=bytes([2] * 7 + [number]), name="retrieve")
    for key, value in {"openinference.span.kind": "RETRIEVER", **attributes}.items():
        kind = "string_value" if isinstance(value, str) else "double_value"
        span.attributes.add(key=key, value=AnyValue(**{kind: value}))
    return span


def _post(server: OtlpServer, body: bytes, content_type: str = PROTOBUF, **headers: str) -> httpx.Response:
    return loopback_http.post(
        f"{server.base_url}/v1/traces",
        content=body,
        headers=server.headers("writer", **{"Content-Type": content_type, **headers}),
        timeout=60,
    )


def _status(response: httpx.Response) -> status_pb2.Status:
    if response.headers["content-type"].startswith(PROTOBUF):
        return status_pb2.Status.FromString(response.content)
    return json_format.Parse(response.content, status_pb2.Status())


def _refused(server: OtlpServer, response: httpx.Response, status: int, words: str) -> None:
    assert response.status_code == status, response.content[:300]
    sent = response.request.headers["content-type"]
    expected = sent if sent in (PROTOBUF, "application/json") else "application/json"
    assert response.headers["content-type"].startswith(expected), response.content[:300]
    assert words in _status(response).message
    assert response.headers["x-citeledger-error-code"]


def _one_million_attributes() -> bytes:
    """One span with 1,000,000 attributes: a repeated field's messages merged from one
    serialized attribute repeated (protobuf's merge appends repeated fields)."""
    one = Span(attributes=[KeyValue(key="k", value=AnyValue(int_value=1))]).SerializeToString()
    span = _span(9, **{"input.value": "q"})
    span.MergeFromString(one * 1_000_000)
    return _request(span).SerializeToString()


def _gzip_bomb(inflated: int) -> bytes:
    packer = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"\0" * (1024 * 1024)
    parts = [packer.compress(block) for _ in range(inflated // len(block))]
    return b"".join([*parts, packer.flush()])


def test_bad_inputs_are_refused_and_write_nothing(server: OtlpServer) -> None:
    valid = _request(_span(1, **{"input.value": "what is kept?"})).SerializeToString()
    wrong_type = orjson.dumps(
        {"resourceSpans": [{"scopeSpans": [{"spans": [{"name": 5, "traceId": "00"}]}]}]}
    )
    not_hex = orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]})
    utf8 = valid.replace(b"what is kept?", b"what \xff\xfe kept?")
    too_many = _request(
        _span(3, **{"input.value": "q"}, **{f"a{n}": "v" for n in range(LIMITS.max_attributes + 1)})
    ).SerializeToString()
    million = _one_million_attributes()
    before = server.log_size()
    cases = [
        (_post(server, valid[:-7]), 400, "not a valid protobuf"),
        (_post(server, wrong_type, "application/json"), 400, "not an ExportTraceServiceRequest"),
        (_post(server, not_hex, "application/json"), 400, "traceId: not a hex id"),
        (_post(server, utf8), 400, "not a valid protobuf"),
        (_post(server, b'{"resourceSpans": "\xff"}', "application/json"), 400, "not UTF-8"),
        (_post(server, too_many), 413, "otlp.max_attributes"),
        (_post(server, million), 413, "otlp.max_request_bytes"),
        (
            _post(server, gzip.compress(million, 1), **{"Content-Encoding": "gzip"}),
            413,
            "inflated",
        ),
        (_post(server, _gzip_bomb(64 * 1024 * 1024), **{"Content-Encoding": "gzip"}), 413, "inflated"),
        (_post(server, gzip.compress(valid)[:-12], **{"Content-Encoding": "gzip"}), 400, "gzip"),
        (_post(server, valid, **{"Content-Encoding": "br"}), 415, "Content-Encoding"),
        (_post(server, valid, "text/plain"), 415, "Content-Type"),
        (
            _post(server, _request(_span(4, **{"input.value": "q"}), tenant="globex").SerializeToString()),
            403,
            "tenant",
        ),
    ]
    for response, status, words in cases:
        _refused(server, response, status, words)
    assert server.log_size() == before


def test_too_many_spans_names_the_limit(server: OtlpServer) -> None:
    spans = [
        Span(trace_id=bytes([3] * 16), span_id=n.to_bytes(8, "big"), name="s")
        for n in range(1, LIMITS.max_spans + 2)
    ]
    response = _post(server, _request(*spans).SerializeToString())
    _refused(server, response, 413, "otlp.max_spans")


def test_errors_come_in_the_request_encoding(server: OtlpServer) -> None:
    response = _post(server, b"[1, 2", "application/json")
    assert response.status_code == 400 and response.headers["content-type"].startswith("application/json")
    assert json.loads(response.content)["code"] == 3  # INVALID_ARGUMENT
    response = _post(server, b"\x0a\x05", PROTOBUF)
    assert response.status_code == 400 and response.headers["content-type"].startswith(PROTOBUF)
    assert status_pb2.Status.FromString(response.content).code == 3


def test_a_token_without_the_write_scope_gets_403(server: OtlpServer) -> None:
    body = _request(_span(6, **{"input.value": "q"})).SerializeToString()
    response = loopback_http.post(
        f"{server.base_url}/v1/traces",
        content=body,
        headers=server.headers("reader", **{"Content-Type": PROTOBUF}),
        timeout=30,
    )
    assert response.status_code == 403
    response = loopback_http.post(
        f"{server.base_url}/v1/traces", content=body, headers={"Content-Type": PROTOBUF}, timeout=30
    )
    assert response.status_code == 401


def test_partial_success_names_the_rejected_span_and_records_the_others(server: OtlpServer) -> None:
    good = _span(
        7, **{"input.value": "how long are audit logs kept?", "retrieval.documents.0.document.score": 2.0}
    )
    no_query = _span(8)
    bad_metadata = _span(10, **{"input.value": "q", "retrieval.documents.0.document.metadata": "{not json"})
    other = Span(trace_id=bytes([1] * 16), span_id=bytes([5] * 8), name="llm")
    request = _request(good, no_query, bad_metadata, other)
    for encoding in (PROTOBUF, "application/json"):
        if encoding == PROTOBUF:
            response = _post(server, request.SerializeToString())
            answer = ExportTraceServiceResponse.FromString(response.content)
        else:  # OTLP/JSON: ids in hex
            document = json_format.MessageToDict(request)
            for span in document["resourceSpans"][0]["scopeSpans"][0]["spans"]:
                for name in ("traceId", "spanId"):
                    span[name] = base64.b64decode(span[name]).hex()
            response = _post(server, orjson.dumps(document), "application/json")
            answer = json_format.Parse(response.content, ExportTraceServiceResponse())
        assert response.status_code == 200 and response.headers["content-type"].startswith(encoding)
        assert answer.partial_success.rejected_spans == 2
        message = answer.partial_success.error_message
        assert f"span {no_query.span_id.hex()}: input.value: the span carries no query" in message
        assert (
            f"span {bad_metadata.span_id.hex()}: retrieval.documents.0.document.metadata: not a JSON text"
            in message
        )
    [listed] = server.receipts_of(good.trace_id.hex())
    payload = server.receipt(listed["receipt_id"])["event"]["payload"]
    assert listed["status"] == "ok" and payload["selected_entries"] == []
    assert payload["unverifiable"] == [
        {"rank": 1, "carried_id": None, "score": "2.0", "reason": "no_id_no_content"}
    ]
