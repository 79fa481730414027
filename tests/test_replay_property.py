"""Property: on a ledger with many interleaved edits (documents ingested, edited and
removed, policy bundles published and replaced, searches in between), replaying any past
`citeledger-bm25` receipt (`@2`, and `@1` ones recorded as a ledger before `@2` did)
reproduces its `context_hash` byte for byte as of its own
position (`integrity: ok`), whatever later position it is compared against.

One ledger per store is built once (a seeded random history through the real use cases,
projected by the real runner); hypothesis samples the receipts, the comparison
positions, and whether the search index is first dropped and loaded back from its tables."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bootstrap import ledger_context
from ledger.domain.events import FilterApplied, SearchRequest
from ledger.schemas.requests import DocumentIn, PolicyBundleIn, SearchIn
from ledger.storage.claims import DocumentClaims
from ledger.usecases.context import Caller, UseCaseContext, record
from ledger.usecases.documents import ingest_document, remove_document
from ledger.usecases.policy import live_rules, publish_policy
from ledger.usecases.ranking import ENGINE, ENGINE_V1, rank
from ledger.usecases.replay import replay
from ledger.usecases.search import search
from ledger.writing.application import Ledger
from tests.conftest import fresh_config
from tests.factories import search_receipt

ACME = Caller("acme", "svc-history", frozenset({"retrieval.write", "replay.run"}))
FOLDERS = ("handbook", "hr", "finance", "eng")
WORDS = (
    "salary bands leave parental weeks expense receipts travel hotel night limit deploy window "
    "rollback incident escalation on-call rotation audit logs retention days review quarterly "
    "budget approval manager security access badge laptop"
).split()
OPERATIONS = 320  # after the first documents: edits, removals, bundles and searches
RECEIPTS_WANTED = 120


def _text(rng: random.Random) -> str:
    sections = []
    for _ in range(rng.randint(1, 4)):
        heading = " ".join(rng.sample(WORDS, 2)).title()
        body = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40)))
        sections.append(f"## {heading}\n\n{body.capitalize()}.\n")
    return f"# {rng.choice(WORDS).title()}\n\n" + "\n".join(sections)


def _bundle(rng: random.Random, serial: int) -> str:
    rules = []
    for index, folder in enumerate(rng.sample(FOLDERS, rng.randint(1, 3))):
        action = rng.choice(["deny", "boost", "downrank", "redact"])
        factor = {"boost": '    factor: "1.5"\n', "downrank": '    factor: "0.5"\n'}.get(action, "")
        match = f"    match: {{paths: ['{folder}/**']}}\n"
        rules.append(f"  - id: r{index}-{action}\n    action: {action}\n{factor}{match}")
    return f"version: history-{serial}\nlimits: {{max_top_k: {rng.randint(3, 8)}}}\nrules:\n" + "".join(rules)


@dataclass(frozen=True)
class History:
    ctx: UseCaseContext
    receipts: list[tuple[str, str, int, str]]  # (receipt id, context hash, corpus position, engine)
    size: int


def _build(ctx: UseCaseContext, seed: int) -> History:
    rng = random.Random(seed)
    claims = DocumentClaims(ctx.ledger.store)
    live: dict[str, str] = {}  # document id -> path
    receipts: list[tuple[str, str, int, str]] = []

    def ingest(path: str, document_id: str | None = None) -> None:
        doc = DocumentIn(path=path, text=_text(rng), source=path.split("/")[0], document_id=document_id)
        live[ingest_document(ctx, claims, ACME, doc).body["document_id"]] = path

    for serial in range(30):
        ingest(f"{rng.choice(FOLDERS)}/doc-{serial}.md")
    serial = 30
    for step in range(OPERATIONS):
        roll = rng.random()
        if roll < 0.15 or not live:
            ingest(f"{rng.choice(FOLDERS)}/doc-{serial}.md")
            serial += 1
        elif roll < 0.45:
            document_id = rng.choice(sorted(live))
            ingest(live[document_id], document_id)
        elif roll < 0.52:
            document_id = rng.choice(sorted(live))
            remove_document(ctx, claims, ACME, document_id, "withdrawn")
            del live[document_id]
        elif roll < 0.60:
            publish_policy(ctx, ACME, PolicyBundleIn(bundle_yaml=_bundle(rng, step)))
        else:
            task: dict[str, object] = {
                "query": " ".join(rng.sample(WORDS, rng.randint(1, 3))),
                "top_k": rng.randint(1, 8),
            }
            if rng.random() < 0.2:
                task["target_roots"] = [rng.choice(FOLDERS)]
            if rng.random() < 0.3:  # as a ledger before `@2` recorded it
                receipts.append(_search_v1(ctx, task))
                continue
            body = search(ctx, ACME, SearchIn.model_validate({"input": task})).body
            receipts.append((body["receipt_id"], body["context_hash"], body["corpus_position"], ENGINE))
    return History(ctx, receipts, ctx.ledger.size)


def _search_v1(ctx: UseCaseContext, task: dict[str, object]) -> tuple[str, str, int, str]:
    """The search use case as it ran under `citeledger-bm25@1`: the same steps, `@1`'s ranking
    and hash rule, the receipt recorded with `engine: citeledger-bm25@1`."""
    assert ctx.search_index is not None
    state = ctx.lookups.live_policy("acme")
    rules = live_rules(state)
    roots = list(task.get("target_roots", []))  # type: ignore[call-overload]
    request = SearchRequest(
        target_roots=roots,
        top_k=min(int(task["top_k"]), rules.max_top_k),
        corpus_position=ctx.search_index.refresh(),
    )
    query = str(task["query"])
    run = rank(ctx, "acme", query, request, rules, ACME.scopes, None, engine=ENGINE_V1)
    filters = [FilterApplied(rule_id=r, chunk_id=c, action=a) for r, c, a in run.filters_applied]  # type: ignore[arg-type]
    receipt = search_receipt(
        ctx, ACME, query, run, request, ENGINE_V1, state, filters_applied=filters, withheld=run.withheld
    )
    record(ctx, ACME, [receipt], lambda events: {})
    return receipt.receipt_id, run.context_hash, request.corpus_position, ENGINE_V1


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def history(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[History]:
    root: Path = tmp_path_factory.mktemp(f"history-{request.param}")
    with fresh_config(str(request.param), root) as config:
        ledger = Ledger(config)
        try:
            yield _build(ledger_context(ledger), seed=20261124)
        finally:
            ledger.close()


def test_the_history_is_rich_enough(history: History) -> None:
    """The property below is only as good as the history it samples."""
    assert len(history.receipts) >= RECEIPTS_WANTED
    hashes = {context_hash for _, context_hash, _, _ in history.receipts}
    positions = {position for _, _, position, _ in history.receipts}
    engines = [engine for *_, engine in history.receipts]
    assert engines.count(ENGINE_V1) >= 20 and engines.count(ENGINE) >= 60
    assert len(hashes) > RECEIPTS_WANTED * 0.8 and len(positions) == len(history.receipts)
    types = {e.type for e in (history.ctx.ledger.get(p) for p in range(1, history.size + 1)) if e is not None}
    assert {"DocumentIngested", "DocumentRemoved", "PolicyBundlePublished", "RetrievalRecorded"} <= types


@settings(max_examples=50, deadline=None, derandomize=True)
@given(data=st.data())
def test_replay_reproduces_every_past_receipt_byte_for_byte(history: History, data: st.DataObject) -> None:
    receipt_id, context_hash, corpus_position, engine = data.draw(
        st.sampled_from(history.receipts), label="receipt"
    )
    at_position = data.draw(
        st.one_of(st.none(), st.integers(min_value=corpus_position, max_value=history.size)),
        label="at_position",
    )
    if data.draw(st.booleans(), label="cold index"):
        # As a new process would: the index loaded back from its tables, not the one built live.
        history.ctx.search_index.forget()  # type: ignore[union-attr]
    body = replay(history.ctx, ACME, receipt_id, at_position=at_position).body
    assert body["engine"] == engine
    assert body["integrity"] == "ok", (receipt_id, body["integrity_reason"])
    original = body["diff"]["as_of_original"]
    assert original["context_hash"] == {"original": context_hash, "replay": context_hash, "changed": False}
    assert original["selected_entries"]["added"] == [] and original["selected_entries"]["removed"] == []
    assert original["filters_applied"] == {"added": [], "removed": []}
    assert body["replay_receipt_id"] and body["corpus_position"] == corpus_position
