"""`question_words` scans for the question index's words without building a `Term` per
token; it must give exactly the words the full tokenizer would (same words, same order, same
cut at the limit): the index's rows are keyed hashes of them, and a search hashes `q` the
same way, so one differing word is a question no longer found."""

from __future__ import annotations

from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.retrieval.question_words import MAX_INDEXED_WORDS, MAX_SEARCH_WORDS, question_words
from ledger.retrieval.search_text import terms
from tests.test_search_snippet_terms import PIECES, TEXTS

ROOT = Path(__file__).resolve().parents[1]


def _from_terms(text: str, limit: int) -> list[str]:
    """The words as the full tokenizer gives them (the definition `question_words` keeps)."""
    seen: dict[str, None] = {}
    for term in terms(text):
        if term.score and term.text not in seen:
            seen[term.text] = None
            if len(seen) >= limit:
                break
    return list(seen)


def _questions() -> list[str]:
    """The golden queries and every eval set's questions (their `query` strings only)."""
    files = [
        ROOT / "tests" / "golden" / "queries.yaml",
        *sorted((ROOT / "scripts" / "eval_sets").glob("*.yaml")),
    ]
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            query = node.get("query")
            if isinstance(query, str):
                found.append(query)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for path in files:
        walk(yaml.safe_load(path.read_text(encoding="utf-8")))
    return found


def test_question_words_of_every_golden_and_eval_question() -> None:
    questions = _questions()
    assert len(questions) > 500
    for question in questions:
        for limit in (MAX_INDEXED_WORDS, MAX_SEARCH_WORDS + 1, 2):
            assert question_words(question, limit=limit) == _from_terms(question, limit), question


@settings(max_examples=300, deadline=None)
@given(text=TEXTS, limit=st.sampled_from([1, 2, 3, MAX_SEARCH_WORDS + 1, MAX_INDEXED_WORDS]))
def test_question_words_equals_the_full_scan(text: str, limit: int) -> None:
    assert question_words(text, limit=limit) == _from_terms(text, limit)


def test_question_words_of_long_and_mixed_questions() -> None:
    # Past the index's limit, and every piece at once (CJK runs, NFKC forms, stopwords).
    many = " ".join(f"word{n} leaves" for n in range(MAX_INDEXED_WORDS + 10))
    mixed = " ".join(PIECES.elements)
    for text in (many, mixed, "監査ログ 索 日 検索 the Ｃａｆé ﬁle token's"):
        assert question_words(text) == _from_terms(text, MAX_INDEXED_WORDS)
