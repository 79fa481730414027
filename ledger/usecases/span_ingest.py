"""Use case: OpenTelemetry retrieval spans recorded as signed retrieval receipts.

Each retrieval span (`ledger.retrieval.otlp_spans`) becomes one `RetrievalRecorded` through
the same path as `POST /v1/retrievals/batch` (`record_retrievals`): `engine:
external:<service>`, the span's trace id as the receipt's and the entry's trace id, its span
id as the task id. Exactly once per (trace id, span id): the pair is the write's idempotency
key, stored in the transaction that records the receipt, so a retried export (after a crash
too) records nothing twice and is answered as a success.

Each document the span reports is cited as:
- the ledger's chunk, when the span names one the tenant holds (`document.id` written
  `<document_id>/<chunk_id>`, or metadata `document_id` + `chunk_id`, or metadata
  `source` + `path` + `chunk_id`) and the text it carries, if any, occurs in that chunk;
- else the text the span carries, recorded first as a document of the per-service source
  `otlp.<service>` (sealed, erasable, under the tenant's retention rules like any chunk)
  and then cited;
- else an unverifiable citation on the receipt (`UnverifiedCitation`): never dropped.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from ledger.domain.events import UnverifiedCitation
from ledger.domain.fields import IDENTIFIER_PATTERN
from ledger.retrieval.chunking import chunk_markdown, stable_chunk_ids
from ledger.retrieval.otlp_spans import RejectedSpan, RetrievalSpan, SpanDocument, TraceSpan, sort_spans
from ledger.schemas.requests import MAX_SNIPPET_CHARS, DocumentIn, RetrievalIn
from ledger.storage.claims import DocumentClaims
from ledger.usecases.context import Caller, UseCaseContext
from ledger.usecases.documents import default_document_id, ingest_document
from ledger.usecases.errors import AccessDenied, Busy, UseCaseError
from ledger.usecases.ports import ChunkState
from ledger.usecases.retrievals import BatchItem, ChunkTexts, record_retrievals
from ledger.usecases.visibility import may_see
from ledger.writing.idempotency import IdempotencyKey, lookup_many
from ledger.writing.sealing import KeyDestroyed

_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)
# Receipts per transaction: an export of the SDK's default batch size (512) is one commit
# (each commit waits on the group committer: fewer, larger ones are faster).
ITEMS_PER_COMMIT = 512
TENANT_ATTRIBUTE = "citeledger.tenant_id"


@dataclass
class SpansRecorded:
    """What an export came to: receipts recorded, spans already recorded before (a retry),
    retrieval spans rejected (with reasons), nested duplicates and other spans ignored."""

    recorded: int = 0
    repeated: int = 0
    duplicates: int = 0
    other: int = 0
    rejected: list[RejectedSpan] = field(default_factory=list)
    receipt_ids: list[str] = field(default_factory=list)
    # A span waited on a document another request was recording: the export should be retried
    # (what was recorded is answered as a repeat then).
    busy: bool = False


def span_key(caller: Caller, span: RetrievalSpan) -> IdempotencyKey:
    """The span's idempotency key: one receipt per (tenant, trace id, span id). The fingerprint
    is the span's content, so a retry of the same span is the same request."""
    content = orjson.dumps(
        [span.query, span.engine, [[d.id, d.content, d.score, d.metadata] for d in span.documents]],
        option=orjson.OPT_SORT_KEYS,
        default=str,
    )
    return IdempotencyKey(
        caller.tenant_id, f"otlp:{span.trace_id}:{span.span_id}", hashlib.sha256(content).hexdigest()
    )


def _claimed_ref(document: SpanDocument) -> tuple[str, str] | None:
    """The (document id, chunk id) a span's document names, if it names one."""
    meta = document.metadata
    doc_id, chunk_id = meta.get("document_id"), meta.get("chunk_id")
    if isinstance(doc_id, str) and isinstance(chunk_id, str):
        return doc_id, chunk_id
    if document.id is not None and document.id.count("/") == 1:
        doc_id, chunk_id = document.id.split("/")
        return doc_id, chunk_id
    return None


class _Resolver:
    """Turns a span's documents into cited entries, for one request (chunk texts unsealed
    here are kept for this request only)."""

    def __init__(self, ctx: UseCaseContext, claims: DocumentClaims, caller: Caller) -> None:
        self.ctx, self.claims, self.caller = ctx, claims, caller
        # Chunk texts unsealed for this request, shared with the record path (one unseal each).
        self.texts: ChunkTexts = {}
        self.recorded_content: dict[tuple[str, str], tuple[str, str, str]] = {}

    def ref_of(self, document: SpanDocument) -> tuple[str, str] | None:
        """The ledger chunk a span's document names, if it names one (not yet looked up)."""
        ref = _claimed_ref(document)
        meta = document.metadata
        source, path, chunk_id = meta.get("source"), meta.get("path"), meta.get("chunk_id")
        if ref is None and isinstance(source, str) and isinstance(path, str) and isinstance(chunk_id, str):
            doc_id = self.ctx.lookups.source_documents(self.caller.tenant_id, source).get(path)
            ref = (doc_id, chunk_id) if doc_id else None
        return ref if ref is not None and all(_IDENTIFIER.match(part) for part in ref) else None

    def _chunk_text(self, chunk: ChunkState) -> str | None:
        if chunk.text is None:
            return None
        known = (self.caller.tenant_id, chunk.chunk_id, str(chunk.text.get("nonce")))
        if known not in self.texts:
            try:
                self.texts[known] = self.ctx.sealer.unseal(chunk.text, tenant_id=self.caller.tenant_id)
            except KeyDestroyed:
                return None
        return self.texts[known]

    def _content_entry(self, span: RetrievalSpan, content: str) -> tuple[str, str, str]:
        """The carried text recorded as a document of the service's own source (unchanged text
        is not recorded twice): (document id, chunk id, snippet) of its first chunk."""
        source = f"otlp.{span.service}"
        digest = hashlib.sha256(content.encode("utf-8")).hexdigest()
        known = self.recorded_content.get((source, digest))
        if known is not None:
            return known
        path = f"spans/{digest[:32]}.md"
        pieces = chunk_markdown(content)
        if not pieces:
            raise _Unrecordable("a document's content has no text")
        doc = DocumentIn(path=path, text=content, source=source)
        ingest_document(self.ctx, self.claims, self.caller, doc)
        document_id = default_document_id(self.caller.tenant_id, source, path)
        chunk_id = stable_chunk_ids(document_id, pieces)[0]
        found = (document_id, chunk_id, pieces[0].text[:MAX_SNIPPET_CHARS])
        self.recorded_content[(source, digest)] = found
        return found

    def entries(
        self, span: RetrievalSpan, chunks: Mapping[tuple[str, str], ChunkState]
    ) -> tuple[list[dict[str, Any]], list[UnverifiedCitation]]:
        entries: list[dict[str, Any]] = []
        unverifiable: list[UnverifiedCitation] = []
        for rank, document in enumerate(span.documents, start=1):
            ref = self.ref_of(document)
            chunk = chunks.get(ref) if ref is not None else None
            if ref is not None and chunk is not None:
                text = self._chunk_text(chunk)
                if text is not None and (document.content is None or document.content in text):
                    snippet = document.content or text[:MAX_SNIPPET_CHARS]
                    if snippet.strip():
                        entries.append(_entry(ref[0], ref[1], snippet, document.score))
                        continue
            if document.content and document.content.strip():
                doc_id, chunk_id, snippet = self._content_entry(span, document.content)
                entries.append(_entry(doc_id, chunk_id, snippet, document.score))
                continue
            carried = document.id if document.id and _IDENTIFIER.match(document.id) else None
            unverifiable.append(
                UnverifiedCitation(
                    rank=rank,
                    carried_id=carried,
                    score=document.score,
                    reason="unknown_id_no_content" if document.id else "no_id_no_content",
                )
            )
        return entries, unverifiable


class _Unrecordable(Exception):
    pass


def _entry(document_id: str, chunk_id: str, snippet: str, score: str | None) -> dict[str, Any]:
    entry = {"document_id": document_id, "chunk_id": chunk_id, "snippet": snippet}
    return entry if score is None else {**entry, "score": score}


def check_tenant(caller: Caller, spans: Sequence[TraceSpan]) -> None:
    """A resource claiming another tenant (`citeledger.tenant_id`) refuses the whole export:
    a token writes for its own tenant only."""
    for span in spans:
        if span.claimed_tenant is not None and span.claimed_tenant != caller.tenant_id:
            raise AccessDenied(
                f"resource attribute {TENANT_ATTRIBUTE} names another tenant than the token's",
                reason="tenant_mismatch",
            )


def record_spans(
    ctx: UseCaseContext, claims: DocumentClaims, caller: Caller, spans: Sequence[TraceSpan]
) -> SpansRecorded:
    """Record the retrieval spans of one export; a span that cannot be recorded is rejected
    with its reason while the others are recorded."""
    check_tenant(caller, spans)
    sorted_spans = sort_spans(spans)
    outcome = SpansRecorded(
        duplicates=sorted_spans.duplicates, other=sorted_spans.other, rejected=list(sorted_spans.rejected)
    )
    # The same span twice in one export is one retrieval.
    unique = list({(s.trace_id, s.span_id): s for s in sorted_spans.retrievals}.values())
    keys = {(s.trace_id, s.span_id): span_key(caller, s) for s in unique}
    stored = lookup_many(ctx.ledger.store, caller.tenant_id, [k.key for k in keys.values()]) if keys else {}
    fresh = [s for s in unique if keys[(s.trace_id, s.span_id)].key not in stored]
    outcome.repeated = len(unique) - len(fresh)
    resolver = _Resolver(ctx, claims, caller)
    for start in range(0, len(fresh), ITEMS_PER_COMMIT):
        _record_group(ctx, caller, resolver, fresh[start : start + ITEMS_PER_COMMIT], keys, outcome)
    return outcome


def _record_group(
    ctx: UseCaseContext,
    caller: Caller,
    resolver: _Resolver,
    spans: Sequence[RetrievalSpan],
    keys: Mapping[tuple[str, str], IdempotencyKey],
    outcome: SpansRecorded,
) -> None:
    refs = sorted({ref for span in spans for d in span.documents if (ref := resolver.ref_of(d)) is not None})
    found = ctx.lookups.chunks(caller.tenant_id, refs) if refs else {}
    # A restricted chunk the token may not see is one the ledger does not hold, for this caller:
    # same answer either way, so a span cannot probe restricted text.
    chunks = {ref: chunk for ref, chunk in found.items() if may_see(caller.scopes, chunk.sensitivity)}
    items: list[BatchItem] = []
    built: list[RetrievalSpan] = []
    for span in spans:
        try:
            entries, unverifiable = resolver.entries(span, chunks)
            body = RetrievalIn.model_validate(
                {
                    "query": span.query,
                    "engine": span.engine,
                    "task": {"task_id": span.span_id},
                    "status": "ok" if entries or unverifiable else "no_hit",
                    "selected_entries": entries,
                }
            )
        except Busy:
            outcome.busy = True
            continue
        except (UseCaseError, _Unrecordable, ValueError) as exc:
            outcome.rejected.append(RejectedSpan(span.trace_id, span.span_id, _reason(exc)))
            continue
        items.append(
            BatchItem(
                keys[(span.trace_id, span.span_id)],
                body,
                trace_id=span.trace_id,
                unverifiable=tuple(unverifiable),
            )
        )
        built.append(span)
    if not items:
        return
    for span, item_outcome in zip(built, record_retrievals(ctx, caller, items, resolver.texts), strict=True):
        if isinstance(item_outcome.error, Busy):
            outcome.busy = True
        elif item_outcome.error is not None:
            outcome.rejected.append(RejectedSpan(span.trace_id, span.span_id, _reason(item_outcome.error)))
        elif item_outcome.result is not None and item_outcome.result.created:
            outcome.recorded += 1
            outcome.receipt_ids.append(str(item_outcome.result.body.get("receipt_id")))
        else:
            outcome.repeated += 1


def _reason(exc: Exception) -> str:
    """Why a span was not recorded: the rule's own message (never holds document text)."""
    if isinstance(exc, UseCaseError):
        return f"{exc.code}: {exc.message}"[:300]
    if hasattr(exc, "errors"):  # a pydantic ValidationError: where, and what rule
        first = exc.errors(include_url=False, include_input=False)[0]
        return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"[:300]
    return str(exc)[:300]
