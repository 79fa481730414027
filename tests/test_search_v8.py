"""`citeledger-bm25@8` (issue 32, round 10): `@7` whose no-hit rule also answers with the
first-ranked file when it holds at least `NEAR_SHARE` of the bar and one of its passages holds
the question's words it knows within `PROXIMITY_WINDOW` search terms. Two questions of the
same shape (two known words, three the corpus never uses): the file that holds its two words
together answers under `@8`; the file that holds them far apart stays `no_hit`, and says so."""

from __future__ import annotations

import pytest

from bootstrap import ledger_context
from ledger.domain.events import SearchRequest
from ledger.policy.policy_rules import NO_POLICY
from ledger.usecases import ranking_v8
from ledger.usecases.context import Caller, UseCaseContext
from ledger.usecases.ranking import ENGINE, rank
from ledger.usecases.search_run import ENGINE_V7, ENGINE_V8, ENGINE_V9, ENGINE_V10
from ledger.writing.application import Ledger
from tests.test_search import _ingest, corpus_context
from tests.test_search_v5 import _run  # a page of 10

FILLER = " ".join(f"w{i}" for i in range(30))
FILES = {
    # Its two known words a phrase apart.
    "ci/prompts.md": "# Sessions\n\nA session waits on an interactive prompt when stdin is a terminal.\n",
    # Its two known words thirty terms apart.
    "ops/queue.md": f"# Jobs\n\nThe scheduler starts the workers. {FILLER}. A failed job may retry.\n",
    **{
        f"notes/day-{d}.md": f"# Day {d}\n\nThe services ran and the logs were read on day {d}.\n"
        for d in range(9)
    },
}
TOGETHER = "jenkins gitlab hangs on an interactive prompt"
SCATTERED = "kafka broker lag for the scheduler retry"
# The gate reads the search index's view, the same for both stores (`test_search` runs both).
pytestmark = pytest.mark.parametrize("backend", ["sqlite"])


@pytest.fixture
def ctx(ledger: Ledger) -> UseCaseContext:
    return corpus_context(ledger, FILES)


def test_words_that_stand_together_answer_under_at8_only(ctx: UseCaseContext) -> None:
    assert ENGINE == ENGINE_V10  # `@9` keeps `@8`'s no-hit rule; `@10` widens it
    assert _run(ctx, TOGETHER, ENGINE_V7).status == "no_hit"  # 2 of 5 words: below half
    run = _run(ctx, TOGETHER, ENGINE_V8)
    assert run.status == "ok" and [h.path for h in run.hits] == ["ci/prompts.md"]
    assert [h.path for h in _run(ctx, TOGETHER, ENGINE_V9).hits] == ["ci/prompts.md"]


def test_the_same_words_far_apart_stay_no_hit_and_the_gaps_say_why(
    ctx: UseCaseContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    at7, at8 = _run(ctx, SCATTERED, ENGINE_V7), _run(ctx, SCATTERED, ENGINE_V8)
    assert at7.status == at8.status == "no_hit" and not at8.hits
    assert at8.gaps[0] == (
        "ops/queue.md holds 80% of what the question needs, "
        f"but no passage holds its words within {ranking_v8.PROXIMITY_WINDOW} words of each other"
    )
    # The distance is what decides: with a window as wide as the file, it answers.
    monkeypatch.setattr(ranking_v8, "PROXIMITY_WINDOW", 100)
    assert [h.path for h in _run(ctx, SCATTERED, ENGINE_V8).hits] == ["ops/queue.md"]


def test_at8_shows_at7s_page_when_at7_answers(ctx: UseCaseContext) -> None:
    for query in ("interactive prompt", "scheduler workers"):
        at7, at8 = _run(ctx, query, ENGINE_V7), _run(ctx, query, ENGINE_V8)
        assert at7.status == at8.status == "ok", query
        assert [(h.chunk_id, h.score) for h in at7.hits] == [(h.chunk_id, h.score) for h in at8.hits]


def test_a_near_file_needs_its_share_too(ctx: UseCaseContext, monkeypatch: pytest.MonkeyPatch) -> None:
    # Chosen on the tuning sets from the plateau 0.5-0.7 (docs/benchmarks/search.md, round 10).
    assert 0.5 <= ranking_v8.NEAR_SHARE <= 0.7
    monkeypatch.setattr(ranking_v8, "NEAR_SHARE", 0.9)  # 80% of the bar is then not near
    assert _run(ctx, TOGETHER, ENGINE_V8).status == "no_hit"


def test_a_restricted_near_file_is_not_named_in_the_gaps(ledger: Ledger) -> None:
    scoped = Caller("acme", "svc-audit", frozenset({"retrieval.write", "knowledge.restricted.read"}))
    ctx = ledger_context(ledger)
    for path, text in FILES.items():
        _ingest(ctx, scoped, path, text, sensitivity="restricted" if path == "ops/queue.md" else "internal")
    assert ctx.search_index is not None
    request = SearchRequest(top_k=10, corpus_position=ctx.search_index.refresh())
    run = rank(ctx, "acme", SCATTERED, request, NO_POLICY, scoped.scopes, None, engine=ENGINE_V8)
    assert run.status == "no_hit" and run.gaps[0].startswith("the first-ranked file holds 80% ")
    assert "ops/queue.md" not in str(run.gaps)
