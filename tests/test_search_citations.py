"""Citations of a search (`citeledger-bm25@2`): one per file, its snippets merged into
`parts`, the list in descending score order (ties by path)."""

from __future__ import annotations

from decimal import Decimal

from bootstrap import ledger_context
from ledger.writing.application import Ledger
from tests.test_search import ACME, _ingest, _search, corpus_context

FILLER = " ".join(f"filler{i}" for i in range(40))


def test_a_files_snippets_are_one_citation_and_citations_are_in_score_order(ledger: Ledger) -> None:
    # Two sections of one file match: the first strongly, the second weakly (below b.md).
    guide_a = (
        "# Guide A\n\n## Setup\n\nCalibration of the widget: widget calibration steps, widget "
        "calibration checks.\n\n## Notes\n\nA widget calibration note appears once among " + FILLER + ".\n"
    )
    ctx = corpus_context(
        ledger,
        {
            "guides/a.md": guide_a,
            "guides/b.md": "# Guide B\n\nWidget calibration and widget care.\n",
            "guides/c.md": "# Guide C\n\nUnrelated words about lunch.\n",
        },
    )
    body = _search(ctx, ACME, "widget calibration", top_k=5)
    assert body["status"] == "ok"
    citations = body["output"]["citations"]
    paths = [c["path"] for c in citations]
    assert len(paths) == len(set(paths)) and set(paths) == {"guides/a.md", "guides/b.md"}
    scores = [Decimal(c["score"]) for c in citations]
    assert scores == sorted(scores, reverse=True)
    [merged] = [c for c in citations if c["path"] == "guides/a.md"]
    parts = merged["parts"]
    assert len(parts) == 2
    # Reading order, each part with its own span, score and reason; the citation is its best.
    assert parts[0]["locator"]["start_line"] < parts[1]["locator"]["start_line"]
    assert merged["score"] == max(parts, key=lambda p: Decimal(p["score"]))["score"]
    assert merged["chunk_id"] == parts[0]["chunk_id"] and Decimal(parts[1]["score"]) < scores[1]
    assert all(p["snippet_span"] and p["reason"]["score_breakdown"] for p in parts)
    assert len({p["citation_id"] for p in parts}) == 2


def test_top_k_counts_citations_not_chunks(ledger: Ledger) -> None:
    ctx = ledger_context(ledger)
    for name in ("a", "b", "c"):
        _ingest(
            ctx,
            ACME,
            f"guides/{name}.md",
            f"# Guide {name}\n\n## One\n\nWidget calibration.\n\n## Two\n\nWidget calibration again.\n",
        )
    citations = _search(ctx, ACME, "widget calibration", top_k=2)["output"]["citations"]
    assert len(citations) == 2 and all(len(c["parts"]) == 2 for c in citations)
