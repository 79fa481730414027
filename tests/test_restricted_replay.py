"""Replay and the built-in restricted rule (`ledger.usecases.visibility`), on SQLite and
PostgreSQL: a `citeledger-bm25` receipt recorded before the rule (no `withheld` field; its
ranking saw restricted chunks whatever the scopes) still replays byte for byte, and its
replay shows a caller without the scope nothing of them."""

from __future__ import annotations

from typing import Any

from bootstrap import ledger_context
from ledger.domain.events import SearchRequest
from ledger.domain.payloads import PAYLOAD_MODELS, payload_to_json
from ledger.policy.policy_rules import NO_POLICY
from ledger.tlog.canonical import canonical_json
from ledger.usecases.context import Caller, record
from ledger.usecases.ranking import ENGINE, rank
from ledger.usecases.replay import replay
from ledger.writing.application import Ledger
from tests.factories import search_receipt
from tests.test_search import _ingest

NO_SCOPE = Caller("acme", "svc-replay", frozenset({"retrieval.write", "replay.run"}))
SCOPED = Caller("acme", "svc-audit", frozenset({"replay.run", "knowledge.restricted.read"}))
SECRET_PATH = "security/acquisition-budget.md"
QUERY = "acquisition budget"


def test_a_receipt_recorded_before_the_rule_replays_byte_for_byte(ledger: Ledger) -> None:
    ctx = ledger_context(ledger)
    _ingest(ctx, NO_SCOPE, "finance/acquisition.md", "# Acquisition\n\nAn acquisition needs a budget owner.")
    _ingest(ctx, NO_SCOPE, "finance/budget.md", "# Budget\n\nThe acquisition budget is reviewed in March.")
    secret = _ingest(
        ctx,
        NO_SCOPE,
        SECRET_PATH,
        "# Acquisition budget\n\nThe Nightjar acquisition budget is 40 million.",
        sensitivity="restricted",
    )
    assert ctx.search_index is not None
    request = SearchRequest(top_k=3, corpus_position=ctx.search_index.refresh())
    # What a search without the scope recorded before the rule: the restricted chunk ranked.
    before = rank(ctx, "acme", QUERY, request, NO_POLICY, NO_SCOPE.scopes, None, withhold_restricted=False)
    assert SECRET_PATH in [hit.path for hit in before.hits] and before.withheld is None
    now = rank(ctx, "acme", QUERY, request, NO_POLICY, NO_SCOPE.scopes, None)
    assert SECRET_PATH not in [hit.path for hit in now.hits] and now.withheld == len(secret["chunks"])
    assert now.context_hash != before.context_hash  # the rule does change what this search returns
    legacy = search_receipt(ctx, NO_SCOPE, QUERY, before, request, ENGINE)  # no `withheld`
    # The new optional field leaves the signed JSON of such a receipt as it was.
    signed = payload_to_json("RetrievalRecorded", legacy)
    assert "withheld" not in signed
    assert canonical_json(
        payload_to_json("RetrievalRecorded", PAYLOAD_MODELS["RetrievalRecorded"].model_validate(signed))
    ) == canonical_json(signed)
    record(ctx, NO_SCOPE, [legacy], lambda events: {})

    body = replay(ctx, NO_SCOPE, legacy.receipt_id).body
    assert body["integrity"] == "ok"
    original = body["diff"]["as_of_original"]
    assert original["context_hash"]["changed"] is False
    shown = str(body)
    assert [
        t
        for t in (SECRET_PATH, secret["document_id"], *(c["chunk_id"] for c in secret["chunks"]))
        if t in shown
    ] == []
    assert original["selected_entries"]["common"] == len(before.hits) - 1
    # The replay receipt is recorded under the rule its original was: no `withheld` either.
    event = ledger.get(body["replay_receipt"]["position"])
    assert event is not None and "withheld" not in event.payload
    # A caller with the scope sees the whole diff.
    scoped: dict[str, Any] = replay(ctx, SCOPED, legacy.receipt_id).body
    assert scoped["integrity"] == "ok" and SECRET_PATH in str(scoped)
    assert scoped["diff"]["as_of_original"]["selected_entries"]["common"] == len(before.hits)
