"""`citeledger-bm25@3` (issue 32; live until `@4`, kept for replay): word forms across
stems, a no-hit rule judged per document (one unknown word does not veto the known ones; a file's sections
together may answer), the page filled to `top_k` files, and each citation's `reason`
naming its parts. `@2`, run on the same corpus in the same test, shows what changed."""

from __future__ import annotations

import pytest

from ledger.retrieval.search_text import stem_word
from ledger.retrieval.word_forms import related_stems
from ledger.usecases.context import UseCaseContext
from ledger.usecases.ranking import ENGINE_V2, ENGINE_V3, SearchRun
from ledger.writing.application import Ledger
from tests.test_search import corpus_context
from tests.test_search_no_hit import _run as run_engine

FILES = {
    "security/tokens.md": "# Tokens\n\n## Signatures\n\nEvery token signature is checked by the verification "
    "service before a request is served.\n\n## Rotation\n\nKeys rotate every 90 days.\n",
    "realtime/websockets.md": "# WebSockets\n\nA websocket keeps a persistent connection open so the "
    "server can push chat messages both ways.\n\n## Closing\n\nClose the connection with a code.\n",
    "ops/deploy.md": "# Deploying\n\n## Containers\n\nBuild the container image in CI.\n\n"
    "## Rollback\n\nA failed release is rolled back by the pipeline.\n",
    "handbook/travel.md": "# Travel\n\nBook trains for trips under 600 km.\n",
}


def _run(ctx: UseCaseContext, query: str, engine: str = ENGINE_V3, top_k: int = 5) -> SearchRun:
    return run_engine(ctx, query, engine, top_k)


@pytest.fixture
def ctx(ledger: Ledger) -> UseCaseContext:
    return corpus_context(ledger, FILES)


def test_verify_and_verification_stem_apart_and_fold_together() -> None:
    assert stem_word("verify") != stem_word("verification")  # the stemmer alone splits them
    assert stem_word("verification") in related_stems("verify")
    assert stem_word("verify") in related_stems("verification")
    assert stem_word("registration") in related_stems("register")
    assert stem_word("describe") in related_stems("description")
    assert related_stems("token") == ()  # nothing to fold: no extra lookups


@pytest.mark.parametrize("query", ["verify signatures", "how do I verify a token"])
def test_a_word_form_the_text_does_not_use_finds_the_text(ctx: UseCaseContext, query: str) -> None:
    run = _run(ctx, query)
    assert run.status == "ok" and run.hits[0].path == "security/tokens.md"
    # The folded term is scored: the cited chunk's `verify` contribution is not zero.
    terms = dict(run.hits[0].term_scores)
    assert float(terms[stem_word("verify")]) > 0


def test_a_word_form_alone_was_a_false_no_hit_under_at2(ctx: UseCaseContext) -> None:
    query = "verify rotation"  # `verify` unknown to @2, `rotation` known
    assert _run(ctx, query, ENGINE_V2).status == "no_hit"
    run = _run(ctx, query)
    assert run.status == "ok" and run.hits[0].path == "security/tokens.md"


def test_one_unknown_word_does_not_veto_the_known_ones(ctx: UseCaseContext) -> None:
    # "realtime" and "two-way" appear nowhere; "chat", "connection", "way" point at the file.
    query = "two way realtime chat connection"
    run = _run(ctx, query)
    assert run.status == "ok" and run.hits[0].path == "realtime/websockets.md"
    assert any("realtim" in gap for gap in _run(ctx, "realtime quux zorble").gaps)


@pytest.mark.parametrize(
    "query",
    [
        "kubernetes autoscaling helm",  # nothing the corpus knows
        "pet insurance for dogs",  # nothing the corpus knows
        "quarterly keys budget zorble flimflam",  # one known word among unknown ones
    ],
)
def test_a_question_about_what_the_corpus_lacks_is_no_hit(ctx: UseCaseContext, query: str) -> None:
    run = _run(ctx, query)
    assert run.status == "no_hit" and run.hits == ()
    assert run.gaps and "no searchable document mentions" in run.gaps[0]


def test_a_file_whose_sections_together_answer_is_found(ctx: UseCaseContext) -> None:
    # "container" is in one section of ops/deploy.md, "rollback" and "pipeline" in another: no
    # single passage holds enough of the question, the file does.
    query = "container image rollback pipeline"
    assert _run(ctx, query, ENGINE_V2).status == "ok"  # @2 found it too (two of four words)
    run = _run(ctx, query)
    assert run.status == "ok" and {h.path for h in run.hits} == {"ops/deploy.md"}
    assert len(run.hits) == 2  # both sections, one citation of the file


def test_the_page_fills_to_top_k_files_in_score_order(ledger: Ledger) -> None:
    # One file answers; eight others mention "invoice" once among other words.
    invoices = (
        "# Invoices\n\nInvoice approval: every invoice over 500 "
        "euros needs a second approval by the controller.\n"
    )
    notes = {
        f"misc/note-{n}.md": f"# Note {n}\n\n"
        + "Unrelated words here. " * (n + 1)
        + "An invoice was mentioned.\n"
        for n in range(8)
    }
    ctx = corpus_context(ledger, {"finance/invoices.md": invoices, **notes})
    at2 = _run(ctx, "invoice approval by the controller", ENGINE_V2, top_k=5)
    run = _run(ctx, "invoice approval by the controller", top_k=5)
    assert run.status == "ok" and run.hits[0].path == "finance/invoices.md"
    paths = list(dict.fromkeys(h.path for h in run.hits))
    assert len(paths) == 5 > len({h.path for h in at2.hits})
    best = [max(float(h.score) for h in run.hits if h.path == p) for p in paths]
    assert best == sorted(best, reverse=True)
    # Shorter notes first (BM25 length normalisation): note-0 before note-1 ...
    assert paths[1:] == ["misc/note-0.md", "misc/note-1.md", "misc/note-2.md", "misc/note-3.md"]


def test_at3_is_deterministic(ctx: UseCaseContext) -> None:
    first = _run(ctx, "connection rollback token verification", top_k=10)
    again = _run(ctx, "connection rollback token verification", top_k=10)
    assert first.context_hash == again.context_hash
    assert [(h.chunk_id, h.score) for h in first.hits] == [(h.chunk_id, h.score) for h in again.hits]
