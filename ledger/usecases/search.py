"""Use case: a search the ledger runs itself — `rank` (`ledger.usecases.ranking`) at the
current position under the live policy, then one signed receipt for every search, hits or not."""

from __future__ import annotations

import datetime as dt
import decimal
import logging
import time
import uuid
from collections.abc import Sequence
from typing import Any

from ledger.domain.entries import RecordedEvent
from ledger.domain.events import (
    Locator,
    RetrievalRecorded,
    Sealed,
    SearchFilters,
    SearchRequest,
    SelectedEntry,
    Span,
    TaskEnvelope,
)
from ledger.schemas.requests import SearchIn
from ledger.usecases.context import Caller, Pending, Result, UseCaseContext, commit, entry_facts
from ledger.usecases.errors import ChunkScrubbed, Invalid
from ledger.usecases.policy import live_rules
from ledger.usecases.ports import PolicyState
from ledger.usecases.ranking import ENGINE, SearchHit, SearchRun, empty_run, rank
from ledger.usecases.retrievals import policy_snapshot, seal_entry, seal_query
from ledger.usecases.visibility import narrowed
from ledger.writing.idempotency import Protected, bound, protect_json, sealed_refs
from ledger.writing.retention import expiry_key_for
from ledger.writing.sealing import KeyDestroyed, Sealer, document_key_ref, tenant_key_ref

log = logging.getLogger("citeledger.search")

RECORD_MARGIN_S = 0.5  # of the request's deadline (at most a tenth), kept to record the receipt


def _scopes(caller: Caller, body: SearchIn) -> frozenset[str]:
    """Least privilege: the envelope's `auth_scope` narrows the token's scopes, never widens
    them (an empty list claims nothing: the token's scopes)."""
    return narrowed(caller.scopes, body.auth_scope or None)


def _outside_roots(roots: Sequence[str]) -> bool:
    return any(root.startswith("/") or ".." in root.split("/") or "\\" in root for root in roots)


def _root_sources(ctx: UseCaseContext, tenant: str, roots: Sequence[str]) -> list[str] | None:
    """The sources the target roots name (their first segment), as the corpus knows them now:
    frozen into the receipt so a replay reads the roots the same way."""
    firsts = {root.strip("/").partition("/")[0] for root in roots}
    if not firsts:
        return None
    named = sorted(set(ctx.lookups.documents_of_sources(tenant, sorted(firsts)).values()))
    return named or None


def search(ctx: UseCaseContext, caller: Caller, body: SearchIn) -> Result:
    """Rank at the index's current position under the live policy and record the
    signed receipt (every search: hits or not)."""
    started = time.monotonic()
    tenant = caller.tenant_id
    task = body.input
    scopes = _scopes(caller, body)
    index = ctx.search_index
    if index is None:
        raise Invalid("this process runs no search index", code="search_unavailable")
    position = index.refresh()
    policy_state = ctx.lookups.live_policy(tenant)
    policy = live_rules(policy_state)  # compiled once per bundle; an unloadable one is refused
    request = SearchRequest(
        target_roots=list(task.target_roots),
        root_sources=_root_sources(ctx, tenant, task.target_roots),
        top_k=min(task.top_k, policy.max_top_k),
        filters=SearchFilters(
            sensitivity=list(task.filters.sensitivity), path_prefixes=list(task.filters.path_prefixes)
        ),
        corpus_position=position,
    )
    limit_s = body.deadline_ms / 1000 if body.deadline_ms else None
    if caller.deadline is not None:  # the request's own deadline bounds the ranking too
        request_left = caller.deadline.remaining() - min(RECORD_MARGIN_S, caller.deadline.seconds / 10)
        limit_s = request_left if limit_s is None else min(limit_s, request_left)
    budget = limit_s - (time.monotonic() - started) if limit_s is not None else None
    if _outside_roots(task.target_roots):
        run = empty_run(
            "denied",
            position,
            ["target_roots must name sources or folders inside them"],
            denied_rule="outside_allowlist",
        )
    elif budget is not None and budget <= 0:
        run = empty_run("timeout", position)
    else:
        run = rank(ctx, tenant, task.query, request, policy, scopes, budget)
        if limit_s is not None and run.status != "timeout" and time.monotonic() - started > limit_s:
            run = empty_run("timeout", position, files=run.files_scanned)
    return _record(ctx, caller, body, request, policy_state, run, started)


def seal_hits(
    ctx: UseCaseContext, tenant: str, hits: Sequence[SearchHit], *, query_keys: bool = False
) -> tuple[list[SelectedEntry], dt.datetime]:
    """A ranking's hits as a receipt's selected entries (each snippet sealed like any
    citation's, `ledger.usecases.retrievals.seal_entry`), and the latest expiry among them
    (the receipt's query must not outlive it). Shared by a search and its replay;
    `query_keys`: also make ready the keys a new query is sealed under (a search's; a
    replay reuses the original's sealed query)."""
    rules = ctx.retention_for(tenant)
    now = ctx.clock()
    expiries = [rules.expires_at(now, hit.chunk.retention_days) for hit in hits]
    receipt_expiry = max([rules.expires_at(now, None), *expiries])
    # The keys this receipt seals under, read (and the expiry-day ones created) together:
    # one query and at most one durable commit, not one of each per key.
    ctx.sealer.keys.ensure(
        [
            *(document_key_ref(tenant, hit.chunk.document_id) for hit in hits),
            *(
                expiry_key_for(tenant, expires, hit.chunk.document_id)
                for hit, expires in zip(hits, expiries, strict=True)
            ),
            *(
                (tenant_key_ref(tenant), expiry_key_for(tenant, receipt_expiry, "queries"))
                if query_keys
                else ()
            ),
        ],
        tenant,
    )
    entries: list[SelectedEntry] = []
    for index, (hit, expires) in enumerate(zip(hits, expiries, strict=True)):
        entries.append(
            seal_entry(
                ctx,
                tenant,
                hit.chunk,
                expires,
                snippet=hit.snippet,
                span=Span(start=hit.snippet_span[0], end=hit.snippet_span[1]) if hit.snippet_span else None,
                score=hit.score,
                score_breakdown=hit.score_breakdown,
                explanation=None,
                where=f"hits[{index}]",
                locator=Locator(
                    start_line=hit.start_line,
                    end_line=hit.end_line,
                    heading_path=hit.chunk.heading_path,  # type: ignore[arg-type]
                ),
            )
        )
    return entries, receipt_expiry


def _record(
    ctx: UseCaseContext,
    caller: Caller,
    body: SearchIn,
    request: SearchRequest,
    policy_state: PolicyState | None,
    run: SearchRun,
    started: float,
) -> Result:
    tenant = caller.tenant_id
    entries, receipt_expiry = seal_hits(ctx, tenant, run.hits, query_keys=True)
    query = seal_query(ctx, tenant, body.input.query, None, receipt_expiry)
    receipt_id = uuid.uuid4().hex
    payload = RetrievalRecorded(
        receipt_id=receipt_id,
        query=query,
        task=TaskEnvelope(
            trace_id=body.trace_id or caller.trace_id,
            task_id=body.task_id,
            deadline_ms=body.deadline_ms,
            # The scopes the search ran with (the envelope's, narrowed to the token's): what a
            # replay passes to `rank` as `auth_scope`.
            auth_scope=sorted(_scopes(caller, body)),
        ),
        engine=ENGINE,
        mode="live",
        policy_snapshot=policy_snapshot(policy_state),
        search=request,
        selected_entries=entries,
        **run.receipt_fields(),
    )
    # The snippet's salted commitment, not a bare hash: once its key is shredded a log line
    # can no longer confirm a guess of the text.
    if log.isEnabledFor(logging.INFO):  # the hit list is built only when it is logged
        log.info(
            "search tenant=%s status=%s position=%d hits=%s",
            tenant,
            run.status,
            run.position,
            [
                {
                    "path": h.path,
                    "lines": [h.start_line, h.end_line],
                    "snippet_commitment": entry.snapshot.commitment[:16],
                    "snippet_chars": len(h.snippet),
                }
                for h, entry in zip(run.hits, entries, strict=True)
            ],
        )

    # Sealed before the commit (a shredded key fails this search alone, not the group commit):
    # what the stored answer keeps of the query, snippets, headings and terms. Only a keyed
    # search's answer is stored; an unkeyed one is built in plain (nothing to seal or reveal).
    keyed = caller.idempotency is not None
    try:
        citations = _merged(
            [
                _citation(ctx.sealer, tenant, hit, entry, query, keyed=keyed)
                for hit, entry in zip(run.hits, entries, strict=True)
            ]
        )
        gaps: list[str] | Protected = (
            protect_json(
                ctx.sealer, list(run.gaps), tenant_id=tenant, key_refs=sealed_refs(query), withheld=[]
            )
            if run.gaps and keyed
            else list(run.gaps)
        )
    except KeyDestroyed:
        raise ChunkScrubbed("a cited document's text was scrubbed during the search; retry") from None

    def answer(events: Sequence[RecordedEvent]) -> dict[str, Any]:
        errors = []
        if run.status == "denied":
            errors.append(
                {
                    "code": f"denied.{run.denied_rule}",
                    "retryable": False,
                    "message": f"refused by rule {run.denied_rule}",
                }
            )
        if run.status == "timeout":
            errors.append(
                {
                    "code": "timeout",
                    "retryable": True,
                    "message": f"the search passed its deadline of {body.deadline_ms} ms",
                }
            )
        return {
            "trace_id": body.trace_id or caller.trace_id,
            "task_id": body.task_id,
            "status": run.status,
            "output": {
                "query": Protected(body.input.query, query, withheld="") if keyed else body.input.query,
                "target_roots": list(request.target_roots),
                "citations": citations,
                "gaps": gaps,
            },
            "errors": errors,
            "metrics": {
                "latency_ms": round((time.monotonic() - started) * 1000, 3),
                **run.metrics,
            },
            "receipt_id": receipt_id,
            "context_hash": run.context_hash,
            "corpus_position": run.position,
            **entry_facts(events[0]),
        }

    # The question's word hashes for the question index, from the plain question (`Pending`).
    hashes = ctx.ledger.word_hasher.hand_over(tenant, body.input.query, query.nonce)
    idempotent = bound(caller.idempotency, ctx.sealer, sealed_refs(query))
    return commit(ctx, Pending(caller, [payload], answer, idempotent, hashes, plain_answer=not keyed))


def _merged(citations: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One citation per file (seed `004`: a file's snippets merged, not repeated), in the
    order of the ranking: best score first, ties by path. A citation's own fields are its best
    part's (score, then place in the file); `parts` lists every snippet of the file in reading
    order, each with its span, score and reason (one receipt entry, one `citation_id`, each)."""
    # A file is a document: the same relative path in two sources is two files.
    files: dict[str, list[dict[str, Any]]] = {}
    for citation in citations:
        files.setdefault(citation["document_id"], []).append(citation)
    out = []
    for parts in files.values():
        best = min(parts, key=lambda part: (-decimal.Decimal(part["score"]), part["locator"]["start_line"]))
        out.append({**best, "parts": parts})
    return out


def _citation(
    sealer: Sealer, tenant: str, hit: SearchHit, entry: SelectedEntry, query: Sealed, *, keyed: bool
) -> dict[str, Any]:
    """One hit of the answer. Its text is `Protected` under the keys that seal it in the
    receipt: the snippet is the entry's sealed snapshot, the heading the chunk's sealed
    heading, and the matched terms (words of the query and of the chunk) both keys' layers.
    Not `keyed` (no stored answer): the same values in plain."""
    heading = hit.chunk.heading_path
    terms = [{"term": t, "bm25": v} for t, v in hit.term_scores]
    heading_path = hit.heading_path if heading is not None else None
    if not keyed:
        return _answer_citation(hit, entry, hit.snippet, heading_path, terms)
    return _answer_citation(
        hit,
        entry,
        Protected(hit.snippet, entry.snapshot, withheld=""),
        Protected(heading_path, Sealed.model_validate(heading)) if heading_path is not None else None,
        protect_json(
            sealer, terms, tenant_id=tenant, key_refs=sealed_refs(entry.snapshot, query), withheld=[]
        )
        if terms
        else [],
    )


def _answer_citation(
    hit: SearchHit, entry: SelectedEntry, snippet: Any, heading_path: Any, terms: Any
) -> dict[str, Any]:
    return {
        "citation_id": entry.citation_id,
        "document_id": hit.document_id,
        "chunk_id": hit.chunk_id,
        "source": entry.source,
        "path": hit.path,
        "snippet": snippet,
        "snippet_span": (
            {"start": hit.snippet_span[0], "end": hit.snippet_span[1]} if hit.snippet_span else None
        ),
        "locator": {
            "start_line": hit.start_line,
            "end_line": hit.end_line,
            "heading_path": heading_path,
        },
        "score": hit.score,
        "reason": {
            "score_breakdown": [{"component": c, "value": v} for c, v in hit.score_breakdown],
            "terms": terms,
            "policy": [{"rule_id": r, "action": a} for r, a in hit.policy_rules],
        },
        "sensitivity": hit.sensitivity,
        "expires_at": entry.expires_at,
    }
