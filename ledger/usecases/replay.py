"""Use case: replay a receipt (`POST /v1/receipts/{id}/replay`, `citeledger replay`).

Replay re-runs a past retrieval under the receipt's frozen `policy_snapshot`,
from projected state only, and answers three questions at once:

- `as_of_original`: the snapshot policy on the corpus as of the receipt's own
  position. For a search the ledger ran (`citeledger-bm25@N`) this must
  reproduce the receipt's `context_hash`; a difference is `integrity: mismatch`
  (a finding, logged and recorded) unless text the corpus held then was erased or
  expired since: then `reproduced_apart_from_erased` when the rest of the receipt is
  reproduced, `unverifiable` where the erased text decided the outcome
  (`ledger.usecases.replay_verdict`).
- `data_drift`: the snapshot policy on the current corpus (the seed `003` replay).
- `policy_drift`: the live policy vs the snapshot policy, both on the current corpus.

"Current" is the log's size, or `at_position` when asked. Receipts of `external:`
engines cannot be re-run: each recorded entry gets a status instead
(`ledger.usecases.replay_entries`). The replay appends a signed receipt of its own
(`mode: as_of_replay`, `parent_receipt_id`) and a `ReplayRecorded` in one group
commit; when that write fails the diff still returns, with `replay_receipt_id: null`.
Replay never changes documents, citations or other receipts.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import Any

from ledger.domain.entries import RecordedEvent
from ledger.domain.events import (
    FilterApplied,
    PolicySnapshot,
    ReplayRecorded,
    RetrievalRecorded,
    Sealed,
    SearchRequest,
    SelectedEntry,
    TaskEnvelope,
)
from ledger.policy.policy_rules import PolicyRules
from ledger.retrieval.replay_diff import (
    Outcome,
    diff,
    filter_keys,
    outcome_of_receipt,
    summary,
    without_chunks,
)
from ledger.usecases.context import Caller, Pending, Result, UseCaseContext, commit, entry_facts
from ledger.usecases.errors import Unreplayable, UseCaseError
from ledger.usecases.ranking import ENGINES, SearchHit, SearchRun, rank
from ledger.usecases.replay_edits import edited_sections
from ledger.usecases.replay_entries import STATUSES, entry_reports
from ledger.usecases.replay_inputs import (
    ENGINE_UNAVAILABLE,
    INVALID_SNAPSHOT,
    Receipt,
    _live_policy,
    _load,
    _moment,
    _query,
    _target,
    snapshot_policy,
)
from ledger.usecases.replay_verdict import erased_shown, finding
from ledger.usecases.replay_verdict import integrity as verdict_of
from ledger.usecases.retrievals import entries_context_hash
from ledger.usecases.search import seal_hits
from ledger.usecases.visibility import restricted_chunk_ids, sees_restricted
from ledger.writing.idempotency import IdempotencyKeyReused

log = logging.getLogger("citeledger.replay")
BM25_PREFIX = "citeledger-bm25@"
REPLAY_RUN_DEADLINE_S = 10.0  # each of the three runs; a replay is an audit read, not a hot path


# --- ledger-run searches ---------------------------------------------------------------


def _hit_entry(hit: SearchHit) -> dict[str, Any]:
    return {
        "document_id": hit.document_id,
        "version_id": hit.version_id,
        "chunk_id": hit.chunk_id,
        "path": hit.path,
        "locator": {"start_line": hit.start_line, "end_line": hit.end_line},
        "score": hit.score,
        "snippet_span": list(hit.snippet_span) if hit.snippet_span else None,
    }


def _outcome(run: SearchRun) -> Outcome:
    return Outcome(
        context_hash=run.context_hash,
        entries=tuple(_hit_entry(hit) for hit in run.hits),
        filters=filter_keys(run.filters_applied),
    )


def _bm25(
    ctx: UseCaseContext, receipt: Receipt, rules: PolicyRules, query: str, at_position: int | None
) -> tuple[dict[str, Any], RetrievalRecorded, frozenset[str]]:
    tenant, payload = receipt.record.tenant_id, receipt.payload
    if not payload.get("search"):
        raise Unreplayable("the receipt does not record the search it ran", code=INVALID_SNAPSHOT)
    if ctx.search_index is None:
        raise Unreplayable(
            "this process runs no search index to re-run a citeledger-bm25 receipt", code=ENGINE_UNAVAILABLE
        )
    engine = str(payload["engine"])
    if engine not in ENGINES:
        raise Unreplayable(
            f"this ledger does not run engine {engine} (it runs {', '.join(ENGINES)})",
            code=ENGINE_UNAVAILABLE,
        )
    request = SearchRequest.model_validate(payload["search"])
    target, _ = _target(ctx, request.corpus_position, at_position)
    live_rules, live_hash = _live_policy(ctx, tenant, target)
    scopes = frozenset(payload["task"].get("auth_scope", []))
    now_request = request.model_copy(update={"corpus_position": target})
    # The rule the receipt was recorded under: receipts from before the built-in restricted
    # rule carry no `withheld` and are re-run without it, so they reproduce byte for byte.
    withhold = payload.get("withheld") is not None

    def run(at: SearchRequest, policy: PolicyRules) -> SearchRun:
        return rank(
            ctx,
            tenant,
            query,
            at,
            policy,
            scopes,
            REPLAY_RUN_DEADLINE_S,
            withhold_restricted=withhold,
            engine=engine,  # each receipt replays under the ranking and hash rule that made it
        )

    original_run = run(request, rules)
    data_run = run(now_request, rules)
    # The same rules on the same corpus give the same bytes: no third run when the live
    # policy is the snapshot's (the usual case).
    policy_run = data_run if live_rules == rules else run(now_request, live_rules)
    recorded = outcome_of_receipt(payload)
    data_outcome = _outcome(data_run)
    integrity, reason = verdict_of(ctx, tenant, receipt.record.receipt_id, payload, recorded, original_run)
    body = {
        "engine": payload["engine"],
        "integrity": integrity,
        "integrity_reason": reason,
        "corpus_position": request.corpus_position,
        "at_position": target,
        "live_policy_hash": live_hash,
        "diff": {
            "as_of_original": diff(recorded, _outcome(original_run)),
            "data_drift": diff(recorded, data_outcome),
            "policy_drift": diff(data_outcome, _outcome(policy_run)),
        },
    }
    entries, _ = seal_hits(ctx, tenant, data_run.hits)
    replay_receipt = _replay_receipt(
        receipt,
        entries=entries,
        filters=data_outcome.filters,
        context_hash=data_outcome.context_hash,
        status=data_run.status,
        search=now_request,
        withheld=data_run.withheld,
    )
    restricted = restricted_chunk_ids(payload["selected_entries"]).union(
        *(r.restricted_ids for r in (original_run, data_run, policy_run))
    )
    return body, replay_receipt, restricted


# --- external receipts ------------------------------------------------------------------
def _external(
    ctx: UseCaseContext, receipt: Receipt, rules: PolicyRules, at_position: int | None
) -> tuple[dict[str, Any], RetrievalRecorded, frozenset[str]]:
    tenant, payload = receipt.record.tenant_id, receipt.payload
    target, is_head = _target(ctx, receipt.record.position, at_position)
    entries: list[dict[str, Any]] = list(payload["selected_entries"])
    reports = entry_reports(
        ctx.lookups,
        ctx.sealer,
        tenant_id=tenant,
        entries=entries,
        position=target,
        rules=rules,
        scopes=frozenset(payload["task"].get("auth_scope", [])),
        moment=_moment(ctx, target, is_head),
        keys_now=is_head,
    )
    # The replay receipt cites what still stands exactly as recorded: the same sealed
    # snapshot (shredding its keys still erases it), under a new citation id.
    kept = [
        SelectedEntry.model_validate({**entry, "citation_id": uuid.uuid4().hex})
        for entry, report in zip(entries, reports, strict=True)
        if report.status == "unchanged"
    ]
    filters = [
        *filter_keys(payload.get("filters_applied", [])),
        *(
            (report.rule_id, str(entry["chunk_id"]), "deny")
            for entry, report in zip(entries, reports, strict=True)
            if report.status == "filtered_by_snapshot_policy" and report.rule_id
        ),
    ]
    context_hash = entries_context_hash(kept)
    replay_receipt = _replay_receipt(
        receipt,
        entries=kept,
        filters=tuple(dict.fromkeys(filters)),
        context_hash=context_hash,
        status="ok" if kept else "no_hit",
        search=None,
    )
    replay_outcome = outcome_of_receipt(replay_receipt.model_dump(mode="json"))
    counts = dict.fromkeys(STATUSES, 0)
    for report in reports:
        counts[report.status] += 1
    body = {
        "engine": payload["engine"],
        "integrity": "not_applicable",  # a foreign engine cannot be re-run
        "integrity_reason": None,
        "at_position": target,
        "entries": [
            report.view(entry, rank)
            for rank, (entry, report) in enumerate(zip(entries, reports, strict=True), start=1)
        ],
        "entry_counts": counts,
        "diff": {"data_drift": diff(outcome_of_receipt(payload), replay_outcome)},
    }
    # An entry is hidden when the chunk it cited or the version it is in now is restricted.
    moved = [
        {"chunk_id": entry["chunk_id"], "sensitivity": report.current_sensitivity}
        for entry, report in zip(entries, reports, strict=True)
        if report.current_sensitivity is not None
    ]
    return body, replay_receipt, restricted_chunk_ids([*entries, *moved])


# --- the use case ----------------------------------------------------------------------
def _replay_receipt(
    receipt: Receipt,
    *,
    entries: list[SelectedEntry],
    filters: Sequence[tuple[str, str, str]],
    context_hash: str,
    status: str,
    search: SearchRequest | None,
    withheld: int | None = None,
) -> RetrievalRecorded:
    payload = receipt.payload
    return RetrievalRecorded(
        receipt_id=uuid.uuid4().hex,
        # The original sealed query, byte for byte: erasing its key erases both receipts' query.
        query=Sealed.model_validate(payload["query"]),
        subject_id=payload.get("subject_id"),
        task=TaskEnvelope.model_validate(payload["task"]),
        engine=payload["engine"],
        mode="as_of_replay",
        parent_receipt_id=receipt.record.receipt_id,
        policy_snapshot=PolicySnapshot.model_validate(payload["policy_snapshot"]),
        search=search,
        selected_entries=entries,
        filters_applied=[FilterApplied(rule_id=r, chunk_id=c, action=a) for r, c, a in filters],  # type: ignore[arg-type]
        context_hash=context_hash,
        status=status,  # type: ignore[arg-type]
        withheld=withheld,
    )


def _shown(body: dict[str, Any], hidden: frozenset[str]) -> dict[str, Any]:
    """The answer as a caller who may not see the `hidden` (restricted) chunks gets it:
    their entries, filters and paths left out of every diff and entry list."""
    if not hidden:
        return body
    shown = {
        **body,
        "diff": {run: without_chunks(envelope, hidden) for run, envelope in body["diff"].items()},
    }
    if "entries" in body:
        entries = [e for e in body["entries"] if e["chunk_id"] not in hidden]
        counts = dict.fromkeys(STATUSES, 0)
        for entry in entries:
            counts[entry["status"]] += 1
        shown["entries"], shown["entry_counts"] = entries, counts
    return shown


def _add_edits(
    ctx: UseCaseContext,
    caller: Caller,
    receipt: Receipt,
    replay_receipt: RetrievalRecorded,
    base: dict[str, Any],
) -> None:
    """Data drift's edited sections (`ledger.usecases.replay_edits`), from what the caller
    is shown: a section edited since the receipt as its changed lines."""
    envelope = base["diff"]["data_drift"]
    redacted = {
        str(e["chunk_id"]) for e in receipt.payload["selected_entries"] if e.get("snippet_span") is None
    } | {e.chunk_id for e in replay_receipt.selected_entries if e.snippet_span is None}
    envelope["selected_entries"]["edited"] = edited_sections(
        ctx, caller.tenant_id, caller.scopes, envelope, int(base["at_position"]), redacted
    )


def replay(ctx: UseCaseContext, caller: Caller, receipt_id: str, at_position: int | None = None) -> Result:
    tenant = caller.tenant_id
    receipt = _load(ctx, tenant, receipt_id)
    rules = snapshot_policy(receipt)
    query = _query(ctx, receipt)
    ctx.lookups.refresh()  # "current" means every entry committed before this call
    if receipt.record.engine.startswith(BM25_PREFIX):
        body, replay_receipt, restricted = _bm25(ctx, receipt, rules, query, at_position)
    else:
        body, replay_receipt, restricted = _external(ctx, receipt, rules, at_position)
    # The ledger records the whole diff; the caller sees what its own scopes may see.
    hidden = frozenset() if sees_restricted(caller.scopes) else restricted
    base = {"original_receipt_id": receipt_id, **_shown(erased_shown(ctx, caller, body), hidden)}
    _add_edits(ctx, caller, receipt, replay_receipt, base)
    envelope = body["diff"]["data_drift"]
    # Recorded on the ledger too, so an auditor reading the log tells "reproduced" from
    # "could not be checked" (and why) without the response that was returned then.
    link = ReplayRecorded(
        original_receipt_id=receipt_id,
        replay_receipt_id=replay_receipt.receipt_id,
        summary=summary(envelope),
        integrity_finding=finding(body),
    )

    def answer(events: Sequence[RecordedEvent]) -> dict[str, Any]:
        return {
            **base,
            "replay_receipt_id": replay_receipt.receipt_id,
            "replay_receipt": entry_facts(events[0]),
        }

    try:
        # The question is in hand: its word hashes go to the question index (`Pending`).
        hashes = ctx.ledger.word_hasher.hand_over(tenant, query, replay_receipt.query.nonce)
        return commit(ctx, Pending(caller, [replay_receipt, link], answer, caller.idempotency, hashes))
    except (IdempotencyKeyReused, UseCaseError):
        raise
    except Exception as exc:  # noqa: BLE001 - fail-open: the audit write must not hide the answer
        # The type only: a store error's text may quote the rows it failed to write.
        log.error(
            "replay receipt write failed: tenant=%s receipt=%s (%s)", tenant, receipt_id, type(exc).__name__
        )
        return Result(
            {**base, "replay_receipt_id": None, "replay_receipt": None, "dedup": False}, created=False
        )
