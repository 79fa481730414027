"""A ledger-run receipt's replay verdict (`integrity`): what the as-of run shows about it.

The vocabulary (the answer model `ReplayOut.integrity`, README "Replay"):

- `ok`: the as-of run reproduced the receipt's context hash and every recorded score.
- `reproduced_apart_from_erased`: text live at the receipt was erased or expired since, and
  with those documents left out the run selects the receipt's other entries (same chunks,
  versions and snippet spans, in the same order) with its status and its other filters. The
  erased documents are named by path with the scrub's position, time and basis. Scores may
  move: the corpus-wide statistics counted the erased text.
- `unverifiable`: the erased text decided the outcome (everything cited was erased, or the
  rest is not reproduced), or the original search or this run passed its deadline.
- `mismatch`: nothing erased explains a difference: a real finding, logged with ids only.
- `not_applicable`: an `external:` engine's receipt (the ledger cannot re-run it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ledger.retrieval.replay_diff import Outcome
from ledger.usecases.context import Caller, UseCaseContext
from ledger.usecases.ports import ScrubbedDocument
from ledger.usecases.ranking import SearchRun
from ledger.usecases.visibility import may_see, sees_restricted

log = logging.getLogger("citeledger.replay")
VERDICTS = ("ok", "reproduced_apart_from_erased", "unverifiable", "mismatch", "not_applicable")
MAX_UNVERIFIABLE_IDS = 100  # erased documents named in an answer


def _key(entry: Mapping[str, Any]) -> tuple[str, str | None, tuple[int, ...] | None]:
    """What must match for an entry to be the same context: the chunk, its version, the span
    (recorded as `{start, end}`, a run's hit holds a pair)."""
    span = entry.get("snippet_span")
    if isinstance(span, Mapping):
        span = (span["start"], span["end"])
    return str(entry["chunk_id"]), entry.get("version_id"), None if span is None else tuple(span)


def _rest_reproduced(
    recorded: Outcome, status: str, run: SearchRun, erased_ids: frozenset[str], erased_chunks: frozenset[str]
) -> bool:
    """True when, erased documents left out, the run repeats the receipt: its remaining
    entries first and in order (slots an erased entry held may be filled by the next ones),
    the same status, and every recorded filter on a chunk that was not erased."""
    rest = [_key(e) for e in recorded.entries if str(e["document_id"]) not in erased_ids]
    dropped = len(recorded.entries) - len(rest)
    if dropped and not rest:
        return False  # everything cited was erased: the erased text was the whole outcome
    hits = [
        _key({"chunk_id": h.chunk_id, "version_id": h.version_id, "snippet_span": h.snippet_span})
        for h in run.hits
        if h.document_id not in erased_ids
    ]
    if hits[: len(rest)] != rest or (len(hits) > len(rest) and not dropped):
        return False
    if run.status != status:
        return False
    kept_filters = {f for f in recorded.filters if f[1] not in erased_chunks}
    return kept_filters <= {f for f in run.filters_applied if f[1] not in erased_chunks}


def _erased_view(scrub: ScrubbedDocument) -> dict[str, Any]:
    return {
        "document_id": scrub.document_id,
        "path": scrub.path,
        "erased_at": scrub.recorded_at or None,
        "erased_position": scrub.position,
        "basis": scrub.reason,
    }


def integrity(
    ctx: UseCaseContext,
    tenant: str,
    receipt_id: str,
    payload: Mapping[str, Any],
    recorded: Outcome,
    original_run: SearchRun,
) -> tuple[str, dict[str, Any] | None]:
    """The verdict and its reason (see the module's vocabulary)."""
    recorded_scores = [str(entry["score"]) for entry in recorded.entries]
    same_scores = recorded_scores == [hit.score for hit in original_run.hits]
    if original_run.context_hash == recorded.context_hash and same_scores:
        return "ok", None
    if payload["status"] == "timeout":  # the search was cut short: nothing to reproduce
        return "unverifiable", {"cause": "original_timeout", "document_ids": []}
    if original_run.status == "timeout":
        return "unverifiable", {"cause": "timeout", "document_ids": []}
    position = int(payload["search"]["corpus_position"])
    scrubs = ctx.lookups.documents_scrubbed_after(tenant, position, MAX_UNVERIFIABLE_IDS)
    if scrubs:
        erased_ids = frozenset(s.document_id for s in scrubs)
        erased_chunks = frozenset(
            v.chunk_id for s in scrubs for v in ctx.lookups.document_chunks(tenant, s.document_id, position)
        )
        reason = {
            "cause": "erased_after_receipt",
            "document_ids": [s.document_id for s in scrubs],
            "erased": [_erased_view(s) for s in scrubs],
        }
        if _rest_reproduced(recorded, str(payload["status"]), original_run, erased_ids, erased_chunks):
            return "reproduced_apart_from_erased", reason
        return "unverifiable", reason
    log.warning("replay integrity mismatch: tenant=%s receipt=%s", tenant, receipt_id)
    return "mismatch", None


def finding(body: Mapping[str, Any]) -> str | None:
    """What the `ReplayRecorded` entry records, so the log alone tells the verdicts apart."""
    verdict = body["integrity"]
    if verdict == "mismatch":
        return "context_hash_mismatch"
    if verdict == "unverifiable":
        return f"unverifiable.{(body.get('integrity_reason') or {}).get('cause', 'unknown')}"
    if verdict == "reproduced_apart_from_erased":
        return "reproduced_apart_from_erased"
    return None


def erased_shown(ctx: UseCaseContext, caller: Caller, body: dict[str, Any]) -> dict[str, Any]:
    """`integrity_reason` without the erased documents that were restricted, for a caller
    without the scope (their paths and ids are not theirs to see)."""
    reason = body.get("integrity_reason") or {}
    if not reason.get("document_ids") or sees_restricted(caller.scopes):
        return body
    position = int(body["corpus_position"])

    def restricted(document_id: str) -> bool:
        versions = ctx.lookups.document_chunks(caller.tenant_id, document_id, position)
        return any(not may_see(caller.scopes, v.sensitivity) for v in versions)

    hidden = {d for d in reason["document_ids"] if restricted(d)}
    shown: dict[str, Any] = {**reason, "document_ids": [d for d in reason["document_ids"] if d not in hidden]}
    if "erased" in reason:
        shown["erased"] = [e for e in reason["erased"] if e["document_id"] not in hidden]
    return {**body, "integrity_reason": shown}


__all__: Sequence[str] = ["MAX_UNVERIFIABLE_IDS", "VERDICTS", "erased_shown", "finding", "integrity"]
