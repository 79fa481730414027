"""`citeledger-bm25@6`: `@5` whose no-hit rule weighs each question word by a saturated idf.

`@4`/`@5`'s rule asks one document to hold half of the question's idf mass. Rare words the
question uses in passing ("merge the data files of *several* parallel test runs into one":
`merge` and `several` at idf 3.62 each, in one and two documents, neither in the file that
answers) then weigh more than the rest of the question together (7.2 of 10.9), and no
document reaches half (the best hold 5.3; coverage.py's `cmd_combine.rst`, which bm25s ranks
second, at most 3.7). An unknown word raised the bar so until `@4`; a known one still could.

`@6` counts each word in the rule (in the question's mass and in what a document holds,
alike) as `idf * S / (S + idf)`, `S` = `GATE_SATURATION`: the weight still grows with how
specific the word is, as BM25's term frequency part grows with the count, but no word weighs
more than `S`, so one or two rare words cannot decide the bar alone. The rule is otherwise
`@5`'s (the unknown word weighs as the least weighty known one, half the mass must be
held, a word counts for a document when any chunk, title, heading or file name holds it, and
a covering document must be among the first candidates). Scores, fusion and pages are
`@5`'s: the saturation only decides whether the page is shown.

`S` was chosen on the tuning sets (`docs/benchmarks/search.md`, round 6): from the recorded
evidence of 354 answerable and 61 unanswerable questions, every `S` from 1 to 5 removes the
one false `no_hit` and keeps or raises the unanswerable questions' `no_hit` count (32 under
`@5`; 34 at `S` = 2), as capping each word at the median idf or the third largest does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ledger.retrieval.search_text import Term
from ledger.usecases.ports import CorpusView
from ledger.usecases.ranking_v5 import gate_evidence
from ledger.usecases.search_run import ENGINE_V5, ENGINE_V6, ENGINE_V7

GATE_SATURATION = 2.0  # nats: the most one word can weigh in the no-hit rule
Array = np.ndarray[Any, Any]


def saturated_idf(idf: float) -> float:
    """A word's weight in the no-hit rule: `idf * S / (S + idf)` (0 stays 0; below `S`)."""
    return idf * GATE_SATURATION / (GATE_SATURATION + idf)


def no_hit_evidence(
    engine: str, view: CorpusView, query: str, term: Term, scored: tuple[Array, Array, float]
) -> tuple[Array, Array, float]:
    """(chunk rows, field rows, weight) the no-hit rule counts for `term` under `engine`:
    before `@5` the scored postings and idf (`scored`), under `@5` its irregular verb forms
    too (`ranking_v5.gate_evidence`), under `@6` (and `@7`) those with the idf saturated."""
    if engine in (ENGINE_V6, ENGINE_V7):
        rows, field_rows, idf = gate_evidence(view, query, term, scored)
        return rows, field_rows, saturated_idf(idf)
    return gate_evidence(view, query, term, scored) if engine == ENGINE_V5 else scored
