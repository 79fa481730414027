"""Property: on a ledger with many interleaved edits (documents ingested, edited and
removed, policy bundles published and replaced, searches in between), replaying any past
`citeledger-bm25` receipt reproduces its `context_hash` byte for byte as of its own
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

from ledger.application import Ledger
from ledger.claims import DocumentClaims
from ledger.usecases.commands import DocumentIn, PolicyBundleIn, SearchIn
from ledger.usecases.context import Caller, UseCaseContext
from ledger.usecases.documents import ingest_document, remove_document
from ledger.usecases.policy import publish_policy
from ledger.usecases.ranking import ENGINE
from ledger.usecases.replay import replay
from ledger.usecases.search import search
from projections.lookups import ledger_context
from tests.conftest import fresh_config

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
    receipts: list[tuple[str, str, int]]  # (receipt id, context hash, corpus position)
    size: int


def _build(ctx: UseCaseContext, seed: int) -> History:
    rng = random.Random(seed)
    claims = DocumentClaims(ctx.ledger.store)
    live: dict[str, str] = {}  # document id -> path
    receipts: list[tuple[str, str, int]] = []

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
            body = search(ctx, ACME, SearchIn.model_validate({"input": task})).body
            receipts.append((body["receipt_id"], body["context_hash"], body["corpus_position"]))
    return History(ctx, receipts, ctx.ledger.size)


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
    hashes = {context_hash for _, context_hash, _ in history.receipts}
    positions = {position for _, _, position in history.receipts}
    assert len(hashes) > RECEIPTS_WANTED * 0.8 and len(positions) == len(history.receipts)
    types = {e.type for e in (history.ctx.ledger.get(p) for p in range(1, history.size + 1)) if e is not None}
    assert {"DocumentIngested", "DocumentRemoved", "PolicyBundlePublished", "RetrievalRecorded"} <= types


@settings(max_examples=50, deadline=None, derandomize=True)
@given(data=st.data())
def test_replay_reproduces_every_past_receipt_byte_for_byte(history: History, data: st.DataObject) -> None:
    receipt_id, context_hash, corpus_position = data.draw(st.sampled_from(history.receipts), label="receipt")
    at_position = data.draw(
        st.one_of(st.none(), st.integers(min_value=corpus_position, max_value=history.size)),
        label="at_position",
    )
    if data.draw(st.booleans(), label="cold index"):
        # As a new process would: the index loaded back from its tables, not the one built live.
        history.ctx.search_index.forget()  # type: ignore[union-attr]
    body = replay(history.ctx, ACME, receipt_id, at_position=at_position).body
    assert body["engine"] == ENGINE
    assert body["integrity"] == "ok", (receipt_id, body["integrity_reason"])
    original = body["diff"]["as_of_original"]
    assert original["context_hash"] == {"original": context_hash, "replay": context_hash, "changed": False}
    assert original["selected_entries"]["added"] == [] and original["selected_entries"]["removed"] == []
    assert original["filters_applied"] == {"added": [], "removed": []}
    assert body["replay_receipt_id"] and body["corpus_position"] == corpus_position
