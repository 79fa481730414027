"""`citeledger-bm25@10`: `@9` whose no-hit rule takes the first-ranked file when it holds at
least `NEAR_SHARE` (half) of the bar and two or more of the question's known words, wherever
in the file they stand. Scores, the change-log discount and pages are `@9`'s.

`@8` added the near file to the rule only when one of its passages held those words within 6
search terms of each other: evidence chosen on two tuning questions (round 10). On the six
corpora held out in round 12 it refused five answerable questions whose file holds
the words in different sections ("live event streams hang once the caching layer sits in
front of my web app": hishel's `docs/asgi.md`, 71% of the bar), while a whole file, or several
passages of one, may cover what no single passage does. Measured over every set then run
(`docs/benchmarks/search.md`, round 13), dropping the proximity requirement and asking for
two known words and half the bar leaves 0 false `no_hit` of 898 answerable questions (`@9`: 5)
and still answers `no_hit` to 81 of 124 unanswerable ones (`@9`: 91). Without the
two words, half the bar alone answered 39 more of those unanswerable questions (42 of 124).

Words, not characters: a question written without spaces (Chinese, Japanese) is searched as
character pairs and covered by single characters, any two of which a file of that language
holds, so the near-file rule does not apply to its characters ("社員食堂のメニュー", staff canteen menu,
found a near file in the golden corpus's Japanese leave policy). A `no_hit` whose first file was
near but held fewer than two known words carries the usual gaps. Whether a page is shown is
decided over `@8`'s order, as under `@9` (`in_at8_order`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ledger.usecases import ranking_v8, ranking_v9
from ledger.usecases.ranking_v8 import PageEvidence
from ledger.usecases.search_run import ENGINE_V9, ENGINE_V10

NEAR_SHARE = 0.5  # of the bar: the least the first-ranked file must hold to answer as a near file
MIN_WORDS = 2  # known question words a near file must hold
FUSED_ENGINES = (*ranking_v9.FUSED_ENGINES, ENGINE_V10)
Array = np.ndarray[Any, Any]
Ranked = ranking_v9.Ranked

__all__ = ["FUSED_ENGINES", "change_log_parts", "field_boosts", "gate_bar", "no_hit_evidence", "page_gaps"]


_as_v9 = ranking_v9.ran_as(ENGINE_V10, ENGINE_V9)


# The field boosts, the no-hit rule's evidence and the change-log discount: `@9`'s.
field_boosts = _as_v9(ranking_v9.field_boosts)
no_hit_evidence = _as_v9(ranking_v9.no_hit_evidence)
change_log_parts = _as_v9(ranking_v9.change_log_parts)


def gate_bar(engine: str, needed: float) -> float:
    """The mass that makes a document a candidate cover: under `@10` a near one (half the bar)."""
    return NEAR_SHARE * needed if engine == ENGINE_V10 else ranking_v9.gate_bar(engine, needed)


def page_gaps(
    engine: str, evidence: PageEvidence, window: int, at8: Callable[[], tuple[list[Ranked], Array]] | None
) -> list[str] | None:
    """None when the page may be shown, else the gaps a `no_hit` reports (empty: the usual
    ones). Under `@10`: shown when a document among the allowed candidates holds the bar, or
    the first of them holds `NEAR_SHARE` of it and `MIN_WORDS` known question words (over
    `@8`'s order); before it, `ranking_v9.page_gaps`."""
    if engine != ENGINE_V10:
        return ranking_v9.page_gaps(engine, evidence, window, at8)
    covering, document_mass, needed = evidence.coverage
    view = evidence.view
    if covering is None or document_mass is None:
        return None
    numbers = [
        int(view.document_numbers[item[3]]) for item in ranking_v9.in_at8_order(evidence.allowed, window, at8)
    ]
    if any(document_mass[n] >= needed - 1e-12 for n in numbers):
        return None
    if numbers and covering[numbers[0]]:
        # Words, not the single characters of text written without spaces (Chinese, Japanese):
        # those count for coverage only, and any two are common.
        held, _passages = ranking_v8.held_words(evidence.query, view, numbers[0], words_only=True)
        if len(held) >= MIN_WORDS:
            return None
    return []
