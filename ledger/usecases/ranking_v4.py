"""`citeledger-bm25@4`: `@3` (word forms, the no-hit rule per document, the full page) with
the whole-file BM25 fused into each chunk's score by normalised score fusion, so that a file
that answers the question as a whole is not lost behind passages that repeat one word.

Each candidate chunk's score is

    chunk evidence + FUSION_WEIGHT * file BM25 * (best chunk evidence / best file BM25)

where the chunk evidence is `@3`'s chunk parts (BM25 of the chunk, title, heading and file
name boosts, position) and both maxima are taken over the query's candidates. That is
`chunk / best chunk + FUSION_WEIGHT * file / best file` (both on [0, 1]) times one positive
number per query, so the order is the normalised fusion's while every part of `reason` stays
a term of the score it explains (`file_bm25` is the rescaled whole-file part). `@3` added the
whole-file BM25 unscaled (weight 1.0): whichever of the two ran on the larger scale for a
query decided it; here the two meet on one scale and the whole-file part weighs
`FUSION_WEIGHT` times the passage part.

The no-hit rule is `@3`'s (some document must hold half of the question's idf mass, a word
counting for a file when any of its chunks, its title, headings or file name holds it) with
two changes (`needed_document_coverage_v4`): a word no document holds weighs as the question's
*least* specific known word, not the average one, and the share need only be met. A word the
corpus never uses is as often the user's word for what the documents name otherwise
("acronym" for "abbreviation", "typographic" for "smart quotes") as a topic the corpus lacks;
it may not outweigh any word the corpus does hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ledger.usecases.ranking_steps import QUESTION_FORM_STEMS
from ledger.usecases.ranking_v3 import DOC_COVERAGE

FUSION_WEIGHT = 1.5  # the whole file's share against the best passage's (chosen on tuning sets)
Array = np.ndarray[Any, Any]


def fused_file_weight(chunk_evidence: Array, file_bm25: Array) -> float:
    """The factor on a candidate's whole-file BM25 (`file_bm25`, one per candidate) that puts
    it on the scale of the candidates' chunk evidence (`chunk_evidence`), times
    `FUSION_WEIGHT`. No file BM25 (a match in titles or file names only): 0."""
    best_file = float(file_bm25.max(initial=0.0))
    if best_file <= 0.0:
        return 0.0
    return FUSION_WEIGHT * float(chunk_evidence.max(initial=0.0)) / best_file


def needed_document_coverage_v4(known: Sequence[float], missing: Sequence[str]) -> float:
    """The idf mass one document must hold: `DOC_COVERAGE` of the question's mass, where every
    known word counts with its idf and every unknown content word with the smallest idf among
    the known ones (words that ask how much or how long count nothing when unknown). Meeting
    the share is enough (`@3` wanted it exceeded when a word was unknown): else a question of
    one known and one unknown word ("how is the repository laid out") could never be
    answered, whatever the corpus holds. No known word: nothing qualifies."""
    if not known:
        return float("inf")
    content = [term for term in missing if term not in QUESTION_FORM_STEMS]
    return DOC_COVERAGE * (sum(known) + len(content) * min(known))
