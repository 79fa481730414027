"""OTLP/HTTP ingestion end to end: the real OpenTelemetry SDK and its OTLP/HTTP exporters
(protobuf and JSON) against a real server on loopback, on SQLite and PostgreSQL; the spans
become signed receipts read back through the API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import format_span_id, format_trace_id

from tests import loopback_http
from tests.otlp_support import OtlpServer, serve, tracer_provider


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OtlpServer]:
    yield from serve(str(request.param), tmp_path_factory.mktemp("otlp"))


def _payload(server: OtlpServer, receipt_id: str) -> dict[str, Any]:
    payload: dict[str, Any] = server.receipt(receipt_id)["event"]["payload"]
    return payload


def test_openinference_span_from_the_sdk_becomes_one_receipt(server: OtlpServer) -> None:
    """Protobuf exporter; documents by ledger ids (metadata), by carried text only, and with
    neither: two citations and one unverifiable entry, scores as carried or absent."""
    cited = server.chunks[0]
    provider = tracer_provider(server.exporter("protobuf"), service="Support Bot")
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("retrieve") as span:
        span.set_attribute("openinference.span.kind", "RETRIEVER")
        span.set_attribute("input.value", "how long are audit logs kept?")
        doc = "retrieval.documents.{}.document.{}"
        span.set_attribute(doc.format(0, "content"), cited["text"])
        span.set_attribute(doc.format(0, "score"), 0.8123456789012345)
        span.set_attribute(
            doc.format(0, "metadata"),
            json.dumps({"document_id": cited["document_id"], "chunk_id": cited["chunk_id"]}),
        )
        span.set_attribute(doc.format(1, "content"), "A paragraph the ledger never ingested.")
        span.set_attribute(doc.format(2, "id"), "vector-store-42")
        trace_id = format_trace_id(span.get_span_context().trace_id)
        span_id = format_span_id(span.get_span_context().span_id)
    provider.shutdown()
    [listed] = server.receipts_of(trace_id)
    assert listed["engine"] == "external:support-bot"
    assert listed["task_id"] == span_id and listed["trace_id"] == trace_id
    receipt = server.receipt(listed["receipt_id"])
    first, second = receipt["citations"]
    assert (first["document_id"], first["chunk_id"]) == (cited["document_id"], cited["chunk_id"])
    assert first["score"] == "0.8123456789012345"  # the double's own shortest decimal text
    assert second["score"] is None  # absent, never invented
    assert second["source"] == "otlp.support-bot" and second["path"].startswith("spans/")
    payload = receipt["event"]["payload"]
    assert (
        payload["unverifiable"]
        == receipt["unverifiable"]
        == [{"rank": 3, "carried_id": "vector-store-42", "score": None, "reason": "unknown_id_no_content"}]
    )
    assert "score" not in payload["selected_entries"][1]  # omitted from the signed entry
    # The carried text is sealed: it reads back as the cited text, nowhere in the entry.
    assert "never ingested" not in json.dumps(receipt)
    citation = server.get(f"/v1/citations/{second['citation_id']}")
    assert citation["data"]["chunk_text"] == "A paragraph the ledger never ingested."


def test_genai_span_through_the_json_exporter(server: OtlpServer) -> None:
    """The GenAI convention, built with the SDK's tracer, sent by the OTLP/HTTP JSON exporter;
    ids `<document_id>/<chunk_id>` and scores exactly as the JSON text carried them."""
    first, second = server.chunks[1], server.chunks[2]
    documents = (
        f'[{{"id": "{first["document_id"]}/{first["chunk_id"]}", "score": 0.912345678901234567}},'
        f' {{"id": "{second["document_id"]}/{second["chunk_id"]}", "score": 12}}]'
    )
    provider = tracer_provider(server.exporter("json"), service="genai-app")
    with provider.get_tracer("test").start_as_current_span("retrieval kb") as span:
        span.set_attribute("gen_ai.operation.name", "retrieval")
        span.set_attribute("gen_ai.retrieval.query.text", "who may read restricted documents?")
        span.set_attribute("gen_ai.data_source.id", "kb-main")
        span.set_attribute("gen_ai.retrieval.documents", documents)
        trace_id = format_trace_id(span.get_span_context().trace_id)
    provider.shutdown()
    [listed] = server.receipts_of(trace_id)
    receipt = server.receipt(listed["receipt_id"])
    assert listed["engine"] == "external:genai-app"
    assert [c["score"] for c in receipt["citations"]] == ["0.912345678901234567", "12"]
    assert [c["chunk_id"] for c in receipt["citations"]] == [first["chunk_id"], second["chunk_id"]]
    assert "unverifiable" not in receipt["event"]["payload"]
    assert receipt["event"]["payload"]["data_source"] == "kb-main"  # gen_ai.data_source.id


def test_the_same_export_twice_is_recorded_once(server: OtlpServer) -> None:
    """An exporter's retry: the same spans again, answered as a success, recorded once."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = tracer_provider(memory, service="retrier")
    tracer = provider.get_tracer("test")
    for number in range(3):
        with tracer.start_as_current_span(f"retrieve {number}") as span:
            span.set_attribute("openinference.span.kind", "RETRIEVER")
            span.set_attribute("input.value", f"question {number}")
            span.set_attribute("retrieval.documents.0.document.content", server.chunks[number]["text"])
    with tracer.start_as_current_span("not a retrieval") as span:
        span.set_attribute("openinference.span.kind", "LLM")
    spans = memory.get_finished_spans()
    trace_ids = {format_trace_id(s.context.trace_id) for s in spans}
    exporter = server.exporter("protobuf")
    before = server.log_size()
    assert exporter.export(spans) == SpanExportResult.SUCCESS
    size = server.log_size()
    assert exporter.export(spans) == SpanExportResult.SUCCESS
    assert server.log_size() == size > before
    assert sorted(len(server.receipts_of(t)) for t in trace_ids) == [0, 1, 1, 1]


def test_nested_llamaindex_retriever_span_is_not_a_second_receipt(server: OtlpServer) -> None:
    """LlamaIndex's inner RETRIEVER span (a JSON query bundle, no documents) arrives in an
    earlier export than its parent: one retrieval, one receipt."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = tracer_provider(memory, service="llama-app")
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("BaseRetriever.retrieve") as outer:
        outer.set_attribute("openinference.span.kind", "RETRIEVER")
        outer.set_attribute("input.value", "how often do backups run?")
        outer.set_attribute("retrieval.documents.0.document.content", server.chunks[-1]["text"])
        outer.set_attribute("retrieval.documents.0.document.score", 1.5)
        with tracer.start_as_current_span("BM25Retriever._retrieve") as inner:
            inner.set_attribute("openinference.span.kind", "RETRIEVER")
            inner.set_attribute("input.mime_type", "application/json")
            inner.set_attribute("input.value", json.dumps({"query_str": "how often do backups run?"}))
        trace_id = format_trace_id(outer.get_span_context().trace_id)
    child, parent = memory.get_finished_spans()  # the child ends first
    exporter = server.exporter("protobuf")
    assert exporter.export([child]) == SpanExportResult.SUCCESS
    assert server.receipts_of(trace_id) == []
    assert exporter.export([parent]) == SpanExportResult.SUCCESS
    [listed] = server.receipts_of(trace_id)
    assert server.receipt(listed["receipt_id"])["citations"][0]["score"] == "1.5"


def test_exporter_configured_by_environment_alone(
    server: OtlpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OTEL_EXPORTER_OTLP_ENDPOINT is the ledger's base URL; the exporter appends /v1/traces."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", server.base_url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"Authorization=Bearer%20{server.tokens['writer']}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    provider = tracer_provider(OTLPSpanExporter(), service="env-configured")
    with provider.get_tracer("test").start_as_current_span("retrieve") as span:
        span.set_attribute("openinference.span.kind", "RETRIEVER")
        span.set_attribute("input.value", "what is kept for 30 days?")
        trace_id = format_trace_id(span.get_span_context().trace_id)
    provider.shutdown()
    [listed] = server.receipts_of(trace_id)
    assert listed["status"] == "no_hit" and listed["engine"] == "external:env-configured"


def test_a_token_without_the_write_scope_is_refused(server: OtlpServer) -> None:
    exporter = server.exporter("protobuf", who="reader")
    provider = tracer_provider(exporter)
    with provider.get_tracer("test").start_as_current_span("retrieve") as span:
        span.set_attribute("openinference.span.kind", "RETRIEVER")
        span.set_attribute("input.value", "refused?")
        trace_id = format_trace_id(span.get_span_context().trace_id)
    provider.shutdown()
    assert server.receipts_of(trace_id) == []


def test_carried_text_is_erased_like_any_document(server: OtlpServer) -> None:
    """The text a span carried is a document of the service's source: erasing it makes the
    citation unreadable (404, `x-replay-reason`) and the receipt still verifies its entry."""
    provider = tracer_provider(server.exporter("json"), service="erasable")
    with provider.get_tracer("test").start_as_current_span("retrieve") as span:
        span.set_attribute("openinference.span.kind", "RETRIEVER")
        span.set_attribute("input.value", "what did the model see?")
        span.set_attribute("retrieval.documents.0.document.content", "A personal note about Alice.")
        trace_id = format_trace_id(span.get_span_context().trace_id)
    provider.shutdown()
    [listed] = server.receipts_of(trace_id)
    [citation] = server.receipt(listed["receipt_id"])["citations"]
    url = f"{server.base_url}/v1/citations/{citation['citation_id']}"
    assert loopback_http.get(url, headers=server.headers(), timeout=30).status_code == 200
    erased = loopback_http.post(
        f"{server.base_url}/v1/erasures",
        json={"document_id": citation["document_id"]},
        headers=server.headers(),
        timeout=30,
    )
    assert erased.status_code == 200, erased.text
    gone = loopback_http.get(url, headers=server.headers(), timeout=30)
    assert gone.status_code == 404 and gone.headers.get("x-replay-reason")
    assert "Alice" not in gone.text
