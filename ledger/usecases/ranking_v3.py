"""`citeledger-bm25@3`'s parts (`ranking._rank` runs them when the engine is `@3`):

- word forms: a query word's postings are those of its stem and of its derivational
  relatives' stems (`ledger.retrieval.word_forms`), merged as one term (tf summed per chunk,
  df counted over the union), so `verify` finds `verification`;
- the no-hit rule from the evidence: the idf mass of the query's words is counted per
  document (a word counts for a file when any of its live chunks, title, headings or file
  name holds it), and the query answers `no_hit` only when no document covers enough of it
  (`needed_document_coverage`). What a whole file or several of its passages cover
  counts, not one passage; an unknown word weighs like an average known one, so one word
  the corpus never uses cannot veto the others;
- once a document qualifies, every matching chunk is a candidate: the page fills to
  `top_k` files in score order; `best_per_document` keeps each file's best
  `MAX_HITS_PER_FILE` chunks before policy, so the policy window holds files, not one file's
  many chunks.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Any

import numpy as np

from ledger.retrieval.search_text import Term
from ledger.retrieval.word_forms import related_stems
from ledger.usecases.ports import CorpusView
from ledger.usecases.ranking_steps import MAX_HITS_PER_FILE, QUESTION_FORM_STEMS

FILE_WEIGHT_V3 = 1.0  # times the BM25 of the chunk's whole file
DOC_COVERAGE = 0.5  # share of the query's idf mass one document must hold
Array = np.ndarray[Any, Any]


def surface_word(query: str, term: Term) -> str:
    """The query word a term was stemmed from, folded as the tokenizer folds it."""
    return unicodedata.normalize("NFKC", query[term.start : term.end]).lower()


def family_postings(view: CorpusView, stems: Sequence[str]) -> tuple[Array, Array, Array, Array]:
    """(rows, tf, field rows, field codes) of several stems merged as one term."""
    if len(stems) == 1:
        rows, tf = view.body_postings(stems[0])
        field_rows, codes = view.field_postings(stems[0])
        return rows, tf, field_rows, codes
    body = [view.body_postings(stem) for stem in stems]
    fields = [view.field_postings(stem) for stem in stems]
    held = [i for i in range(len(stems)) if len(body[i][0]) or len(fields[i][0])]
    if len(held) == 1:  # one form in use (most relatives are no word): no merge, when rows ascend
        (rows, tf), (field_rows, codes) = body[held[0]], fields[held[0]]
        if _ascending(rows) and _ascending(field_rows):
            rows, tf = rows.astype(np.int32), tf.astype(np.int64)
            return rows, tf, field_rows.astype(np.int32), codes.astype(np.uint8)
    all_rows = np.concatenate([r for r, _ in body])
    all_tf = np.concatenate([t.astype(np.int64) for _, t in body])
    rows, inverse = np.unique(all_rows, return_inverse=True)
    tf = np.bincount(inverse, weights=all_tf, minlength=len(rows)).astype(np.int64)
    all_field_rows = np.concatenate([r for r, _ in fields])
    all_codes = np.concatenate([c.astype(np.uint8) for _, c in fields])
    field_rows, field_inverse = np.unique(all_field_rows, return_inverse=True)
    codes = np.zeros(len(field_rows), np.uint8)
    np.bitwise_or.at(codes, field_inverse, all_codes)
    return rows.astype(np.int32), tf, field_rows.astype(np.int32), codes


def _ascending(rows: Array) -> bool:
    """Strictly: what `np.unique` would return as it is."""
    return len(rows) < 2 or bool((rows[1:] > rows[:-1]).all())


def query_forms(query: str, term: Term) -> tuple[str, ...]:
    """The stems a query term looks up: its own, then its relatives' (CJK terms: its own)."""
    if not (term.score and term.cover):
        return (term.text,)
    return (term.text, *related_stems(surface_word(query, term)))


def add_document_coverage(
    coverage: Array, view: CorpusView, rows: Array, field_rows: Array, idf: float
) -> None:
    """Count `idf` once for every document with a chunk that holds the term (text or fields)."""
    holds = np.zeros(len(coverage), dtype=bool)  # a mask, not `np.unique`: no sort per term
    holds[view.document_numbers[rows]] = True
    holds[view.document_numbers[field_rows]] = True
    coverage[np.flatnonzero(holds)] += idf


def needed_document_coverage(known: Sequence[float], missing: Sequence[str]) -> float:
    """The idf mass one document must hold: `DOC_COVERAGE` of the query's mass, where every
    known word counts with its idf and every unknown content word with the mean idf of the
    known ones (words that ask how much or how long count nothing when unknown). With
    unknown words the share must be exceeded, not met: as many unknown topic words as known
    ones is not enough. No known word: nothing can qualify."""
    if not known:
        return float("inf")
    content = [term for term in missing if term not in QUESTION_FORM_STEMS]
    total = sum(known) + len(content) * (sum(known) / len(known))
    return DOC_COVERAGE * total + (1e-9 if content else 0.0)


def best_per_document(rows: Array, base: Array, view: CorpusView) -> Array:
    """Indexes (ascending) of each document's best `MAX_HITS_PER_FILE` candidates: by score,
    then place in the file."""
    documents = view.document_numbers[rows]
    order = np.lexsort((view.ordinals[rows], -base, documents))
    ordered = documents[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    starts = np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))
    keep = order[np.arange(len(order)) - starts < MAX_HITS_PER_FILE]
    return np.sort(keep)
