"""`citeledger-bm25@6` (issue 32): `@5` whose no-hit rule weighs each question word by a
saturated idf. The false `no_hit` it removes has no unknown word: two rare words the
question uses in passing ("merge", "several", each in one unrelated file) carry as much idf
as the rest of the question, so under `@5` the file that holds every other word misses the
bar. Scores and pages are `@5`'s."""

from __future__ import annotations

import pytest

from ledger.usecases.context import UseCaseContext
from ledger.usecases.ranking import ENGINE, ENGINE_V5, ENGINE_V6, SearchRun
from ledger.usecases.ranking_v6 import GATE_SATURATION, saturated_idf
from ledger.writing.application import Ledger
from tests.test_search import corpus_context
from tests.test_search_v5 import _run  # a page of 10

FILES = {
    # The one file that answers, without "merge" or "several".
    "commands/combine.md": "# Combine\n\nCombine the data files of parallel test runs into one.\n",
    "notes/git.md": "# Git\n\nMerge requests need a review.\n",
    "notes/team.md": "# Team\n\nSeveral people share the rota.\n",
    "guide/workers.md": "# Workers\n\nParallel workers keep their own data.\n",
    "guide/ci.md": "# CI\n\nJobs go in parallel on the build machines.\n",
    # Notes that make the question's other words common, as in real documentation.
    **{
        f"notes/run-{day}.md": f"# Run {day}\n\nThe test runs of day {day} wrote one set of data files.\n"
        for day in range(1, 13)
    },
    # Rooms: a corpus of some size, so that a word one file holds is rare.
    **{
        f"rooms/{room}.md": f"# Room {room}\n\nRoom {room} seats {room} guests.\n" for room in range(101, 111)
    },
}
RARE_WORDS = "merge the data files of several parallel test runs into one"


@pytest.fixture
def ctx(ledger: Ledger) -> UseCaseContext:
    return corpus_context(ledger, FILES)


def test_two_rare_incidental_words_no_longer_veto_the_answer(ctx: UseCaseContext) -> None:
    at5 = _run(ctx, RARE_WORDS, ENGINE_V5)
    assert at5.status == "no_hit" and not at5.hits  # the false no_hit of coverage.py's set
    run = _run(ctx, RARE_WORDS, ENGINE_V6)
    assert run.status == "ok" and ENGINE != ENGINE_V5
    assert run.hits[0].path == "commands/combine.md"


def _page(run: SearchRun) -> list[tuple[str, str, tuple[tuple[str, str], ...]]]:
    return [(hit.chunk_id, hit.score, hit.score_breakdown) for hit in run.hits]


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ("deploy the data files to kubernetes with helm", "no_hit"),
        ("merge several kubernetes clusters", "no_hit"),
        ("combine data files", "ok"),
        ("test runs in parallel", "ok"),
        ("merge requests review", "ok"),
    ],
)
def test_at6_decides_as_at5_here_and_shows_at5s_page(ctx: UseCaseContext, query: str, status: str) -> None:
    # Unanswerable questions stay no_hit; the saturation feeds the no-hit rule only, so a
    # page both answer is @5's, chunk for chunk, score for score.
    at5, at6 = _run(ctx, query, ENGINE_V5), _run(ctx, query, ENGINE_V6)
    assert at5.status == at6.status == status
    assert _page(at5) == _page(at6)


def test_saturated_idf_grows_with_the_idf_and_stays_below_the_bound() -> None:
    weights = [saturated_idf(idf) for idf in (0.0, 0.5, 1.0, 2.0, 4.0, 10.0, 100.0)]
    assert weights[0] == 0.0 and weights == sorted(weights) and len(set(weights)) == len(weights)
    assert all(w < GATE_SATURATION for w in weights)
    assert saturated_idf(GATE_SATURATION) == GATE_SATURATION / 2
