"""`citeledger-bm25@10` (issue 32, round 13): `@9` whose no-hit rule takes the first-ranked file
when it holds half of the bar and two or more of the question's known words, wherever they
stand. `@8`'s corpus (`test_search_v8`): its file whose two words stand thirty terms apart
answers under `@10`; one known word is not enough; pages are `@9`'s."""

from __future__ import annotations

import pytest

from bootstrap import ledger_context
from ledger.domain.events import SearchRequest
from ledger.policy.policy_rules import NO_POLICY
from ledger.usecases import ranking_v8, ranking_v10
from ledger.usecases.context import Caller, UseCaseContext
from ledger.usecases.ranking import ENGINE, rank
from ledger.usecases.replay import replay
from ledger.usecases.search_run import ENGINE_V9, ENGINE_V10
from ledger.writing.application import Ledger
from tests.test_search import _ingest, _search, corpus_context
from tests.test_search_v5 import _run  # a page of 10
from tests.test_search_v8 import FILES, SCATTERED

ONE_WORD = "kafka broker lag before a retry"  # one known word of four
CALLER = Caller("acme", "svc-search", frozenset({"retrieval.write", "replay.run"}))
pytestmark = pytest.mark.parametrize("backend", ["sqlite"])  # the index's view, alike on both stores


@pytest.fixture
def ctx(ledger: Ledger) -> UseCaseContext:
    return corpus_context(ledger, FILES)


def test_a_near_file_with_two_known_words_answers_wherever_they_stand(
    ctx: UseCaseContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert ENGINE == ENGINE_V10
    assert _run(ctx, SCATTERED, ENGINE_V9).status == "no_hit"  # 30 terms apart: not together
    at10 = _run(ctx, SCATTERED, ENGINE_V10)
    assert at10.status == "ok" and at10.hits[0].path == "ops/queue.md"
    # The page is `@9`'s: with `@8`'s window as wide as the file, `@9` shows the same one.
    monkeypatch.setattr(ranking_v8, "PROXIMITY_WINDOW", 100)
    at9 = _run(ctx, SCATTERED, ENGINE_V9)
    assert [(h.chunk_id, h.score) for h in at9.hits] == [(h.chunk_id, h.score) for h in at10.hits]


def test_a_near_file_needs_two_known_words_and_half_the_bar(
    ctx: UseCaseContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _run(ctx, ONE_WORD, ENGINE_V10).status == "no_hit"
    monkeypatch.setattr(ranking_v10, "MIN_WORDS", 3)
    assert _run(ctx, SCATTERED, ENGINE_V10).status == "no_hit"
    monkeypatch.setattr(ranking_v10, "MIN_WORDS", 2)
    monkeypatch.setattr(ranking_v10, "NEAR_SHARE", 0.9)  # 80% of the bar is then not near
    assert _run(ctx, SCATTERED, ENGINE_V10).status == "no_hit"


def test_a_live_at10_receipt_replays_with_the_same_context(ledger: Ledger) -> None:
    ctx = corpus_context(ledger, FILES)
    searched = _search(ctx, CALLER, SCATTERED, top_k=3)
    assert searched["status"] == "ok"
    body = replay(ctx, CALLER, searched["receipt_id"]).body
    assert body["engine"] == ENGINE_V10 and body["integrity"] == "ok"
    assert body["diff"]["data_drift"]["context_hash"]["changed"] is False


def test_a_restricted_near_file_is_not_named_when_it_does_not_answer(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`@10`'s refusal carries the usual gaps (the question's unknown words), never the near
    file: the gaps outlive the caller's scope (a replay shows them)."""
    scoped = Caller("acme", "svc-audit", frozenset({"retrieval.write", "knowledge.restricted.read"}))
    ctx = ledger_context(ledger)
    for path, text in FILES.items():
        _ingest(ctx, scoped, path, text, sensitivity="restricted" if path == "ops/queue.md" else "internal")
    assert ctx.search_index is not None
    request = SearchRequest(top_k=10, corpus_position=ctx.search_index.refresh())
    monkeypatch.setattr(ranking_v10, "MIN_WORDS", 3)  # the near file then does not answer
    run = rank(ctx, "acme", SCATTERED, request, NO_POLICY, scoped.scopes, None, engine=ENGINE_V10)
    assert run.status == "no_hit" and run.gaps
    assert "queue" not in str(run.gaps)
