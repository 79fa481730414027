"""The golden queries: the ledger's search (through the ingest and search use cases, on a
real store) must reach the committed baseline, must not fall below plain bm25s over whole
files on the same corpus in the same run (MRR above it), must never answer `no_hit` to a
question the corpus answers (no_hit precision 1), and answers `no_hit` to all absent queries
but one (no_hit recall 0.9; `@3` had 1.0). The one is "parking spaces at the Berlin office": two
words one file holds ("Berlin", "office") and two it never uses, the shape of an answerable
question worded unlike its answer ("expand acronyms with a hover title" on Python-Markdown's
docs, where `@3` said `no_hit`); `@4`'s rule answers both, because a false `no_hit` costs
more than a weak citation (issue 32; docs/benchmarks/search.md)."""

from __future__ import annotations

import json

from bootstrap import ledger_context
from ledger.schemas.requests import SearchIn
from ledger.usecases.context import Caller
from ledger.usecases.search import search
from ledger.writing.application import Ledger
from tests.golden_support import (
    BASELINE,
    WholeFileBm25s,
    corpus_files,
    distinct_paths,
    ingest_corpus,
    load_queries,
    measure,
)

EPSILON = 1e-9


def test_golden_queries(ledger: Ledger) -> None:
    ctx = ledger_context(ledger)
    caller = Caller("acme", "svc-golden", frozenset({"retrieval.write"}))
    files = corpus_files()
    assert len(files) >= 200
    ingest_corpus(ctx, caller, files)
    queries = load_queries()
    assert any(q.absent for q in queries) and any(not q.absent for q in queries)

    def ledger_search(query: str) -> tuple[str, list[str]]:
        body = search(ctx, caller, SearchIn.model_validate({"input": {"query": query, "top_k": 10}})).body
        return body["status"], distinct_paths(body["output"]["citations"])

    ours = measure(queries, ledger_search)
    bare_index = WholeFileBm25s(files)
    bare = measure(queries, lambda query: ("ok", bare_index.search(query, 10)))
    baseline = json.loads(BASELINE.read_text())
    report = f"ledger {ours}\nbm25s whole files {bare}"
    assert ours.absent_no_hit >= ours.absent_total - 1, report
    # No false no_hit: an answerable question with a word the corpus never uses answers.
    assert ours.present_no_hit == 0 and ours.no_hit_precision == 1.0, report
    assert ours.recall_at_5 >= baseline["recall_at_5"] - EPSILON, report
    assert ours.mrr >= baseline["mrr"] - EPSILON, report
    assert ours.recall_at_5 >= bare.recall_at_5 - EPSILON, report
    # Above whole-file bm25s, not level with it (unless both are perfect).
    assert ours.mrr > bare.mrr or ours.mrr == 1.0, report
