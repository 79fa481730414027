"""A bundle's path patterns judged ahead of searches: when a bundle is published (every
live document path of its tenant) and when documents are ingested (their paths under the
tenant's live bundle). A search then finds each path's answer remembered (`RuleMatcher`)
instead of paying for it the first time it meets the path. Best effort and bounded in time:
a path not reached here is judged when a search first needs it, with the same answer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

import numpy as np

from ledger.deadline import Deadline
from ledger.policy.path_glob import split_path
from ledger.policy.policy_rules import PolicyRules
from ledger.usecases.context import UseCaseContext

log = logging.getLogger("citeledger.policy")

WARM_BUDGET_S = 2.0


def warm_paths(rules: PolicyRules, paths: Iterable[str], budget_s: float = WARM_BUDGET_S) -> int:
    """Judge `paths` under `rules` until the budget is spent; how many were judged."""
    if not rules.rules:
        return 0
    started, judged = time.monotonic(), 0
    for path in paths:
        if time.monotonic() - started > budget_s:
            break
        rules.matcher.rules_matching(path, split_path(path))
        judged += 1
    return judged


def tenant_paths(ctx: UseCaseContext, tenant_id: str) -> list[str]:
    """The paths of the tenant's live documents (one per document), from the search index."""
    index = ctx.search_index
    if index is None:
        return []
    try:
        view = index.view(tenant_id, index.refresh())
    except LookupError:
        return []
    live = np.nonzero(np.asarray(view.live, dtype=bool))[0]
    if len(live) == 0:
        return []
    _, first = np.unique(view.document_numbers[live], return_index=True)
    return sorted({view.chunk(int(row)).path for row in live[first]})


def warm_budget(deadline: Deadline | None) -> float:
    # A published bundle's answer is owed (its write claimed the deadline): keep it prompt.
    if deadline is None:
        return WARM_BUDGET_S
    return max(0.0, min(WARM_BUDGET_S, deadline.remaining() / 2))


def warm_published(
    ctx: UseCaseContext, tenant_id: str, rules: PolicyRules, deadline: Deadline | None = None
) -> None:
    started = time.monotonic()
    try:
        paths = tenant_paths(ctx, tenant_id)
        judged = warm_paths(rules, paths, warm_budget(deadline))
    except Exception:
        log.warning("policy paths not judged ahead tenant=%s", tenant_id, exc_info=True)
        return
    log.info(
        "policy paths judged tenant=%s judged=%d of=%d ms=%.0f",
        tenant_id,
        judged,
        len(paths),
        (time.monotonic() - started) * 1000,
    )
