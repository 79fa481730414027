"""The golden set (tests/golden/queries.yaml over tests/corpus/) and its measures, shared
by tests/test_golden.py and scripts/bench_search.py."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bm25s
import yaml

from ledger.retrieval.search_text import STOPWORDS, split_words, stem_word
from ledger.schemas.requests import DocumentIn
from ledger.storage.claims import DocumentClaims
from ledger.usecases.context import Caller, UseCaseContext
from ledger.usecases.documents import ingest_document

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
QUERIES = HERE / "golden" / "queries.yaml"
BASELINE = HERE / "golden" / "baseline.json"
CUTOFF = 5


@dataclass(frozen=True)
class GoldenQuery:
    query: str
    expect: tuple[str, ...]
    absent: bool


@dataclass(frozen=True)
class Quality:
    recall_at_5: float
    mrr: float
    absent_no_hit: int
    absent_total: int
    misses: tuple[str, ...]
    present_no_hit: int = 0  # answerable questions answered `no_hit` (false no_hit)

    @property
    def no_hit_precision(self) -> float:
        """Of the questions answered `no_hit`, the share the corpus does not answer."""
        said = self.absent_no_hit + self.present_no_hit
        return self.absent_no_hit / said if said else 1.0

    @property
    def no_hit_recall(self) -> float:
        """Of the questions the corpus does not answer, the share answered `no_hit`."""
        return self.absent_no_hit / self.absent_total if self.absent_total else 1.0


def load_queries() -> list[GoldenQuery]:
    raw = yaml.safe_load(QUERIES.read_text(encoding="utf-8"))["queries"]
    return [GoldenQuery(q["query"], tuple(q.get("expect", [])), bool(q.get("absent", False))) for q in raw]


def corpus_files(root: Path = CORPUS) -> dict[str, str]:
    return {
        str(path.relative_to(root)): path.read_text(encoding="utf-8") for path in sorted(root.rglob("*.md"))
    }


def ingest_corpus(ctx: UseCaseContext, caller: Caller, files: dict[str, str]) -> None:
    """Every file through the ingest use case: source = top folder, path = relative path."""
    claims = DocumentClaims(ctx.ledger.store)
    for path, text in files.items():
        ingest_document(ctx, claims, caller, DocumentIn(path=path, text=text, source=path.split("/")[0]))


def measure(queries: Sequence[GoldenQuery], ranked_paths: Callable[[str], tuple[str, list[str]]]) -> Quality:
    """`ranked_paths(query)` -> (status, distinct paths best first)."""
    recall, reciprocal, present, absent_ok, absent_total, present_no_hit = 0.0, 0.0, 0, 0, 0, 0
    misses = []
    for item in queries:
        status, paths = ranked_paths(item.query)
        if item.absent:
            absent_total += 1
            absent_ok += status == "no_hit"
            if status != "no_hit":
                misses.append(f"absent answered: {item.query} -> {paths[:3]}")
            continue
        present += 1
        present_no_hit += status == "no_hit"
        top = paths[:CUTOFF]
        found = [path for path in item.expect if path in top]
        recall += len(found) / min(len(item.expect), CUTOFF)
        rank = next((i + 1 for i, path in enumerate(paths) if path in item.expect), None)
        reciprocal += 1 / rank if rank else 0.0
        if not found:
            misses.append(f"missed: {item.query} -> {top[:3]}")
    return Quality(
        recall / present, reciprocal / present, absent_ok, absent_total, tuple(misses), present_no_hit
    )


def bm25s_tokenizer() -> bm25s.tokenization.Tokenizer:
    """bm25s's tokenizer with our splitter (CJK bigrams), stopwords and stemmer."""
    return bm25s.tokenization.Tokenizer(
        lower=False, splitter=split_words, stopwords=sorted(STOPWORDS), stemmer=stem_word
    )


class WholeFileBm25s:
    """Plain bm25s over whole files (no chunks, no boosts, no no-hit rule): the bar to beat."""

    def __init__(self, files: dict[str, str]) -> None:
        self.paths = list(files)
        self.tokenizer = bm25s_tokenizer()
        tokens = self.tokenizer.tokenize(list(files.values()), return_as="tuple", show_progress=False)
        self.model = bm25s.BM25(method="lucene", k1=1.2, b=0.75)
        self.model.index(tokens, show_progress=False)

    def search(self, query: str, k: int = CUTOFF) -> list[str]:
        ids = self.tokenizer.tokenize([query], return_as="ids", update_vocab=False, show_progress=False)
        if not ids[0]:
            return []
        scores = self.model.get_scores(ids[0])
        order = sorted(range(len(scores)), key=lambda i: (-float(scores[i]), self.paths[i]))
        return [self.paths[i] for i in order[:k] if scores[i] > 0]


def distinct_paths(citations: Sequence[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(c["path"] for c in citations))
