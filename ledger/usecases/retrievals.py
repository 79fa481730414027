"""Use case: record a retrieval a service ran itself (`engine: external:<name>`).

The ledger checks that every cited chunk is one it holds for the tenant, mints
the citation ids, seals the query and snippets, freezes the live policy as the
receipt's `policy_snapshot`, and appends one signed `RetrievalRecorded`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ledger.domain.entries import RecordedEvent, utc_now
from ledger.domain.events import AccessDenied as AccessDeniedEvent
from ledger.domain.events import (
    FilterApplied,
    Locator,
    PolicySnapshot,
    RetrievalRecorded,
    ScoreComponent,
    Sealed,
    SelectedEntry,
    Span,
    TaskEnvelope,
    UnverifiedCitation,
)
from ledger.domain.payloads import EventRejected
from ledger.domain.timestamps import parse_timestamp
from ledger.schemas.requests import MAX_BATCH_ITEMS, RetrievalIn
from ledger.tlog.canonical import canonical_json
from ledger.usecases.context import Caller, Pending, Result, UseCaseContext, commit, entry_facts, record
from ledger.usecases.errors import (
    ChunkScrubbed,
    Invalid,
    SubjectErased,
    TooLarge,
    UnknownChunk,
    UseCaseError,
)
from ledger.usecases.ports import ChunkState, PolicyState
from ledger.usecases.scopes import RESTRICTED_SCOPE
from ledger.usecases.visibility import may_see, narrowed
from ledger.writing.application import MAX_BATCH_EVENTS, Write
from ledger.writing.collector import collector_paused
from ledger.writing.idempotency import IdempotencyKey, IdempotencyKeyReused, bound, lookup_many, sealed_refs
from ledger.writing.retention import RetentionRules, expiry_key_for, format_timestamp
from ledger.writing.sealing import KeyDestroyed, document_key_ref, subject_key_ref, tenant_key_ref

# Chunk texts a batch request has unsealed, by (tenant, chunk id, nonce of the sealed text).
ChunkTexts = dict[tuple[str, str, str], str]


def _expiry(
    rules: RetentionRules, now: dt.datetime, retention_days: int | None, requested: str | None, index: int
) -> dt.datetime:
    """The citation's expiry: the document's window (never below the tenant floor), always
    a UTC midnight, the moment its expiry key is destroyed. A caller may not ask for a
    later one: a citation never outlives the text it points to (an earlier one is ignored,
    because the text stays readable through the document's window anyway)."""
    expires = rules.expires_at(now, retention_days)
    if requested:
        field = f"selected_entries[{index}].expires_at"
        try:
            asked = parse_timestamp(requested)
        except ValueError:
            raise Invalid(f"{field}: not a valid UTC timestamp", code="invalid_timestamp") from None
        if asked > expires:
            raise Invalid(
                f"{field}: later than the document's retention window ({format_timestamp(expires)})",
                code="expires_after_retention",
            )
    return expires


def _snippet_span(
    ctx: UseCaseContext,
    tenant: str,
    sealed_chunk: dict[str, Any] | None,
    snippet: str,
    index: int,
    chunk_id: str,
    texts: ChunkTexts,
) -> Span:
    """Where the snippet occurs in the chunk text the ledger recorded at ingest: a citation
    may quote its chunk, never text the client made up. `texts` keeps the chunks already
    unsealed by this request (in memory, for this request only)."""
    try:
        if sealed_chunk is None:
            raise KeyDestroyed(chunk_id)
        # The nonce names one sealed value: the same chunk text sealed again is another key.
        known = (tenant, chunk_id, str(sealed_chunk.get("nonce")))
        text = texts.get(known)
        if text is None:
            text = texts[known] = ctx.sealer.unseal(sealed_chunk, tenant_id=tenant)
    except KeyDestroyed:
        raise ChunkScrubbed(f"selected_entries[{index}]: the cited document's text was scrubbed") from None
    start = text.find(snippet)
    if start < 0:
        raise Invalid(
            f"selected_entries[{index}].snippet: does not occur in chunk {chunk_id} as the ledger holds it",
            code="snippet_not_in_chunk",
        )
    return Span(start=start, end=start + len(snippet))


def seal_entry(
    ctx: UseCaseContext,
    tenant: str,
    chunk: ChunkState,
    expires: dt.datetime,
    *,
    snippet: str,
    span: Span | None,
    score: str | None,
    score_breakdown: Sequence[tuple[str, str]],
    explanation: str | None,
    where: str,
    locator: Locator | None = None,
) -> SelectedEntry:
    """One selected entry of a receipt: a fresh citation id and the snippet sealed under
    the document's key *and* its expiry-day key (shredded by erasing the document or by
    the day passing). Shared by recorded and ledger-run retrievals."""
    doc_ref = document_key_ref(tenant, chunk.document_id)
    layers = [expiry_key_for(tenant, expires, chunk.document_id)]
    try:
        snapshot = ctx.sealer.seal(snippet, tenant_id=tenant, key_ref=doc_ref, extra_key_refs=layers)
        sealed_explanation = (
            ctx.sealer.seal(explanation, tenant_id=tenant, key_ref=doc_ref, extra_key_refs=layers)
            if explanation
            else None
        )
    except KeyDestroyed:
        raise ChunkScrubbed(f"{where}: the cited document's text was scrubbed") from None
    return SelectedEntry(
        citation_id=os.urandom(16).hex(),
        document_id=chunk.document_id,
        version_id=chunk.version_id,
        chunk_id=chunk.chunk_id,
        source=chunk.source,
        path=chunk.path,
        locator=locator or Locator(start_line=chunk.start_line, end_line=chunk.end_line),
        score=score,
        score_breakdown=[
            ScoreComponent(component=name, value=value)  # type: ignore[arg-type]
            for name, value in score_breakdown
        ],
        explanation=sealed_explanation,
        snapshot=snapshot,
        snippet_span=span,
        sensitivity=chunk.sensitivity,  # type: ignore[arg-type]
        expires_at=format_timestamp(expires),
    )


def entries_context_hash(entries: Sequence[SelectedEntry]) -> str:
    """The context hash of a receipt whose engine gave none: what it cited (document, chunk,
    and the commitment of the cited text), in order. A replay of an `external:` receipt
    computes its own the same way."""
    # Validated identifiers and hex commitments only: nothing for the domain walk to refuse.
    cited = [[e.document_id, e.chunk_id, e.snapshot.commitment] for e in entries]
    return hashlib.sha256(canonical_json(cited, checked=False)).hexdigest()


def seal_query(
    ctx: UseCaseContext, tenant: str, query: str, subject_id: str | None, receipt_expiry: dt.datetime
) -> Sealed:
    """The receipt's query: under the data subject's key (or the tenant's) and the expiry
    key of its latest citation, so it never outlives what it found."""
    query_ref = subject_key_ref(tenant, subject_id) if subject_id else tenant_key_ref(tenant)
    query_scope = f"subject.{subject_id}" if subject_id else "queries"
    try:
        return ctx.sealer.seal(
            query,
            tenant_id=tenant,
            key_ref=query_ref,
            extra_key_refs=[expiry_key_for(tenant, receipt_expiry, query_scope)],
        )
    except KeyDestroyed:
        raise SubjectErased("the data subject's key was destroyed") from None


def policy_snapshot(policy: PolicyState | None) -> PolicySnapshot:
    """The live policy frozen into a receipt (the null pair: no bundle active)."""
    return PolicySnapshot(
        bundle_hash=policy.bundle_sha256 if policy else None,
        bundle_yaml=policy.bundle_yaml if policy else None,
        captured_at=utc_now(),
    )


def _visible(caller: Caller, chunks: dict[tuple[str, str], ChunkState]) -> dict[tuple[str, str], ChunkState]:
    """The cited chunks the caller may see (`ledger.usecases.visibility`). A restricted one is
    missing for a caller without the scope, exactly like a chunk the ledger does not hold: it
    is refused before its text is compared with the snippet, with the answer an unknown chunk
    gets (chunk ids derive from the text, so any other answer would confirm a guessed chunk)."""
    return {ref: chunk for ref, chunk in chunks.items() if may_see(caller.scopes, chunk.sensitivity)}


def unknown_chunk(index: int, ref: tuple[str, str]) -> UnknownChunk:
    """The refusal of a cited chunk the ledger does not hold, or the caller may not see (one answer)."""
    return UnknownChunk(f"selected_entries[{index}]: no chunk {ref[1]} in document {ref[0]} for this tenant")


def hidden_chunks(caller: Caller, chunks: Mapping[tuple[str, str], ChunkState]) -> list[tuple[str, str]]:
    """("chunk", id) of each of `chunks` the caller may not see, in id order."""
    ids = {ref[1] for ref, chunk in chunks.items() if not may_see(caller.scopes, chunk.sensitivity)}
    return [("chunk", chunk_id) for chunk_id in sorted(ids)]


def record_denials(ctx: UseCaseContext, caller: Caller, resources: Sequence[tuple[str, str]]) -> None:
    """A signed AccessDenied for each (resource type, id) a refused write cited without the
    restricted scope."""
    if resources:
        denials = [
            AccessDeniedEvent(
                resource_type=kind,  # type: ignore[arg-type]
                resource_id=resource_id,
                required_scope=RESTRICTED_SCOPE,
                reason="restricted_scope_required",
            )
            for kind, resource_id in resources
        ]
        record(ctx, caller, denials, lambda events: {})


def record_retrieval(ctx: UseCaseContext, caller: Caller, body: RetrievalIn) -> Result:
    return commit(ctx, retrieval_write(ctx, caller, BatchItem(caller.idempotency, body), {}))


def retrieval_write(
    ctx: UseCaseContext,
    caller: Caller,
    item: BatchItem,
    texts: ChunkTexts,
    frozen_policy: PolicySnapshot | None = None,
    hashed_words: dict[str, int] | None = None,
) -> Pending:
    """The item's checked, sealed entry, ready to commit alone (an item of its own, keyed as
    its caller's request) or in a batch (each item its own key, the live policy frozen once).
    `texts`: the chunks this request unsealed (a batch's items share them); `hashed_words`:
    the question words it hashed already (a batch's items share them too)."""
    body = item.body
    if body is None:  # a batch refuses it before; never one of its own
        raise _malformed(item)
    tenant = caller.tenant_id
    refs = [(entry.document_id, entry.chunk_id) for entry in body.selected_entries]
    found = ctx.lookups.chunks(tenant, refs)
    chunks = _visible(caller, found)
    if len(chunks) < len(set(refs)):
        ctx.lookups.refresh()  # maybe ingested through another process a moment ago
        found = ctx.lookups.chunks(tenant, refs)
        chunks = _visible(caller, found)
    for index, ref in enumerate(refs):
        if ref not in chunks:
            record_denials(ctx, caller, hidden_chunks(caller, found))
            raise unknown_chunk(index, ref)
    rules = ctx.retention_for(tenant)
    now = ctx.clock()
    receipt_expiry = rules.expires_at(now, None)
    entries: list[SelectedEntry] = []
    for index, selected in enumerate(body.selected_entries):
        chunk = chunks[(selected.document_id, selected.chunk_id)]
        span = _snippet_span(ctx, tenant, chunk.text, selected.snippet, index, selected.chunk_id, texts)
        expires = _expiry(rules, now, chunk.retention_days, selected.expires_at, index)
        entry = seal_entry(
            ctx,
            tenant,
            chunk,
            expires,
            snippet=selected.snippet,
            span=span,
            score=selected.score,
            score_breakdown=[(c.component, c.value) for c in selected.score_breakdown],
            explanation=selected.explanation,
            where=f"selected_entries[{index}]",
        )
        receipt_expiry = max(receipt_expiry, expires)
        entries.append(entry)
    query = seal_query(ctx, tenant, body.query, body.subject_id, receipt_expiry)
    context_hash = body.context_hash or entries_context_hash(entries)
    receipt_id = os.urandom(16).hex()
    payload = RetrievalRecorded(
        receipt_id=receipt_id,
        query=query,
        subject_id=body.subject_id,
        task=TaskEnvelope(
            trace_id=caller.trace_id,
            task_id=body.task.task_id,
            deadline_ms=body.task.deadline_ms,
            # A claim is narrowed to the token's scopes, never widened (an unknown or unheld
            # scope named in it is dropped from the signed record).
            auth_scope=sorted(narrowed(caller.scopes, body.task.auth_scope)),
        ),
        engine=body.engine,
        mode="live",
        policy_snapshot=frozen_policy or policy_snapshot(ctx.lookups.live_policy(tenant)),
        selected_entries=entries,
        filters_applied=[
            FilterApplied(rule_id=f.rule_id, chunk_id=f.chunk_id, action=f.action)
            for f in body.filters_applied
        ],
        context_hash=context_hash,
        status=body.status,
        unverifiable=list(item.unverifiable) or None,
        data_source=item.data_source,
    )

    def answer(events: Sequence[RecordedEvent]) -> dict[str, Any]:
        event = events[0]
        return {
            "receipt_id": receipt_id,
            "citation_ids": [e.citation_id for e in entries],
            "citations": [
                {
                    "citation_id": e.citation_id,
                    "document_id": e.document_id,
                    "chunk_id": e.chunk_id,
                    "path": e.path,
                    "locator": {"start_line": e.locator.start_line, "end_line": e.locator.end_line},
                }
                for e in entries
            ],
            **entry_facts(event),
            "recorded_at": event.envelope["recorded_at"],
            "context_hash": context_hash,
            "status": body.status,
        }

    # The request quotes the query and the snippets: its record is bound to their keys.
    texts_refs = sealed_refs(query, *(e.snapshot for e in entries), *(e.explanation for e in entries))
    # The question's word hashes ride with the write for the question index (only hashes).
    hashes = ctx.ledger.word_hasher.hand_over(tenant, body.query, query.nonce, hashed_words)
    idempotent = bound(item.idempotency, ctx.sealer, texts_refs)
    # Its answer quotes no protected text (ids and places only): nothing for `reveal` to open.
    return Pending(caller, [payload], answer, idempotent, hashes, plain=True)


@dataclass(frozen=True)
class BatchItem:
    """One item of a batch as plain values: its key (None when the item is malformed),
    its retrieval, its correlation ids, or the problem that refuses it."""

    idempotency: IdempotencyKey | None
    body: RetrievalIn | None
    run_id: str | None = None
    trace_id: str | None = None
    problem: str | None = None
    # Documents the engine reported that the ledger cannot check (an OTLP span's).
    unverifiable: tuple[UnverifiedCitation, ...] = ()
    data_source: str | None = None  # the store the engine searched (an OTLP span's)


@dataclass(frozen=True)
class ItemOutcome:
    """A batch item's own answer: its result, or the domain error that refused it."""

    index: int
    result: Result | None = None
    error: Exception | None = None


ItemRefusal = (UseCaseError, IdempotencyKeyReused, EventRejected)


def _malformed(item: BatchItem) -> Invalid:
    return Invalid(item.problem or "item is malformed", code="invalid_item")


def record_retrievals(
    ctx: UseCaseContext, caller: Caller, items: Sequence[BatchItem], texts: ChunkTexts | None = None
) -> list[ItemOutcome]:
    """Record up to `MAX_BATCH_ITEMS` retrievals: each is checked on its own (a bad one is
    refused by index, the others go on), all accepted ones are committed in ONE transaction
    with their idempotency records. A key already recorded is answered from its record
    (`dedup: true`) without re-running the checks (the cited document may be gone by now).
    A failure of the transaction itself is raised: nothing of the batch was written."""
    with collector_paused():  # a batch's objects are freed by reference counting
        return _record_retrievals(ctx, caller, items, texts)


def _record_retrievals(
    ctx: UseCaseContext, caller: Caller, items: Sequence[BatchItem], texts: ChunkTexts | None
) -> list[ItemOutcome]:
    """`record_retrievals` with the collector paused."""
    if len(items) > MAX_BATCH_ITEMS:
        raise TooLarge(f"items: at most {MAX_BATCH_ITEMS} per batch")
    keys = [item.idempotency.key for item in items if item.idempotency is not None]
    stored = lookup_many(ctx.ledger.store, caller.tenant_id, keys) if keys else {}
    outcomes: dict[int, ItemOutcome] = {}
    accepted: list[tuple[int, Pending, Write]] = []
    entries = 0
    # This request's unsealed chunks (a caller that unsealed some already passes them) and the
    # question words it hashed for the question index, dropped when it returns.
    texts = texts if texts is not None else {}
    hashed_words: dict[str, int] = {}
    frozen_policy = policy_snapshot(ctx.lookups.live_policy(caller.tenant_id))  # one moment per batch
    for index, item in enumerate(items):
        try:
            if item.problem is not None or item.body is None or item.idempotency is None:
                raise _malformed(item)
            earlier = stored.get(item.idempotency.key)
            if earlier is not None:
                status, body = earlier.replay(item.idempotency, ctx.sealer)
                outcomes[index] = ItemOutcome(index, Result(body, created=bool(status)))
                continue
            own = caller
            if item.run_id or item.trace_id:  # the ids of the request it was first made in
                own = replace(
                    caller, run_id=item.run_id or caller.run_id, trace_id=item.trace_id or caller.trace_id
                )
            pending = retrieval_write(ctx, own, item, texts, frozen_policy, hashed_words)
            write = pending.prepared()
            # Receipts too large for one entry take several: the batch's one transaction holds
            # at most MAX_BATCH_EVENTS, so an item past it is refused on its own.
            if entries + len(write.prepared) > MAX_BATCH_EVENTS:
                raise TooLarge(
                    f"the batch's receipts take more than {MAX_BATCH_EVENTS} log entries; "
                    "send this item in another batch",
                    code="batch_too_large",
                )
            accepted.append((index, pending, write))
            entries += len(write.prepared)
        except ItemRefusal as exc:
            outcomes[index] = ItemOutcome(index, error=exc)
    texts.clear()
    hashed_words.clear()
    committed = ctx.commit_all([write for _, _, write in accepted])
    for (index, pending, _), outcome in zip(accepted, committed, strict=True):
        if outcome.error is not None and not isinstance(outcome.error, ItemRefusal):
            raise outcome.error
        try:
            outcomes[index] = ItemOutcome(index, pending.result(outcome))
        except ItemRefusal as exc:
            outcomes[index] = ItemOutcome(index, error=exc)
    return [outcomes[index] for index in range(len(items))]
