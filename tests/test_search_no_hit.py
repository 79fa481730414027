"""`@2`'s no-hit rule: an answerable question with one or two words the corpus never uses
still answers; a question about what the corpus does not hold is still `no_hit`."""

from __future__ import annotations

import pytest

from ledger.domain.events import SearchRequest
from ledger.policy.policy_rules import NO_POLICY
from ledger.usecases.context import UseCaseContext
from ledger.usecases.ranking import ENGINE_V1, ENGINE_V2, SearchRun, rank
from ledger.writing.application import Ledger
from tests.test_search import ACME, corpus_context

FILES = {
    "security/standard.md": "# Security standard\n\n## Passwords\n\nPasswords must be at least 14 characters "
    "long and are stored with Argon2id.\n\n## Laptops\n\nLost laptops are wiped remotely.\n",
    "handbook/benefits.md": "# Benefits\n\n## Health\n\nHealth insurance covers the whole family.\n\n"
    "## Gym\n\nA gym allowance of 50 euros a month.\n",
    "handbook/offices.md": "# Offices\n\nThe Berlin office is open from 8:00 to 20:00.\n",
    "runbooks/billing.md": "# Billing runbook\n\nRestart invoice-runner with a rolling restart.\n",
}


def _run(ctx: UseCaseContext, query: str, engine: str = ENGINE_V2, top_k: int = 5) -> SearchRun:
    assert ctx.search_index is not None
    request = SearchRequest(top_k=top_k, corpus_position=ctx.search_index.refresh())
    return rank(ctx, "acme", query, request, NO_POLICY, ACME.scopes, None, engine=engine)


@pytest.fixture
def ctx(ledger: Ledger) -> UseCaseContext:
    return corpus_context(ledger, FILES)


@pytest.mark.parametrize(
    ("query", "path"),
    [
        # "minimum" and "length": the corpus says "at least ... long" (two unknown words).
        ("what is the minimum password length", "security/standard.md"),
        # "stolen": one unknown content word beside two known ones.
        ("stolen laptops wiped", "security/standard.md"),
        # "safely", "downtime" unknown; "without" a function word the stopword list lacks.
        ("restart invoice-runner safely without downtime", "runbooks/billing.md"),
    ],
)
def test_an_answerable_question_with_unknown_words_answers(
    ctx: UseCaseContext, query: str, path: str
) -> None:
    run = _run(ctx, query)
    assert run.status == "ok" and run.hits[0].path == path


def test_the_issues_question_was_a_false_no_hit_under_at1(ctx: UseCaseContext) -> None:
    query = "what is the minimum password length"
    assert _run(ctx, query, ENGINE_V1).status == "no_hit"  # the unknown words outweighed the rest
    assert _run(ctx, query).status == "ok"


@pytest.mark.parametrize(
    "query",
    [
        "pet insurance for dogs",  # two unknown topic words outweigh the one known word
        "parking spaces at the Berlin office",  # two unknown topic words, two known
        "submarine reactor maintenance schedule",  # nothing known
        "gym membership sauna massage yoga",  # more than two unknown content words
    ],
)
def test_a_question_about_what_the_corpus_does_not_hold_is_no_hit(ctx: UseCaseContext, query: str) -> None:
    run = _run(ctx, query)
    assert run.status == "no_hit" and run.hits == ()
    assert any("no searchable document mentions" in gap for gap in run.gaps)
