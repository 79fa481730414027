"""Engine versions on replay: a `citeledger-bm25@2` context hash covers the context the
model was given (which chunks, in which order, with which text), not scores; `@1`
receipts, whose hash covered scores, keep replaying under `@1`'s rule byte for byte."""

from __future__ import annotations

import pytest

from bootstrap import ledger_context
from ledger.domain.events import SearchRequest
from ledger.policy.policy_rules import NO_POLICY
from ledger.schemas.requests import PolicyBundleIn
from ledger.usecases.context import Caller, UseCaseContext, record
from ledger.usecases.errors import Unreplayable
from ledger.usecases.policy import publish_policy
from ledger.usecases.ranking import ENGINE, ENGINE_V1, ENGINE_V2, ENGINE_V3, ENGINE_V4, SearchRun, rank
from ledger.usecases.replay import replay
from ledger.usecases.search_run import ENGINE_V5, ENGINE_V6, ENGINE_V7, ENGINE_V8, ENGINE_V9, ENGINE_V10
from ledger.writing.application import Ledger
from tests.factories import search_receipt
from tests.test_search import _ingest, _search

CALLER = Caller("acme", "svc-replay", frozenset({"retrieval.write", "replay.run"}))
QUERY = "salary bands"


def _corpus(ctx: UseCaseContext) -> dict[str, str]:
    files = {
        "handbook/salary.md": "# Salary\n\nSalary bands are published every January.\n",
        "hr/salaries.md": "# Salaries\n\nSalary bands for engineers are reviewed yearly.\n",
        "finance/payroll.md": "# Payroll\n\nPayroll runs monthly; salary bands set the ranges.\n",
    }
    return {path: _ingest(ctx, CALLER, path, text)["document_id"] for path, text in files.items()}


def _unrelated_edit(ctx: UseCaseContext) -> None:
    """A file that shares no word with the query: only corpus-wide statistics move."""
    _ingest(ctx, CALLER, "ops/kitchen.md", "# Kitchen\n\nThe kitchen is cleaned on Fridays.\n" * 3)


def _edit_salary_section(ctx: UseCaseContext, ids: dict[str, str]) -> None:
    """A new version of the cited handbook file: its one section gains "and July"."""
    text = "# Salary\n\nSalary bands are published every January and July.\n"
    _ingest(ctx, CALLER, "handbook/salary.md", text, document_id=ids["handbook/salary.md"])


def _record(ctx: UseCaseContext, run: SearchRun, request: SearchRequest, engine: str) -> str:
    """A receipt as the search use case records one, made by `engine`'s ranking."""
    receipt = search_receipt(ctx, CALLER, QUERY, run, request, engine, withheld=run.withheld)
    record(ctx, CALLER, [receipt], lambda events: {})
    return receipt.receipt_id


def test_an_unrelated_edit_leaves_the_context_hash_and_reports_scores_apart(ledger: Ledger) -> None:
    ctx = ledger_context(ledger)
    _corpus(ctx)
    searched = _search(ctx, CALLER, QUERY)
    assert searched["status"] == "ok" and len(searched["output"]["citations"]) == 3
    _unrelated_edit(ctx)
    body = replay(ctx, CALLER, searched["receipt_id"]).body
    assert body["engine"] == ENGINE == ENGINE_V10 and body["integrity"] == "ok"
    drift = body["diff"]["data_drift"]
    assert drift["context_hash"]["changed"] is False
    assert drift["changes"] == {"membership": False, "order": False, "text": False, "scores": True}
    common = drift["selected_entries"]["common_entries"]
    assert len(common) == 3 and not any(e["moved"] for e in common)
    # Every score moved with N and avgdl: each listed once, old and new.
    assert {e["chunk_id"] for e in drift["score_changes"]} == {e["chunk_id"] for e in common}
    assert all(e["old_score"] != e["new_score"] for e in drift["score_changes"])


def test_an_edited_cited_section_is_a_text_change(ledger: Ledger) -> None:
    ctx = ledger_context(ledger)
    ids = _corpus(ctx)
    searched = _search(ctx, CALLER, QUERY)
    _edit_salary_section(ctx, ids)
    drift = replay(ctx, CALLER, searched["receipt_id"]).body["diff"]["data_drift"]
    assert drift["context_hash"]["changed"] is True
    assert drift["changes"]["text"] is True and drift["changes"]["membership"] is True
    [removed] = drift["selected_entries"]["removed"]
    [added] = drift["selected_entries"]["added"]
    assert removed["path"] == "handbook/salary.md"
    # The edited section as its changed lines, not only two chunk ids.
    [edited] = drift["selected_entries"]["edited"]
    assert (edited["old_chunk_id"], edited["new_chunk_id"]) == (removed["chunk_id"], added["chunk_id"])
    assert edited["diff_withheld"] is None
    assert "-Salary bands are published every January." in edited["diff"]
    assert "+Salary bands are published every January and July." in edited["diff"]
    assert edited["diff"][:2] == ["--- recorded", "+++ now"]


def test_an_edited_section_a_policy_redacts_is_not_shown(ledger: Ledger) -> None:
    ctx = ledger_context(ledger)
    ids = _corpus(ctx)
    bundle = (
        "version: r1\nrules:\n  - id: hb-redacted\n    action: redact\n    match: {paths: ['handbook/**']}\n"
    )
    publish_policy(ctx, CALLER, PolicyBundleIn(bundle_yaml=bundle))
    searched = _search(ctx, CALLER, QUERY)
    _edit_salary_section(ctx, ids)
    body = replay(ctx, CALLER, searched["receipt_id"]).body
    [edited] = body["diff"]["data_drift"]["selected_entries"]["edited"]
    assert (edited["diff"], edited["diff_withheld"]) == (None, "redacted")
    assert "July" not in str(body) and "January" not in str(body)


def _replayed_under_its_engine(
    ledger: Ledger, engine: str
) -> tuple[UseCaseContext, SearchRun, SearchRun, str]:
    """A receipt ranked and recorded under `engine` (not the live one), replayed: the replay
    runs `engine` and reproduces the receipt's context hash. (ctx, old run, live run, id)"""
    ctx = ledger_context(ledger)
    _corpus(ctx)
    assert ctx.search_index is not None
    request = SearchRequest(top_k=5, corpus_position=ctx.search_index.refresh())
    old = rank(ctx, "acme", QUERY, request, NO_POLICY, CALLER.scopes, None, engine=engine)
    new = rank(ctx, "acme", QUERY, request, NO_POLICY, CALLER.scopes, None)
    assert old.context_hash != new.context_hash  # the two rules commit to different things
    receipt_id = _record(ctx, old, request, engine)
    body = replay(ctx, CALLER, receipt_id).body
    assert body["engine"] == engine and body["integrity"] == "ok"
    assert body["diff"]["as_of_original"]["context_hash"] == {
        "original": old.context_hash,
        "replay": old.context_hash,
        "changed": False,
    }
    event = ledger.get(body["replay_receipt"]["position"])
    assert event is not None and event.payload["engine"] == engine
    return ctx, old, new, receipt_id


def test_an_at1_receipt_made_by_the_old_rule_still_replays_ok(ledger: Ledger) -> None:
    ctx, _, _, receipt_id = _replayed_under_its_engine(ledger, ENGINE_V1)
    # `@1`'s hash covers scores: an unrelated edit still changes it, as it always did.
    _unrelated_edit(ctx)
    again = replay(ctx, CALLER, receipt_id).body
    assert again["integrity"] == "ok"
    assert again["diff"]["data_drift"]["context_hash"]["changed"] is True
    assert again["diff"]["data_drift"]["changes"]["membership"] is False


def test_an_at2_receipt_replays_under_at2_after_at3_became_the_default(ledger: Ledger) -> None:
    """`@10` is what a live search runs now; a receipt of `@2` is re-run by `@2`'s ranking
    (its no-hit rule, its file weight, its page) and reproduces its context hash."""
    _, old, new, _ = _replayed_under_its_engine(ledger, ENGINE_V2)
    assert old.status == "ok" and ENGINE == ENGINE_V10
    # @4 weighs the whole file otherwise: the same files score differently.
    assert [dict(h.score_breakdown)["file_bm25"] for h in old.hits] != [
        dict(h.score_breakdown)["file_bm25"] for h in new.hits
    ]


def test_an_at3_receipt_replays_under_at3_after_at4_became_the_default(ledger: Ledger) -> None:
    """A receipt of `@3` is re-run by `@3`'s ranking (its unscaled whole-file weight, its
    no-hit rule) and reproduces its context hash, though `@10` now ranks live searches."""
    _, old, new, _ = _replayed_under_its_engine(ledger, ENGINE_V3)
    assert old.status == "ok" and ENGINE == ENGINE_V10
    assert [dict(h.score_breakdown)["file_bm25"] for h in old.hits] != [
        dict(h.score_breakdown)["file_bm25"] for h in new.hits
    ]


def test_an_engine_this_ledger_does_not_run_is_refused(ledger: Ledger) -> None:
    ctx = ledger_context(ledger)
    _corpus(ctx)
    assert ctx.search_index is not None
    request = SearchRequest(top_k=5, corpus_position=ctx.search_index.refresh())
    run = rank(ctx, "acme", QUERY, request, NO_POLICY, CALLER.scopes, None)
    receipt_id = _record(ctx, run, request, "citeledger-bm25@11")
    with pytest.raises(Unreplayable) as refused:
        replay(ctx, CALLER, receipt_id)
    assert refused.value.code == "unreplayable.engine_unavailable"
    with pytest.raises(ValueError, match="unknown engine"):
        rank(ctx, "acme", QUERY, request, NO_POLICY, CALLER.scopes, None, engine="citeledger-bm25@11")


def test_an_edited_restricted_section_shows_its_lines_only_with_the_scope(ledger: Ledger) -> None:
    ctx = ledger_context(ledger)
    scoped = Caller(
        "acme", "svc-audit", frozenset({"retrieval.write", "replay.run", "knowledge.restricted.read"})
    )
    path = "security/salary-bands.md"
    doc = _ingest(
        ctx,
        scoped,
        path,
        "# Salary bands\n\nSalary bands for executives: 40 to 60.\n",
        sensitivity="restricted",
    )
    searched = _search(ctx, scoped, QUERY)
    assert [c["path"] for c in searched["output"]["citations"]] == [path]
    _ingest(
        ctx,
        scoped,
        path,
        "# Salary bands\n\nSalary bands for executives: 45 to 70.\n",
        sensitivity="restricted",
        document_id=doc["document_id"],
    )
    shown = replay(ctx, scoped, searched["receipt_id"]).body
    [edited] = shown["diff"]["data_drift"]["selected_entries"]["edited"]
    assert "+Salary bands for executives: 45 to 70." in edited["diff"]
    # Without the scope: neither entry, nor the edit, nor any of its text.
    hidden = replay(ctx, CALLER, searched["receipt_id"]).body
    drift = hidden["diff"]["data_drift"]["selected_entries"]
    assert drift["edited"] == [] and drift["added"] == [] and drift["removed"] == []
    assert "executives" not in str(hidden) and path not in str(hidden)


def test_an_at4_receipt_replays_under_at4_after_at5_became_the_default(ledger: Ledger) -> None:
    """A receipt of `@4` is re-run by `@4` (its no-hit rule without the irregular verb
    forms) and reproduces its context hash, though `@10` now ranks live searches. The two
    rank this question alike: the hashes differ by the engine they name only."""
    _, old, new, _ = _replayed_under_its_engine(ledger, ENGINE_V4)
    assert old.status == "ok" and ENGINE == ENGINE_V10
    # Same chunks in the same order (`@7` and `@8` scale the heading boosts, so scores differ).
    assert [h.chunk_id for h in old.hits] == [h.chunk_id for h in new.hits]


def test_an_at5_receipt_replays_under_at5_after_at6_became_the_default(ledger: Ledger) -> None:
    """A receipt of `@5` is re-run by `@5` (its no-hit rule on unsaturated idfs) and
    reproduces its context hash, though `@10` now ranks live searches. The two rank this
    question alike: the hashes differ by the engine they name only."""
    _, old, new, _ = _replayed_under_its_engine(ledger, ENGINE_V5)
    assert old.status == "ok" and ENGINE == ENGINE_V10
    # Same chunks in the same order (`@7` and `@8` scale the heading boosts, so scores differ).
    assert [h.chunk_id for h in old.hits] == [h.chunk_id for h in new.hits]


def test_an_at6_receipt_replays_under_at6_after_at7_became_the_default(ledger: Ledger) -> None:
    """A receipt of `@6` is re-run by `@6` (its unscaled field boosts) and reproduces its
    context hash, though `@10` now ranks live searches. The two cite this question's files in
    the same order; the scores differ where a file name or heading holds a question word."""
    _, old, new, _ = _replayed_under_its_engine(ledger, ENGINE_V6)
    assert old.status == "ok" and ENGINE == ENGINE_V10
    assert [h.chunk_id for h in old.hits] == [h.chunk_id for h in new.hits]
    assert [h.score for h in old.hits] != [h.score for h in new.hits]


def test_an_at7_receipt_replays_under_at7_after_at8_became_the_default(ledger: Ledger) -> None:
    """A receipt of `@7` is re-run by `@7` (its no-hit rule without the words-together
    evidence) and reproduces its context hash, though `@10` now ranks live searches. The two
    rank and score this question alike: the hashes differ by the engine they name only."""
    _, old, new, _ = _replayed_under_its_engine(ledger, ENGINE_V7)
    assert old.status == "ok" and ENGINE == ENGINE_V10
    assert [(h.chunk_id, h.score) for h in old.hits] == [(h.chunk_id, h.score) for h in new.hits]


def test_an_at8_receipt_replays_under_at8_after_at9_became_the_default(ledger: Ledger) -> None:
    """A receipt of `@8` is re-run by `@8` (change logs at their full weight) and reproduces its
    context hash, though `@10` now ranks live searches. No change log is among these files: the
    two rank and score this question alike, the hashes differ by the engine they name only."""
    _, old, new, _ = _replayed_under_its_engine(ledger, ENGINE_V8)
    assert old.status == "ok" and ENGINE == ENGINE_V10
    assert [(h.chunk_id, h.score) for h in old.hits] == [(h.chunk_id, h.score) for h in new.hits]


def test_an_at9_receipt_replays_under_at9_after_at10_became_the_default(ledger: Ledger) -> None:
    """A receipt of `@9` is re-run by `@9` (`@8`'s proximity rule) and reproduces its context
    hash, though `@10` now ranks live searches. The two rank and score this question alike."""
    _, old, new, _ = _replayed_under_its_engine(ledger, ENGINE_V9)
    assert old.status == "ok" and ENGINE == ENGINE_V10
    assert [(h.chunk_id, h.score) for h in old.hits] == [(h.chunk_id, h.score) for h in new.hits]
