"""The words of a receipt's question, for the question index and for a search of it (`q`).

The same tokenizer as search (`search_text.terms`: folded, stopwords dropped, stemmed; CJK
bigrams), so "leaves" finds a question that asked about "leave". Each distinct scoring term
counts once. Both sides are bounded: an indexed question keeps at most
`MAX_INDEXED_WORDS` distinct words (a question longer than that is found by its first
ones), and a search names at most `MAX_SEARCH_WORDS` words in at most `MAX_SEARCH_CHARS`
characters.
"""

from __future__ import annotations

from ledger.domain.fields import MAX_SEARCHED_WORDS
from ledger.retrieval.search_text import _TOKEN, STOPWORDS, scoring_grams, scoring_stem

MAX_SEARCH_CHARS = 200
MAX_SEARCH_WORDS = MAX_SEARCHED_WORDS
MAX_INDEXED_WORDS = 256


class BadQuestionSearch(ValueError):
    """A `q` that cannot be searched (too long, too many words, no searchable word)."""


def question_words(text: str, *, limit: int = MAX_INDEXED_WORDS) -> list[str]:
    """The distinct scoring terms of `text` in order of first occurrence, at most `limit`:
    `[t.text for t in search_text.terms(text) if t.score]` deduplicated, without building a
    `Term` per token (every recorded receipt's question passes here on the write path)."""
    seen: dict[str, None] = {}
    # `findall`: (run, word) pairs without a match object each; the group not matched is "".
    for run, word in _TOKEN.findall(text):
        if run:
            found = [gram for gram in scoring_grams(run) if gram not in STOPWORDS]
        else:
            stem = scoring_stem(word)
            found = [] if stem is None else [stem]
        for each in found:
            if each not in seen:
                seen[each] = None
                if len(seen) >= limit:
                    return list(seen)
    return list(seen)


def search_words(q: str) -> list[str]:
    """The words a search for `q` must all find in a question; BadQuestionSearch names the rule."""
    if len(q) > MAX_SEARCH_CHARS:
        raise BadQuestionSearch(f"q must be at most {MAX_SEARCH_CHARS} characters")
    words = question_words(q, limit=MAX_SEARCH_WORDS + 1)
    if len(words) > MAX_SEARCH_WORDS:
        raise BadQuestionSearch(f"q must have at most {MAX_SEARCH_WORDS} words")
    if not words:
        raise BadQuestionSearch(
            "q has no searchable word (common words like 'the' and one-letter words are not indexed)"
        )
    return words
