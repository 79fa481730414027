"""Use case: OpenTelemetry retrieval spans recorded as signed retrieval receipts.

Each retrieval span (`ledger.retrieval.otlp_spans`) becomes one `RetrievalRecorded` through
the same path as `POST /v1/retrievals/batch` (`record_retrievals`): `engine:
external:<service>`, the span's trace id as the receipt's and the entry's trace id, its span
id as the task id. Exactly once per (trace id, span id): the pair is the write's idempotency
key, stored in the transaction that records the receipt, so a retried export (after a crash
too) records nothing twice and is answered as a success.

Each document the span reports is cited as `ledger.usecases.span_citations` says: the ledger's
chunk it names (by ids, or by source and path), else the text it carries (recorded under
`otlp.<service>`), else an unverifiable citation. A chunk the token may not see refuses the
span as `POST /v1/retrievals` refuses it (a signed `AccessDenied`, the span rejected).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import orjson

from ledger.retrieval.otlp_spans import RejectedSpan, RetrievalSpan, TraceSpan, sort_spans
from ledger.schemas.requests import RetrievalIn
from ledger.storage.claims import DocumentClaims
from ledger.usecases.context import Caller, UseCaseContext
from ledger.usecases.errors import AccessDenied, Busy, UseCaseError
from ledger.usecases.retrievals import BatchItem, record_denials, record_retrievals
from ledger.usecases.span_citations import CitationDenied, SpanCitations, Unrecordable
from ledger.writing.idempotency import IdempotencyKey, lookup_many

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
    ctx: UseCaseContext,
    claims: DocumentClaims,
    caller: Caller,
    spans: Sequence[TraceSpan],
    source_roots: Mapping[str, str] | None = None,
) -> SpansRecorded:
    """Record the retrieval spans of one export; a span that cannot be recorded is rejected
    with its reason while the others are recorded. `source_roots`: the tenant's synced
    sources (name -> root path), to match a document's file path to the ledger's document."""
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
    citations = SpanCitations(ctx, claims, caller, source_roots or {})
    for start in range(0, len(fresh), ITEMS_PER_COMMIT):
        _record_group(ctx, caller, citations, fresh[start : start + ITEMS_PER_COMMIT], keys, outcome)
    return outcome


def _record_group(
    ctx: UseCaseContext,
    caller: Caller,
    citations: SpanCitations,
    spans: Sequence[RetrievalSpan],
    keys: Mapping[tuple[str, str], IdempotencyKey],
    outcome: SpansRecorded,
) -> None:
    citations.look_up(spans)
    items: list[BatchItem] = []
    built: list[RetrievalSpan] = []
    for span in spans:
        try:
            entries, unverifiable = citations.entries(span)
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
        except CitationDenied as exc:
            # As POST /v1/retrievals: the denial is signed, the retrieval refused.
            record_denials(ctx, caller, exc.denied)
            outcome.rejected.append(
                RejectedSpan(span.trace_id, span.span_id, f"unknown_chunk: {exc.message}")
            )
            continue
        except (UseCaseError, Unrecordable, ValueError) as exc:
            outcome.rejected.append(RejectedSpan(span.trace_id, span.span_id, _reason(exc)))
            continue
        key = keys[(span.trace_id, span.span_id)]
        items.append(
            BatchItem(
                key,
                body,
                trace_id=span.trace_id,
                unverifiable=tuple(unverifiable),
                data_source=span.data_source,
            )
        )
        built.append(span)
    if not items:
        return
    for span, item_outcome in zip(built, record_retrievals(ctx, caller, items, citations.texts), strict=True):
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
