"""The candidates `ranking._rank` judges: what `_top_ranked` would judge over all of them,
computed over the best-scored few.

`_top_ranked` walks the candidates in order of their score before policy (best first, then
row) in batches and stops at a batch end once no unjudged one could climb past; `@3`'s
`best_per_document` first keeps each file's best parts. Both look only at a prefix of that
order, so `select_ranked` hands them the candidates whose score is at least a threshold:
those form a prefix of the order (ties at the threshold included), and each file's best parts
among them are the prefix of its best parts among all. When the walk would pass the prefix's
end (policy denials, or boosts large enough that no score is safe), the walk starts again over
every candidate: the walk itself, one prefix's judging later (growing the prefix step by step
would judge the same candidates again at every step).
The answer is therefore the one the walk over every candidate gives, in the same batches,
while sorting and judging cost follows the page, not the number of matches (a word most files
hold: every file a candidate).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ledger.policy.policy_rules import PolicyRules
from ledger.usecases.ports import CorpusView
from ledger.usecases.ranking_steps import Ranked, _top_ranked
from ledger.usecases.ranking_v3 import best_per_document

Array = np.ndarray[Any, Any]
FIRST_BATCH = 64  # `_top_ranked`'s least first batch
PREFIX_FACTOR = 4  # candidates taken per judged one of the first batch (files' other parts, denials)
SAMPLE = 1024  # scores the threshold is read from


def select_ranked(
    view: CorpusView,
    policy: PolicyRules,
    scopes: frozenset[str],
    rows: Array,
    base: Array,
    window: int,
    per_document: bool,
) -> tuple[list[Ranked], Array]:
    """(`_top_ranked` over the candidates `rows` (ascending) scored `base`, each file's best
    parts only when `per_document`, the indexes into `rows` of the candidates kept, ascending).
    Of the ranked list, the first `window` and the first `window` allowed are those of the walk
    over every candidate (the rest of it may hold fewer judged ones)."""
    count = len(rows)
    size = PREFIX_FACTOR * max(window * 4, FIRST_BATCH)
    while True:
        if size >= count:
            kept = np.arange(count)
        else:
            kept = np.flatnonzero(base >= _threshold(base, size))
        complete = len(kept) == count
        if per_document:
            kept = kept[best_per_document(rows[kept], base[kept], view)]
        ranked = _top_ranked(view, policy, scopes, rows[kept].tolist(), base[kept], window, complete)
        if ranked is not None:
            return ranked, kept
        size = count


def _threshold(base: Array, size: int) -> float:
    """A score about `size` of `base` reach: the same rank in every `step`-th one (any
    threshold gives the same answer, `select_ranked`; this one costs a partition of at most
    `SAMPLE` scores, not of all)."""
    step = max(1, len(base) // SAMPLE)
    sample = base[::step]
    rank = min(len(sample), -(-size // step))  # ceil(size / step)
    return float(np.partition(sample, len(sample) - rank)[len(sample) - rank])
