"""`ranking_select`: ranking the best-scored candidates only gives the page, filters and
reasons that ranking every candidate gives, for every engine, also when the judged prefix
runs out (policy denials and boosts reach past it) and has to grow."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from bootstrap import ledger_context
from ledger.domain.events import SearchRequest
from ledger.policy.policy_rules import NO_POLICY, PolicyRules, rules_from_bundle
from ledger.schemas.requests import DocumentIn
from ledger.storage.claims import DocumentClaims
from ledger.usecases import ranking_select
from ledger.usecases.context import Caller, UseCaseContext
from ledger.usecases.documents import ingest_batch
from ledger.usecases.ranking import ENGINES, SearchRun, rank
from ledger.writing.application import Ledger

ACME = Caller("acme", "svc-search", frozenset({"retrieval.write"}))
# Most files denied, a few late ones allowed and boosted: the walk goes far past its first batch.
DENY_MOST = rules_from_bundle(
    yaml.safe_load(
        """
version: select-test
rules:
  - {id: late-up, action: boost, factor: "3", match: {paths: ["late/**"]}}
  - {id: keep-late, action: allow, match: {paths: ["late/**"]}}
  - {id: deny-rest, action: deny, match: {paths: ["team/**"]}}
"""
    )
)


def _files() -> list[DocumentIn]:
    docs = []
    for i in range(110):  # 3 chunks each that hold "rotation": 330 candidates, past the first prefix
        folder = "late" if i % 37 == 5 else "team"
        text = "\n\n".join(
            f"## Part {part}\n\n" + "key rotation " * (1 + (i * 7 + part) % 5) + f"happens in unit {i}."
            for part in range(3)
        )
        docs.append(
            DocumentIn(path=f"{folder}/guide-{i:03d}.md", text=f"# Guide {i}\n\n{text}\n", source=folder)
        )
    return docs


@pytest.fixture
def ctx(ledger: Ledger) -> UseCaseContext:
    context = ledger_context(ledger)
    ingest_batch(context, DocumentClaims(ledger.store), ACME, _files())
    return context


def _pages(ctx: UseCaseContext, policy: PolicyRules) -> list[object]:
    assert ctx.search_index is not None
    position = ctx.search_index.refresh()
    pages: list[object] = []
    for engine in ENGINES:
        for top_k in (1, 3):
            for query in ("key rotation", "rotation unit 7"):
                request = SearchRequest(top_k=top_k, corpus_position=position)
                run: SearchRun = rank(ctx, "acme", query, request, policy, ACME.scopes, None, engine=engine)
                hits = [dataclasses.replace(hit, chunk=None) for hit in run.hits]  # type: ignore[arg-type]
                pages.append((dataclasses.replace(run, hits=tuple(hits)), [h.score_breakdown for h in hits]))
    return pages


@pytest.mark.parametrize("policy", [NO_POLICY, DENY_MOST], ids=["no-policy", "deny-most"])
def test_the_best_scored_candidates_give_the_page_all_of_them_give(
    ctx: UseCaseContext, policy: PolicyRules, monkeypatch: pytest.MonkeyPatch
) -> None:
    pruned = _pages(ctx, policy)
    monkeypatch.setattr(ranking_select, "PREFIX_FACTOR", 10**9)  # every candidate, the walk itself
    whole = _pages(ctx, policy)
    assert pruned == whole
    statuses = {page[0].status for page in whole}  # type: ignore[attr-defined,index]
    assert "ok" in statuses if policy is NO_POLICY else {"ok", "denied"} <= statuses
