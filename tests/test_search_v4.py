"""`citeledger-bm25@4` (issue 32), the live default: `@3` with the whole-file BM25 fused into
each chunk's score on the chunk evidence's scale (normalised score fusion), and a no-hit rule
in which a word the corpus never uses weighs no more than the least specific known word.
`@3`, run on the same corpus in the same test, shows what changed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ledger.retrieval.search_text import stem_word
from ledger.usecases.context import UseCaseContext
from ledger.usecases.ranking import ENGINE, ENGINE_V3, ENGINE_V4, SearchRun
from ledger.usecases.ranking_v4 import FUSION_WEIGHT, fused_file_weight, needed_document_coverage_v4
from ledger.usecases.search_run import ENGINE_V10
from ledger.writing.application import Ledger
from tests.test_search import ACME, _search, corpus_context
from tests.test_search_no_hit import _run as run_engine

FILES = {
    # "keys" and "rotate" in different sections: the file answers, no one passage does.
    "security/vault.md": "# Vault\n\n## Storage\n\nKeys live in the vault.\n\n## Schedule\n\n"
    "We rotate them yearly.\n\n## Access\n\nOnly admins open the keys cabinet.\n",
    # One passage that repeats one of the two words, in its title and file name too.
    "ops/rotate.md": "# Rotate\n\nRotate logs: rotate, rotate, rotate the log files daily.\n",
    "contributing/architecture.md": "# Project architecture\n\n## Repository layout\n\n"
    "The repository holds the sources, the tests and the docs.\n",
    "extensions/abbreviations.md": "# Abbreviations\n\nEach abbreviation gets a title that "
    "browsers expand when the pointer rests on it.\n",
    "security/tokens.md": "# Tokens\n\nEvery token signature is checked by the verification service.\n",
    "handbook/travel.md": "# Travel\n\nBook trains for trips under 600 km.\n",
}


def _run(ctx: UseCaseContext, query: str, engine: str = ENGINE_V4, top_k: int = 10) -> SearchRun:
    return run_engine(ctx, query, engine, top_k)


def _files(run: SearchRun) -> list[str]:
    return list(dict.fromkeys(hit.path for hit in run.hits))


@pytest.fixture
def ctx(ledger: Ledger) -> UseCaseContext:
    return corpus_context(ledger, FILES)


# A corpus of its own (its idf and lengths decide the margins): the file that answers, the
# passage that repeats one word, two files that share nothing or one word with the question.
WHOLE_VS_PASSAGE = {
    "security/vault.md": FILES["security/vault.md"],
    "ops/rotate.md": FILES["ops/rotate.md"],
    "handbook/travel.md": FILES["handbook/travel.md"],
    "handbook/vault.md": "# Vault\n\nThe office vault holds spare laptops.\n",
}


def test_a_file_that_answers_as_a_whole_outranks_a_passage_repeating_one_word(ledger: Ledger) -> None:
    ctx = corpus_context(ledger, WHOLE_VS_PASSAGE)
    at3 = _run(ctx, "rotate keys", ENGINE_V3)
    assert _files(at3)[:2] == ["ops/rotate.md", "security/vault.md"]  # @3: the repeated word won
    run = _run(ctx, "rotate keys")
    assert run.status == "ok" and _files(run)[:2] == ["security/vault.md", "ops/rotate.md"]


def test_the_whole_file_part_is_put_on_the_chunk_evidences_scale(ctx: UseCaseContext) -> None:
    # Every candidate file is cited here (top_k 10), each with its best chunk: the largest
    # whole-file part is FUSION_WEIGHT times the largest chunk evidence.
    run = _run(ctx, "rotate keys")
    parts = [dict(hit.score_breakdown) for hit in run.hits]
    file_part = max(float(p["file_bm25"]) for p in parts)
    chunk_part = max(sum(float(v) for k, v in p.items() if k != "file_bm25") for p in parts)
    assert file_part == pytest.approx(FUSION_WEIGHT * chunk_part, abs=1e-5)


def test_fused_file_weight() -> None:
    assert fused_file_weight(np.array([2.0, 4.0]), np.array([1.0, 8.0])) == FUSION_WEIGHT * 4.0 / 8.0
    # Matches in titles or file names only: no whole-file BM25, nothing to scale.
    assert fused_file_weight(np.array([1.0]), np.array([0.0])) == 0.0


@pytest.mark.parametrize(
    ("query", "path"),
    [
        # One known word ("repository"), one the corpus never uses ("laid"): `@3` could never
        # answer such a question (the unknown word weighed as much as the known one, and the
        # share had to be exceeded).
        ("how is the repository laid out", "contributing/architecture.md"),
        # Two known words one file holds, two unknown ones (the user's words for what the
        # text calls "abbreviation" and "rests on"): a false no_hit under `@3`.
        ("expand acronyms with a hover title", "extensions/abbreviations.md"),
    ],
)
def test_a_question_worded_unlike_its_answer_is_not_a_false_no_hit(
    ctx: UseCaseContext, query: str, path: str
) -> None:
    assert _run(ctx, query, ENGINE_V3).status == "no_hit"
    run = _run(ctx, query)
    assert run.status == "ok" and _files(run)[0] == path


@pytest.mark.parametrize(
    "query",
    [
        "kubernetes autoscaling helm",  # nothing the corpus knows
        "train tokens on a gpu cluster with cuda",  # one known word among four unknown ones
        "deploy the vault to kubernetes with terraform",  # one among three
    ],
)
def test_a_question_about_what_the_corpus_lacks_is_still_no_hit(ctx: UseCaseContext, query: str) -> None:
    run = _run(ctx, query)
    assert run.status == "no_hit" and run.hits == ()


def test_an_unknown_word_weighs_as_the_least_specific_known_one() -> None:
    assert needed_document_coverage_v4([2.0, 4.0], []) == pytest.approx(3.0)
    assert needed_document_coverage_v4([2.0, 4.0], ["zorbl"]) == pytest.approx(0.5 * (6.0 + 2.0))
    assert needed_document_coverage_v4([2.0, 4.0], [stem_word("minimum")]) == pytest.approx(3.0)
    assert needed_document_coverage_v4([], ["zorbl"]) == float("inf")


def test_word_forms_still_fold(ctx: UseCaseContext) -> None:
    run = _run(ctx, "verify token signatures")
    assert run.status == "ok" and _files(run)[0] == "security/tokens.md"
    assert float(dict(run.hits[0].term_scores)[stem_word("verify")]) > 0


def test_each_citation_names_its_parts_and_live_search_records_the_default(ctx: UseCaseContext) -> None:
    body: dict[str, Any] = _search(ctx, ACME, "rotate keys", top_k=3)
    assert body["status"] == "ok" and ENGINE == ENGINE_V10  # @4's fusion, @10's no-hit rule
    citation = body["output"]["citations"][0]
    components = {c["component"] for c in citation["reason"]["score_breakdown"]}
    assert {"bm25", "title_boost", "heading_boost", "filename_boost", "position", "file_bm25"} <= components
    parts = [float(c["value"]) for c in citation["reason"]["score_breakdown"]]
    assert abs(sum(parts) - float(citation["score"])) < 1e-5
    receipt = ctx.ledger.get(body["position"])
    assert receipt is not None and receipt.payload["engine"] == ENGINE


def test_at4_is_deterministic(ctx: UseCaseContext) -> None:
    first = _run(ctx, "rotate keys repository verification")
    again = _run(ctx, "rotate keys repository verification")
    assert first.context_hash == again.context_hash
    assert [(h.chunk_id, h.score) for h in first.hits] == [(h.chunk_id, h.score) for h in again.hits]
