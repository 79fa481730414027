"""Which OpenTelemetry spans are retrievals, and what each one says (sans-I/O, plain values).

Two conventions are read (attribute by attribute in `docs/otlp.md`):

- OpenInference (LangChain, LlamaIndex, Haystack, DSPy instrumentations):
  `openinference.span.kind = RETRIEVER`, the query in `input.value`, the documents in
  `retrieval.documents.<n>.document.{id, content, score, metadata}` (metadata a JSON text).
- OpenTelemetry GenAI: `gen_ai.operation.name = retrieval`, the query in
  `gen_ai.retrieval.query.text`, the documents in `gen_ai.retrieval.documents` (a JSON text
  `[{id, score, content?, metadata?}]`), `gen_ai.data_source.id`.

A transport (`api/otlp/`) decodes OTLP into `TraceSpan`s; `sort_spans` says which are
retrievals to record, which are nested duplicates, which are other spans, and which are
retrievals that cannot be recorded (with the reason, never the span's text).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger.domain.fields import IDENTIFIER_PATTERN, SCORE_PATTERN

OPENINFERENCE = "openinference"
GEN_AI = "gen_ai"

# Per span: a retrieval citing more is refused on its own (the receipt's entry limit is 200).
MAX_DOCUMENTS_PER_SPAN = 200
# A JSON attribute (metadata, GenAI documents) is parsed only below this size and depth.
MAX_JSON_ATTRIBUTE_CHARS = 1024 * 1024
MAX_JSON_DEPTH = 32

_DOCUMENT_ATTRIBUTE = re.compile(r"^retrieval\.documents\.(\d{1,6})\.document\.(id|content|score|metadata)$")
# Scores are kept as the decimal text the span carried; beyond this they are not a score.
_SCORE = re.compile(SCORE_PATTERN)
_ENGINE_CHARS = re.compile(r"[^a-z0-9._-]+")
_HEX_ID = re.compile(r"^[0-9a-f]+$")
_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)


@dataclass(frozen=True)
class TraceSpan:
    """One span as plain values: ids in lowercase hex, attributes flattened to Python values
    (strings, numbers, booleans, bytes, lists), the resource's `service.name`, and the tenant
    the resource claims (`citeledger.tenant_id`), if any."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    service_name: str
    attributes: Mapping[str, Any]
    claimed_tenant: str | None = None


@dataclass(frozen=True)
class SpanDocument:
    """One document a retrieval span says it returned, in the span's order."""

    id: str | None
    content: str | None
    score: str | None  # the decimal text the span carried; None: the span gave none
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RetrievalSpan:
    trace_id: str
    span_id: str
    service: str  # `service.name` made an engine name: `external:<service>`
    convention: str
    query: str
    documents: tuple[SpanDocument, ...]
    data_source: str | None = None

    @property
    def engine(self) -> str:
        return f"external:{self.service}"


@dataclass(frozen=True)
class RejectedSpan:
    trace_id: str
    span_id: str
    reason: str  # names the rule or attribute, never a value


@dataclass
class SortedSpans:
    retrievals: list[RetrievalSpan] = field(default_factory=list)
    rejected: list[RejectedSpan] = field(default_factory=list)
    duplicates: int = 0  # nested RETRIEVER spans of a retrieval recorded through its outer span
    other: int = 0  # spans of other kinds: counted, ignored


class SpanRefused(ValueError):
    """A span that is a retrieval but cannot be recorded."""


def engine_name(service_name: str) -> str:
    """`service.name` as the engine's name: lowercase, runs of other characters as `-`, at
    most 64 characters (`unknown-service` when empty)."""
    name = _ENGINE_CHARS.sub("-", service_name.strip().lower()).strip("-")[:64].strip("-")
    return name or "unknown-service"


def convention_of(attributes: Mapping[str, Any]) -> str | None:
    if attributes.get("openinference.span.kind") == "RETRIEVER":
        return OPENINFERENCE
    if attributes.get("gen_ai.operation.name") == "retrieval":
        return GEN_AI
    return None


def score_text(value: Any) -> str | None:
    """A score as decimal text exactly as carried: a JSON number's own text, a double's
    shortest round-tripping form (`repr`: `0.1`, `1e-05`). None when absent."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise SpanRefused("score: not a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise SpanRefused("score: not a finite number")
    text = repr(value) if isinstance(value, float) else str(value).strip()
    if not _SCORE.match(text):
        raise SpanRefused("score: not a decimal number of at most 17 integer and 24 fraction digits")
    return text


def _json_attribute(value: Any, name: str) -> Any:
    """A JSON text attribute, parsed with numbers kept as their text (scores exactly as carried)."""
    if not isinstance(value, str):
        raise SpanRefused(f"{name}: not a JSON text")
    if len(value) > MAX_JSON_ATTRIBUTE_CHARS:
        raise SpanRefused(f"{name}: over {MAX_JSON_ATTRIBUTE_CHARS} characters")
    try:
        parsed = json.loads(value, parse_float=str, parse_int=str)
    except (ValueError, RecursionError):
        raise SpanRefused(f"{name}: not a JSON text") from None
    if _depth(parsed) > MAX_JSON_DEPTH:
        raise SpanRefused(f"{name}: nested deeper than {MAX_JSON_DEPTH}")
    return parsed


def _depth(value: Any, level: int = 0) -> int:
    if level > MAX_JSON_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(item, level + 1) for item in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(item, level + 1) for item in value), default=level + 1)
    return level


def _text(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise SpanRefused(f"{name}: not a string")
    return value


def _metadata(value: Any, name: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    parsed = _json_attribute(value, name) if isinstance(value, str) else value
    if not isinstance(parsed, dict):
        raise SpanRefused(f"{name}: not a JSON object")
    return parsed


def _openinference_documents(attributes: Mapping[str, Any]) -> tuple[SpanDocument, ...]:
    fields: dict[int, dict[str, Any]] = {}
    for name, value in attributes.items():
        found = _DOCUMENT_ATTRIBUTE.match(name)
        if found is not None:
            index = int(found.group(1))
            if index >= MAX_DOCUMENTS_PER_SPAN:
                raise SpanRefused(
                    f"retrieval.documents: more than {MAX_DOCUMENTS_PER_SPAN} documents per span "
                    "(limit otlp.max_documents_per_span)"
                )
            fields.setdefault(index, {})[found.group(2)] = value
    documents = []
    for index in sorted(fields):
        given = fields[index]
        where = f"retrieval.documents.{index}.document"
        raw_id = given.get("id")
        documents.append(
            SpanDocument(
                id=str(raw_id) if isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool) else None,
                content=_text(given.get("content"), f"{where}.content"),
                score=score_text(given.get("score")),
                metadata=_metadata(given.get("metadata"), f"{where}.metadata"),
            )
        )
    return tuple(documents)


def _gen_ai_documents(attributes: Mapping[str, Any]) -> tuple[SpanDocument, ...]:
    raw = attributes.get("gen_ai.retrieval.documents")
    if raw is None:
        return ()
    parsed = _json_attribute(raw, "gen_ai.retrieval.documents")
    if not isinstance(parsed, list):
        raise SpanRefused("gen_ai.retrieval.documents: not a JSON array")
    if len(parsed) > MAX_DOCUMENTS_PER_SPAN:
        raise SpanRefused(
            f"gen_ai.retrieval.documents: more than {MAX_DOCUMENTS_PER_SPAN} documents per span "
            "(limit otlp.max_documents_per_span)"
        )
    documents = []
    for index, item in enumerate(parsed):
        where = f"gen_ai.retrieval.documents[{index}]"
        if not isinstance(item, dict):
            raise SpanRefused(f"{where}: not a JSON object")
        raw_id = item.get("id")
        documents.append(
            SpanDocument(
                id=raw_id if isinstance(raw_id, str) else None,
                content=_text(item.get("content"), f"{where}.content"),
                score=score_text(item.get("score")),
                metadata=_metadata(item.get("metadata"), f"{where}.metadata"),
            )
        )
    return tuple(documents)


def _is_query_bundle(attributes: Mapping[str, Any]) -> bool:
    """LlamaIndex's inner RETRIEVER span (`_retrieve`): its input is a JSON query bundle."""
    if attributes.get("input.mime_type") != "application/json":
        return False
    value = attributes.get("input.value")
    if not isinstance(value, str) or len(value) > MAX_JSON_ATTRIBUTE_CHARS:
        return False
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        return False
    # The instrumentation writes the call's arguments: `{"query_bundle": {"query_str": ...}}`
    # (openinference-instrumentation-llama-index 4), or the bundle itself.
    bundle = parsed.get("query_bundle", parsed) if isinstance(parsed, dict) else None
    return isinstance(bundle, dict) and "query_str" in bundle


def _has_documents(attributes: Mapping[str, Any], convention: str) -> bool:
    if convention == GEN_AI:
        return "gen_ai.retrieval.documents" in attributes
    return any(name.startswith("retrieval.documents.") for name in attributes)


def _retrieval(span: TraceSpan, convention: str) -> RetrievalSpan:
    attributes = span.attributes
    if convention == GEN_AI:
        query = _text(attributes.get("gen_ai.retrieval.query.text"), "gen_ai.retrieval.query.text")
        documents = _gen_ai_documents(attributes)
    else:
        query = _text(attributes.get("input.value"), "input.value")
        documents = _openinference_documents(attributes)
    # Either convention's span may name the store it searched; recorded as the receipt's.
    data_source = attributes.get("gen_ai.data_source.id")
    if data_source is not None and not (isinstance(data_source, str) and _IDENTIFIER.match(data_source)):
        raise SpanRefused(f"gen_ai.data_source.id: not an identifier ({IDENTIFIER_PATTERN})")
    if not query:
        where = "gen_ai.retrieval.query.text" if convention == GEN_AI else "input.value"
        raise SpanRefused(f"{where}: the span carries no query")
    return RetrievalSpan(
        trace_id=span.trace_id,
        span_id=span.span_id,
        service=engine_name(span.service_name),
        convention=convention,
        query=query,
        documents=documents,
        data_source=data_source,
    )


def valid_ids(span: TraceSpan) -> bool:
    """OTLP ids: a 16-byte trace id and an 8-byte span id, not all zero."""
    return (
        len(span.trace_id) == 32
        and len(span.span_id) == 16
        and bool(_HEX_ID.match(span.trace_id + span.span_id))
        and span.trace_id.strip("0") != ""
        and span.span_id.strip("0") != ""
    )


def sort_spans(spans: Sequence[TraceSpan]) -> SortedSpans:
    """The retrievals among `spans`, one per retrieval: a RETRIEVER span without documents
    inside another RETRIEVER span of the same export, or whose input is a LlamaIndex query
    bundle (recognised even when its parent came in an earlier export), is that retrieval's
    nested duplicate, not a second retrieval."""
    retriever_ids = {span.span_id for span in spans if convention_of(span.attributes) == OPENINFERENCE}
    result = SortedSpans()
    for span in spans:
        convention = convention_of(span.attributes)
        if convention is None:
            result.other += 1
            continue
        if not valid_ids(span):
            result.rejected.append(
                RejectedSpan(span.trace_id, span.span_id, "trace_id/span_id: not valid OTLP ids")
            )
            continue
        if convention == OPENINFERENCE and not _has_documents(span.attributes, convention):
            nested = span.parent_span_id is not None and span.parent_span_id in retriever_ids
            if nested or _is_query_bundle(span.attributes):
                result.duplicates += 1
                continue
        try:
            result.retrievals.append(_retrieval(span, convention))
        except SpanRefused as exc:
            result.rejected.append(RejectedSpan(span.trace_id, span.span_id, str(exc)))
    return result
