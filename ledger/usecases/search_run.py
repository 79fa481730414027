"""What one ranking decided (`SearchRun`, its `SearchHit`s), the engines that can rank, and the
context hash a receipt commits to (each engine's rule).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ledger.domain.events import FilterApplied
from ledger.tlog.canonical import canonical_json
from ledger.usecases.ports import ChunkState

ENGINE_V1 = "citeledger-bm25@1"
ENGINE_V2 = "citeledger-bm25@2"
ENGINE_V3 = "citeledger-bm25@3"
ENGINE_V4 = "citeledger-bm25@4"
ENGINE_V5 = "citeledger-bm25@5"
ENGINE_V6 = "citeledger-bm25@6"
ENGINE_V7 = "citeledger-bm25@7"
ENGINE_V8 = "citeledger-bm25@8"
ENGINE_V9 = "citeledger-bm25@9"
ENGINE_V10 = "citeledger-bm25@10"
ENGINE = ENGINE_V10  # what a live search runs and records
# What a replay can re-run, each under its own rules.
ENGINES = (
    *(ENGINE_V1, ENGINE_V2, ENGINE_V3, ENGINE_V4, ENGINE_V5, ENGINE_V6, ENGINE_V7, ENGINE_V8, ENGINE_V9),
    ENGINE_V10,
)
SearchStatus = Literal["ok", "no_hit", "denied", "timeout", "error"]


@dataclass(frozen=True)
class SearchHit:
    document_id: str
    version_id: str
    chunk_id: str
    path: str
    start_line: int
    end_line: int
    heading_path: str | None
    score: str
    score_breakdown: tuple[tuple[str, str], ...]  # (component, decimal value)
    term_scores: tuple[tuple[str, str], ...]  # (query term, its BM25 contribution)
    snippet: str  # empty when a policy redacts it
    snippet_span: tuple[int, int] | None
    sensitivity: str
    policy_rules: tuple[tuple[str, str], ...]  # (rule_id, action) that took effect
    chunk: ChunkState = field(compare=False, repr=False)

    def commitment_material(self) -> list[Any]:
        where, snippet = self._where(), self._snippet_material()
        return [*where, self.score, [list(c) for c in self.score_breakdown], *snippet]

    def context_material(self) -> list[Any]:
        """What `@2`'s context hash commits to: the cited text and where it is, no score."""
        return [*self._where(), *self._snippet_material()]

    def _where(self) -> list[Any]:
        return [self.chunk_id, self.document_id, self.path, self.start_line, self.end_line]

    def _snippet_material(self) -> list[Any]:
        span = list(self.snippet_span) if self.snippet_span else None
        return [span, hashlib.sha256(self.snippet.encode("utf-8")).hexdigest()]


@dataclass(frozen=True)
class SearchRun:
    status: SearchStatus
    position: int
    hits: tuple[SearchHit, ...]
    filters_applied: tuple[tuple[str, str, str], ...]  # (rule_id, chunk_id, action)
    gaps: tuple[str, ...]
    context_hash: str
    files_scanned: int
    denied_rule: str | None = None
    # Live chunk versions the caller's scopes may not see, left out before ranking (None: the
    # run ranked without the built-in rule, as receipts recorded before it did).
    withheld: int | None = None
    # Chunk ids of restricted chunks among the hits and filters: what an answer to a caller
    # without the scope must leave out (a replay's diff; `ledger.usecases.visibility`).
    restricted_ids: frozenset[str] = frozenset()

    @property
    def metrics(self) -> dict[str, int]:
        return {"files_scanned": self.files_scanned, "hits": len(self.hits)}

    def receipt_fields(self) -> dict[str, Any]:
        """What a `RetrievalRecorded` takes from the run as it is: its outcome and filters."""
        filters = [FilterApplied(rule_id=r, chunk_id=c, action=a) for r, c, a in self.filters_applied]  # type: ignore[arg-type]
        return {
            "filters_applied": filters,
            "context_hash": self.context_hash,
            "status": self.status,
            "withheld": self.withheld,
        }


def context_hash_of(
    status: str, hits: Sequence[SearchHit], filters: Sequence[tuple[str, str, str]], engine: str = ENGINE
) -> str:
    """sha256 over the canonical JSON of what the search decided: never receipt or citation ids,
    timestamps or ciphertext (a snippet enters as the sha256 of its text).

    `@2` commits to the context the model was given — which chunks, in which order, with
    which text (span and snippet hash) — and the status: not scores, which move whenever any
    document of the corpus changes (a replay reports score movement apart). `@1` also
    committed to scores, score breakdowns and filters; its receipts keep that rule."""
    if engine == ENGINE_V1:
        body: dict[str, Any] = {
            "engine": ENGINE_V1,
            "status": status,
            "hits": [hit.commitment_material() for hit in hits],
            "filters_applied": [list(f) for f in filters],
        }
    else:
        body = {"engine": engine, "status": status, "context": [hit.context_material() for hit in hits]}
    return hashlib.sha256(canonical_json(body)).hexdigest()


def empty_run(
    status: SearchStatus,
    position: int,
    gaps: Sequence[str] = (),
    denied_rule: str | None = None,
    files: int = 0,
    filters: Sequence[tuple[str, str, str]] = (),
) -> SearchRun:
    return SearchRun(
        status=status,
        position=position,
        hits=(),
        filters_applied=tuple(filters),
        gaps=tuple(gaps),
        context_hash=context_hash_of(status, [], filters),
        files_scanned=files,
        denied_rule=denied_rule,
    )
