"""`citeledger-bm25@8`: `@7` whose no-hit rule also takes a document whose question words
stand together. Scores, fusion, boosts and pages are `@7`'s; only whether a page is shown
changes, and only from `no_hit` to an answer.

`@7` shows a page when a document among the first candidates holds half of the question's
weight (`needed`; each word a saturated idf, an unknown word as the least weighty known one).
A question that mixes the corpus's words with two or three it never uses ("my jenkins
pipeline hangs on an interactive prompt") can miss that bar with the file that answers it
ranked first, and unanswerable questions of the same shape ("two factor authentication with
sms codes") sit at the same share: the word weights do not separate them (round 9). What does,
on the tuning sets (`docs/benchmarks/search.md`, round 10), is where the held words stand: in
the answering file they are a phrase apart ("interactive prompt" within 4 words), in most
unanswerable questions' best file they are paragraphs apart or not all in one passage.

So under `@8` the first-ranked candidate also answers when it holds at least `NEAR_SHARE` of
`needed`, holds two or more of the question's known words, and one of its passages holds every
known word the document holds within `PROXIMITY_WINDOW` search terms (stopwords do not count).
The passage's text is unsealed for that one check (the snippet of every cited chunk is made the
same way); a chunk whose key is gone counts as not holding the words. A `no_hit` whose first
candidate was near but scattered says so in its gaps (naming the file unless it is restricted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ledger.retrieval.search_text import query_terms, terms
from ledger.usecases import ranking_v6, ranking_v7
from ledger.usecases.context import UseCaseContext
from ledger.usecases.ports import CorpusView, SearchIndexReader
from ledger.usecases.ranking_steps import MAX_GAPS, _gaps
from ledger.usecases.ranking_v3 import family_postings
from ledger.usecases.ranking_v5 import query_forms_v5
from ledger.usecases.search_run import ENGINE_V7, ENGINE_V8
from ledger.writing.sealing import KeyDestroyed, SealBroken

NEAR_SHARE = 0.6  # of `@7`'s bar: the least a document whose words stand together must hold
PROXIMITY_WINDOW = 6  # search terms from the first held word to the last, in one passage
MAX_PASSAGES = 32  # chunks of the first-ranked document unsealed for that check, at most
FUSED_ENGINES = (*ranking_v7.FUSED_ENGINES, ENGINE_V8)
Array = np.ndarray[Any, Any]
Ranked = tuple[Any, ...]  # `ranking_steps.Ranked`: (score, path, ordinal, row, verdict, base)

__all__ = ["FUSED_ENGINES", "PageEvidence", "field_boosts", "gate_bar", "gate_gaps", "no_hit_evidence"]


def _as_v7(engine: str) -> str:
    return ENGINE_V7 if engine == ENGINE_V8 else engine


def field_boosts(engine: str, title: Array, heading: Array, filename: Array) -> tuple[Array, Array, Array]:
    """`ranking_v7.field_boosts`; `@8` weighs them as `@7`."""
    return ranking_v7.field_boosts(_as_v7(engine), title, heading, filename)


def no_hit_evidence(
    engine: str, view: CorpusView, query: str, term: Any, scored: tuple[Array, Array, float]
) -> tuple[Array, Array, float]:
    """`ranking_v6.no_hit_evidence`; `@8` counts each word as `@7` (and `@6`) do."""
    return ranking_v6.no_hit_evidence(_as_v7(engine), view, query, term, scored)


def gate_bar(engine: str, needed: float) -> float:
    """The mass that makes a document a candidate cover: `@8`'s near documents too."""
    return NEAR_SHARE * needed if engine == ENGINE_V8 else needed


@dataclass(frozen=True)
class PageEvidence:
    """What the no-hit rule reads to decide whether a ranked page is shown."""

    sources: tuple[UseCaseContext, SearchIndexReader, str]  # (context, index, tenant) to unseal from
    query: str
    view: CorpusView
    # (documents that cover (`gate_bar`), each document's mass, `needed`); None before `@3`
    coverage: tuple[Array | None, Array | None, float]
    allowed: Sequence[Ranked]  # the candidates the policy allows, best first


def gate_gaps(engine: str, evidence: PageEvidence) -> list[str] | None:
    """None when the page may be shown, else the gaps a `no_hit` reports (empty: the usual
    ones). Before `@8`: shown when a covering document is among the allowed candidates; `@8`:
    also when the first of them is near and its known words stand together (`words_together`)."""
    sources, query, view, allowed = evidence.sources, evidence.query, evidence.view, evidence.allowed
    covering, document_mass, needed = evidence.coverage
    if covering is None or document_mass is None:
        return None
    numbers = [int(view.document_numbers[item[3]]) for item in allowed]
    if engine != ENGINE_V8:
        return None if any(covering[n] for n in numbers) else []
    if any(document_mass[n] >= needed - 1e-12 for n in numbers):
        return None
    if not numbers or not covering[numbers[0]]:
        return []
    if words_together(sources, query, view, numbers[0]):
        return None
    words = [t.text for t in query_terms(query)]
    # A restricted file is not named: the gaps outlive the caller's scope (a replay shows them).
    named = "the first-ranked file" if view.restricted[allowed[0][3]] else allowed[0][1]
    scattered = (
        f"{named} holds {document_mass[numbers[0]] / needed:.0%} of what the question needs, "
        f"but no passage holds its words within {PROXIMITY_WINDOW} words of each other"
    )
    return [scattered, *_gaps(words, [], True, [])][:MAX_GAPS]


def words_together(
    sources: tuple[UseCaseContext, SearchIndexReader, str], query: str, view: CorpusView, document: int
) -> bool:
    """Whether one passage of `document` holds every known question word the document holds
    (two or more, in its text, titles, headings or file name) within `PROXIMITY_WINDOW` search
    terms: the word forms the no-hit rule counts (`query_forms_v5`)."""
    ctx, index, tenant_id = sources
    held, passages = held_words(query, view, document)
    if len(held) < 2 or not passages:
        return False
    # Only a chunk holding every word can hold them together; at most MAX_PASSAGES of those
    # are unsealed (a long changelog may hold common words in hundreds of them).
    checked = sorted(passages)[:MAX_PASSAGES]
    states = index.chunk_states(tenant_id, [view.chunk(row) for row in checked])
    for row in checked:
        state = states.get(row)
        if state is None or state.text is None:
            continue
        try:
            text = ctx.sealer.unseal(state.text, tenant_id=tenant_id)
        except (KeyDestroyed, SealBroken):
            continue
        if _span([t.text for t in terms(text)], held) <= PROXIMITY_WINDOW:
            return True
    return False


def held_words(
    query: str, view: CorpusView, document: int, *, words_only: bool = False
) -> tuple[list[set[str]], set[int] | None]:
    """The known question words `document` holds (each as the word forms the no-hit rule counts,
    `query_forms_v5`; in its text, titles, headings or file name), and its chunks whose text
    holds every one of them (None when it holds none). `words_only`: leave out the single
    characters that cover text written without spaces (they are not scored; `search_text.Term`)."""
    own = view.document_numbers == document
    held: list[set[str]] = []
    passages: set[int] | None = None
    for term in query_terms(query):
        if not term.cover or (words_only and not term.score):
            continue
        forms = query_forms_v5(query, term)
        rows, _tf, field_rows, _codes = family_postings(view, forms)
        body = set(rows[own[rows]].tolist())
        if body or own[field_rows].any():
            held.append(set(forms))
            passages = body if passages is None else passages & body
    return held, passages


def _span(tokens: Sequence[str], words: Sequence[set[str]]) -> int:
    """The fewest tokens from first to last (last index minus first) of a stretch of
    `tokens` that holds one form of every word of `words`; a large number when none does."""
    hits = sorted((i, k) for i, token in enumerate(tokens) for k, forms in enumerate(words) if token in forms)
    count = [0] * len(words)
    have, low, best = 0, 0, len(tokens) + PROXIMITY_WINDOW + 1
    for position, word in hits:
        count[word] += 1
        have += count[word] == 1
        while have == len(words):
            best = min(best, position - hits[low][0])
            count[hits[low][1]] -= 1
            have -= count[hits[low][1]] == 0
            low += 1
    return best
