"""The sans-I/O span mapping (`ledger.retrieval.otlp_spans`): which spans are retrievals, what
each says, scores as carried, nested duplicates; and the bounded decoding (`api.otlp.decoding`)."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.otlp.decoding import OtlpLimits, OtlpRefusal, inflate
from ledger.retrieval.otlp_spans import (
    MAX_DOCUMENTS_PER_SPAN,
    RetrievalSpan,
    SpanRefused,
    TraceSpan,
    engine_name,
    score_text,
    sort_spans,
)

TRACE = "0af7651916cd43dd8448eb211c80319c"


def _span(span_id: str, parent: str | None = None, service: str = "svc", **attributes: Any) -> TraceSpan:
    return TraceSpan(TRACE, span_id, parent, "span", service, attributes)


def _only_retrieval(attributes: dict[str, Any]) -> RetrievalSpan:
    """The one retrieval a lone span with these attributes maps to."""
    [retrieval] = sort_spans([_span("b7ad6b7169203331", **attributes)]).retrievals
    return retrieval


def test_openinference_documents_in_order_with_scores_as_carried() -> None:
    retrieval = _only_retrieval(
        {
            "openinference.span.kind": "RETRIEVER",
            "input.value": "q",
            "retrieval.documents.1.document.content": "second",
            "retrieval.documents.0.document.content": "first",
            "retrieval.documents.0.document.score": 0.1,
            "retrieval.documents.0.document.metadata": '{"document_id": "d", "chunk_id": "c", "n": 1.50}',
        },
    )
    first, second = retrieval.documents
    assert (first.content, first.score, second.content, second.score) == ("first", "0.1", "second", None)
    assert first.metadata == {"document_id": "d", "chunk_id": "c", "n": "1.50"}


def test_genai_documents_keep_the_json_number_text() -> None:
    retrieval = _only_retrieval(
        {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.retrieval.query.text": "q",
            "gen_ai.retrieval.documents": '[{"id": "a/b", "score": 0.91234567890123456789}, {"id": "x"}]',
        },
    )
    assert [(d.id, d.score) for d in retrieval.documents] == [("a/b", "0.91234567890123456789"), ("x", None)]


@pytest.mark.parametrize(
    ("carried", "text"),
    [
        (0.1, "0.1"),
        (2, "2"),
        (1e-05, "1e-05"),
        (-0.0, "-0.0"),
        (1e20, "1e+20"),
        ("1E-3", "1E-3"),
        ("0.50", "0.50"),
    ],
)
def test_score_text_is_what_the_span_carried(carried: Any, text: str) -> None:
    assert score_text(carried) == text


@pytest.mark.parametrize("carried", [float("nan"), float("inf"), True, "abc", [1], "1" * 18])
def test_score_that_is_not_a_number_refuses_the_span(carried: Any) -> None:
    with pytest.raises(SpanRefused):
        score_text(carried)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_a_double_score_round_trips(value: float) -> None:
    text = score_text(value)
    assert text is not None and float(text) == value


def test_nested_and_query_bundle_retriever_spans_are_duplicates() -> None:
    kind = {"openinference.span.kind": "RETRIEVER"}
    outer = _span(
        "1111111111111111", **kind, **{"input.value": "q", "retrieval.documents.0.document.content": "t"}
    )
    nested = _span("2222222222222222", "1111111111111111", **kind, **{"input.value": "q"})
    bundle = {"input.value": json.dumps({"query_str": "q"}), "input.mime_type": "application/json"}
    orphan = _span("3333333333333333", "9999999999999999", **kind, **bundle)  # its parent came earlier
    # As openinference-instrumentation-llama-index 4 writes it: the call's arguments.
    arguments = {**bundle, "input.value": json.dumps({"query_bundle": {"query_str": "q", "embedding": None}})}
    orphan_4 = _span("6666666666666666", "8888888888888888", **kind, **arguments)
    empty = _span("4444444444444444", **kind, **{"input.value": "nothing found"})  # a real no-hit
    other = _span("5555555555555555", **{"openinference.span.kind": "LLM"})
    result = sort_spans([nested, outer, orphan, orphan_4, empty, other])
    assert [r.span_id for r in result.retrievals] == ["1111111111111111", "4444444444444444"]
    assert (result.duplicates, result.other, result.rejected) == (3, 1, [])


def test_rejections_name_the_rule_never_the_value() -> None:
    kind = {"openinference.span.kind": "RETRIEVER", "input.value": "q"}
    too_many = {
        f"retrieval.documents.{n}.document.content": "secret" for n in range(MAX_DOCUMENTS_PER_SPAN + 1)
    }
    spans = [
        _span("1111111111111111", **{"openinference.span.kind": "RETRIEVER"}),
        _span("2222222222222222", **kind, **too_many),
        _span("3333333333333333", **kind, **{"retrieval.documents.0.document.content": 5}),
        _span("0000000000000000", **kind),
    ]
    reasons = [r.reason for r in sort_spans(spans).rejected]
    assert reasons == [
        "input.value: the span carries no query",
        f"retrieval.documents: more than {MAX_DOCUMENTS_PER_SPAN} documents per span "
        "(limit otlp.max_documents_per_span)",
        "retrieval.documents.0.document.content: not a string",
        "trace_id/span_id: not valid OTLP ids",
    ]
    assert not any("secret" in reason for reason in reasons)


@pytest.mark.parametrize(
    ("service", "engine"),
    [
        ("My RAG", "my-rag"),
        ("", "unknown-service"),
        ("unknown_service:python", "unknown_service-python"),
        ("x" * 99, "x" * 64),
    ],
)
def test_engine_names(service: str, engine: str) -> None:
    assert engine_name(service) == engine


def test_inflate_stops_at_the_limit() -> None:
    limits = OtlpLimits(max_request_bytes=1000)
    assert inflate(gzip.compress(b"a" * 1000), "gzip", limits) == b"a" * 1000
    with pytest.raises(OtlpRefusal) as refused:
        inflate(gzip.compress(b"a" * 10_000_000), "gzip", limits)
    assert refused.value.status == 413 and "otlp.max_request_bytes" in refused.value.message
    with pytest.raises(OtlpRefusal) as truncated:
        inflate(gzip.compress(b"a" * 500)[:-10], "gzip", limits)
    assert truncated.value.status == 400
