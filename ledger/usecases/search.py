"""Use case: a search the ledger runs itself — `rank` (`ledger.usecases.ranking`) at the
current position under the live policy, then one signed receipt for every search, hits or not."""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import logging
import time
import uuid
from collections.abc import Sequence
from typing import Any

from ledger.entries import RecordedEvent
from ledger.events import (
    FilterApplied,
    Locator,
    RetrievalRecorded,
    SearchFilters,
    SearchRequest,
    SelectedEntry,
    Span,
    TaskEnvelope,
)
from ledger.idempotency import IdempotencyKey
from ledger.policy_rules import PolicyRules, rules_from_bundle
from ledger.retention import expiry_key_for
from ledger.sealing import document_key_ref, tenant_key_ref
from ledger.usecases.commands import SearchIn
from ledger.usecases.context import Caller, Result, UseCaseContext, entry_facts, record
from ledger.usecases.errors import Invalid
from ledger.usecases.ports import PolicyState
from ledger.usecases.ranking import ENGINE, SearchHit, SearchRun, empty_run, rank
from ledger.usecases.retrievals import policy_snapshot, seal_entry, seal_query
from ledger.usecases.visibility import narrowed

log = logging.getLogger("citeledger.search")


_rules_cache: dict[str, PolicyRules] = {}


def rules_of(policy: PolicyState | None) -> PolicyRules:
    """The rules of a published bundle (published bundles were checked; cached by hash)."""
    from ledger.usecases.policy import parse_bundle

    if policy is None:
        return PolicyRules()
    rules = _rules_cache.get(policy.bundle_sha256)
    if rules is None:
        rules = rules_from_bundle(parse_bundle(policy.bundle_yaml))
        if len(_rules_cache) > 1_000:
            _rules_cache.clear()
        _rules_cache[policy.bundle_sha256] = rules
    return rules


def rules_from_snapshot(bundle_yaml: str | None) -> PolicyRules:
    """The rules of a receipt's frozen `policy_snapshot` (no bundle: no rules), for replay."""
    from ledger.usecases.policy import parse_bundle

    return rules_from_bundle(parse_bundle(bundle_yaml)) if bundle_yaml else PolicyRules()


def _scopes(caller: Caller, body: SearchIn) -> frozenset[str]:
    """Least privilege: the envelope's `auth_scope` narrows the token's scopes, never widens
    them (an empty list claims nothing: the token's scopes)."""
    return narrowed(caller.scopes, body.auth_scope or None)


def _outside_roots(roots: Sequence[str]) -> bool:
    return any(root.startswith("/") or ".." in root.split("/") or "\\" in root for root in roots)


def search(
    ctx: UseCaseContext, caller: Caller, body: SearchIn, idempotency: IdempotencyKey | None = None
) -> Result:
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
    policy = rules_of(policy_state)
    request = SearchRequest(
        target_roots=list(task.target_roots),
        top_k=min(task.top_k, policy.max_top_k),
        filters=SearchFilters(
            sensitivity=list(task.filters.sensitivity), path_prefixes=list(task.filters.path_prefixes)
        ),
        corpus_position=position,
    )
    limit_s = body.deadline_ms / 1000 if body.deadline_ms else None
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
    return _record(ctx, caller, body, request, policy_state, run, started, idempotency)


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
    idempotency: IdempotencyKey | None,
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
        filters_applied=[FilterApplied(rule_id=r, chunk_id=c, action=a) for r, c, a in run.filters_applied],  # type: ignore[arg-type]
        context_hash=run.context_hash,
        status=run.status,
        withheld=run.withheld,
    )
    log.info(
        "search tenant=%s status=%s position=%d hits=%s",
        tenant,
        run.status,
        run.position,
        [
            {
                "path": h.path,
                "lines": [h.start_line, h.end_line],
                "snippet_sha256": hashlib.sha256(h.snippet.encode()).hexdigest()[:16],
                "snippet_chars": len(h.snippet),
            }
            for h in run.hits
        ],
    )

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
                "query": body.input.query,
                "target_roots": list(request.target_roots),
                "citations": _citations(run.hits, entries),
                "gaps": list(run.gaps),
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

    return record(ctx, caller, [payload], answer, idempotency)


def _citations(hits: Sequence[SearchHit], entries: Sequence[SelectedEntry]) -> list[dict[str, Any]]:
    """One citation per file (seed `004`: a file's snippets merged, not repeated), in the
    order of the ranking: best score first, ties by path. A citation's own fields are its best
    part's (score, then place in the file); `parts` lists every snippet of the file in reading
    order, each with its span, score and reason (one receipt entry, one `citation_id`, each)."""
    files: dict[str, list[dict[str, Any]]] = {}
    for hit, entry in zip(hits, entries, strict=True):
        files.setdefault(hit.path, []).append(_citation(hit, entry))
    out = []
    for parts in files.values():
        best = min(parts, key=lambda part: (-decimal.Decimal(part["score"]), part["locator"]["start_line"]))
        out.append({**best, "parts": parts})
    return out


def _citation(hit: SearchHit, entry: SelectedEntry) -> dict[str, Any]:
    return {
        "citation_id": entry.citation_id,
        "document_id": hit.document_id,
        "chunk_id": hit.chunk_id,
        "path": hit.path,
        "snippet": hit.snippet,
        "snippet_span": list(hit.snippet_span) if hit.snippet_span else None,
        "locator": {"start_line": hit.start_line, "end_line": hit.end_line, "heading_path": hit.heading_path},
        "score": hit.score,
        "reason": {
            "score_breakdown": [{"component": c, "value": v} for c, v in hit.score_breakdown],
            "terms": [{"term": t, "bm25": v} for t, v in hit.term_scores],
            "policy": [{"rule_id": r, "action": a} for r, a in hit.policy_rules],
        },
        "sensitivity": hit.sensitivity,
        "expires_at": entry.expires_at,
    }
