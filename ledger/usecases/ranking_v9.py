"""`citeledger-bm25@9`: `@8` whose change logs weigh `CHANGE_LOG_WEIGHT` (0.5) of their score,
unless the question asks about changes. Only the order of the page changes: whether a page is
shown is `@8`'s decision over `@8`'s order (`page_gaps`; `@8`'s rule reads its first-ranked file).

A change log is a list of unrelated entries (`ledger.retrieval.change_logs`: a CHANGELOG,
CHANGES, HISTORY or NEWS file, release notes, an upgrading or migration guide). One of its
entries that holds a question's words says the project once changed that, not how to do it,
yet it is a short passage that holds them closely, which is what the passage part of `@4`'s
fusion rewards. Whole-file BM25 keeps such files down only by accident of their length. On the
tuning sets (`docs/benchmarks/search.md`, round 12) change logs stood above the file that
answers in half of the questions `@8` ranked below whole-file bm25s (alembic, attrs, copier,
hatch, marshmallow, mkdocstrings, nox, trio, towncrier); halving them moved 6 sets below
bm25s to 2. A question that names a version number or a word of releases and upgrades
(`asks_about_changes`) is one a change log answers ("when was python 3.7 dropped"), so its
change logs keep their weight.

Each citation of a discounted change log names the discount as its own part of `reason`,
`change_log` (negative: the parts still sum to the score, before any policy factor).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Concatenate, ParamSpec, TypeVar

import numpy as np

from ledger.retrieval.change_logs import asks_about_changes
from ledger.usecases import ranking_v8
from ledger.usecases.ports import CorpusView
from ledger.usecases.ranking_v8 import PageEvidence
from ledger.usecases.search_run import ENGINE_V8, ENGINE_V9

CHANGE_LOG_WEIGHT = 0.5  # a change log's share of its score when the question is not about changes
FUSED_ENGINES = (*ranking_v8.FUSED_ENGINES, ENGINE_V9)
Array = np.ndarray[Any, Any]
P = ParamSpec("P")
R = TypeVar("R")
Ranked = ranking_v8.Ranked

__all__ = ["FUSED_ENGINES", "change_log_parts", "field_boosts", "gate_bar", "no_hit_evidence", "page_gaps"]


def ran_as(
    engine: str, older: str
) -> Callable[[Callable[Concatenate[str, P], R]], Callable[Concatenate[str, P], R]]:
    """What makes an older engine's `step` (which takes the engine first) run `engine` as `older`."""

    def as_older(step: Callable[Concatenate[str, P], R]) -> Callable[Concatenate[str, P], R]:
        def run(name: str, /, *args: P.args, **kwargs: P.kwargs) -> R:
            return step(older if name == engine else name, *args, **kwargs)

        return run

    return as_older


_as_v8 = ran_as(ENGINE_V9, ENGINE_V8)


# The field boosts, the no-hit rule's evidence and bar, and whether the page is shown: `@8`'s.
field_boosts = _as_v8(ranking_v8.field_boosts)
no_hit_evidence = _as_v8(ranking_v8.no_hit_evidence)
gate_bar = _as_v8(ranking_v8.gate_bar)
gate_gaps = _as_v8(ranking_v8.gate_gaps)


def page_gaps(
    engine: str, evidence: PageEvidence, window: int, at8: Callable[[], tuple[list[Ranked], Array]] | None
) -> list[str] | None:
    """`gate_gaps` over `@8`'s order: None when the page may be shown, else the `no_hit`'s gaps.
    `at8` (given when a change log was discounted) ranks the candidates as `@8` does; the rule
    reads as many of them as the allowed ones could hold (the policy window, `window`). `@8`'s
    rule reads the first-ranked file, and the discount decides the order of a page, never
    whether it is shown."""
    return gate_gaps(engine, replace(evidence, allowed=in_at8_order(evidence.allowed, window, at8)))


def in_at8_order(
    allowed: Sequence[Ranked], window: int, at8: Callable[[], tuple[list[Ranked], Array]] | None
) -> Sequence[Ranked]:
    """The allowed candidates the no-hit rule reads: `allowed`, or as `at8` ranks them."""
    if at8 is None:
        return allowed
    ranked, _kept = at8()
    return [item for item in ranked if not item[4].denied][:window]


def change_log_parts(engine: str, view: CorpusView, query: str, rows: Array, base: Array) -> Array | None:
    """The `change_log` part of each candidate's score (`rows`, scored `base` before it): under
    `@9`, minus (1 - `CHANGE_LOG_WEIGHT`) of the score of a change log's chunk, 0 for other
    chunks, when the question does not ask about changes; None when nothing is discounted."""
    if engine != ENGINE_V9:
        return None
    logs = np.asarray(view.change_logs)[rows]
    if not logs.any() or asks_about_changes(query):
        return None
    return np.where(logs, (CHANGE_LOG_WEIGHT - 1.0) * base, 0.0)
