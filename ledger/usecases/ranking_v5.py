"""`citeledger-bm25@5`: `@4` with irregular inflections folded as word forms.

`@4`'s no-hit rule asks one document to hold half of the question's idf mass, an unknown
word weighing as the least specific known one. The false `no_hit` it left on a held-out set
("policy on contributions written with chatgpt or copilot": the one file that answers says
"an LLM wrote it") was not one of weights: with two words no file uses, the answering file
held two of the three known words, and the third, `written`, it holds as `wrote`, which the
Snowball stemmer and `@3`'s suffix families keep apart (`written`, `wrote`, `write`). Measured
on the tuning sets (`docs/benchmarks/search.md`, round 5), no weight of the unknown words
answers that question without also answering unanswerable ones that look the same to the
rule (as many known and unknown words, a larger share held), so `@5` leaves the rule as it
is and gives it the evidence it missed: for the rule, a query word also looks up the other
principal parts of an irregular verb (`IRREGULAR_VERBS`), merged as one term as `@3` merges
its derivational relatives. The fold feeds the no-hit rule only (which documents hold which of the
question's words, and the words' idf there): scores, fusion and the page are `@4`'s, so a
question `@4` answers gets the same page (measured: folding the forms into the scores as
well moved common verbs, `run`/`ran`, `keep`/`kept`, `show`/`shown`, and cost MRR@10 on
two tuning sets).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ledger.retrieval.search_text import Term, stem_word
from ledger.usecases.ports import CorpusView
from ledger.usecases.ranking_v3 import family_postings, query_forms, surface_word

Array = np.ndarray[Any, Any]

# Principal parts of common irregular English verbs whose forms stem apart, a family a
# line. Left out: forms that are common words of their own in documentation (`bound`,
# `left`, `found`, `saw`, `lay`/`laid`, `lead`/`led`).
_IRREGULAR_TABLE = """
write writes wrote written writing
rewrite rewrites rewrote rewritten rewriting
override overrides overrode overridden overriding
hide hides hid hidden hiding
choose chooses chose chosen choosing
take takes took taken taking
give gives gave given giving
begin begins began begun beginning
run runs ran running
go goes went gone going
do does did done doing
break breaks broke broken breaking
know knows knew known knowing
throw throws threw thrown throwing
draw draws drew drawn drawing
grow grows grew grown growing
show shows showed shown showing
drive drives drove driven driving
forget forgets forgot forgotten forgetting
freeze freezes froze frozen freezing
speak speaks spoke spoken speaking
get gets got gotten getting
build builds built building
send sends sent sending
spend spends spent spending
keep keeps kept keeping
lose loses lost losing
mean means meant meaning
hold holds held holding
bring brings brought bringing
buy buys bought buying
think thinks thought thinking
catch catches caught catching
teach teaches taught teaching
seek seeks sought seeking
tell tells told telling
sell sells sold selling
stand stands stood standing
understand understands understood understanding
stick sticks stuck sticking
strike strikes struck striking
feed feeds fed feeding
pay pays paid paying
say says said saying
"""
IRREGULAR_VERBS: tuple[tuple[str, ...], ...] = tuple(
    tuple(line.split()) for line in _IRREGULAR_TABLE.strip().splitlines()
)
_FAMILY_OF: dict[str, tuple[str, ...]] = {word: family for family in IRREGULAR_VERBS for word in family}


def irregular_stems(word: str) -> tuple[str, ...]:
    """Stems of the other principal parts of `word` (a lowercase surface word) when it is a
    form of an irregular verb, those that stem apart from it, sorted (deterministic)."""
    family = _FAMILY_OF.get(word, ())
    own = stem_word(word)
    return tuple(sorted({stem_word(other) for other in family} - {own}))


def query_forms_v5(query: str, term: Term) -> tuple[str, ...]:
    """`@3`'s stems for a query term (its own, then its derivational relatives'), then its
    irregular principal parts' not among them."""
    forms = query_forms(query, term)
    if not (term.score and term.cover):
        return forms
    extra = [stem for stem in irregular_stems(surface_word(query, term)) if stem not in forms]
    return (*forms, *extra)


def gate_evidence(
    view: CorpusView, query: str, term: Term, scored: tuple[Array, Array, float]
) -> tuple[Array, Array, float]:
    """(chunk rows, field rows, idf) the no-hit rule counts for `term`: those of its scored
    family (`scored`, `@4`'s) unless the term is a form of an irregular verb, then those of
    the family with its other principal parts, the idf from that family's document count."""
    forms = query_forms_v5(query, term)
    if forms == query_forms(query, term):
        return scored
    rows, _tf, field_rows, _codes = family_postings(view, forms)
    df = len(rows)
    return rows, field_rows, math.log(1 + (view.live_count - df + 0.5) / (df + 0.5))
