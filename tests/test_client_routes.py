"""Client methods against routes other helpers added, on the real server on loopback
(SQLite and PostgreSQL): replay (POST /v1/receipts/{id}/replay)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from client import AsyncClient, Client, NotFound, RetrievalReceipt
from ledger.config import LedgerConfig
from tests.api_support import DOC, LoopbackServer, api_config, make_tokens
from tests.client_support import retrieval

FAST = {"backoff_base_s": 0.01, "backoff_max_s": 0.05, "drain_interval_s": None}


def test_replay_through_the_client(ledger_config: LedgerConfig, tmp_path: Path) -> None:
    config = api_config(ledger_config)
    token = make_tokens(config)["admin"]
    with LoopbackServer(config) as server, Client(server.base_url, token, **FAST) as ledger:
        doc = ledger.ingest_document({"path": "a.md", "text": DOC}).model_dump()
        receipt = ledger.record_retrieval(retrieval(doc))
        assert isinstance(receipt, RetrievalReceipt)
        answer = ledger.replay(receipt.receipt_id, idempotency_key="replay-1")
        assert answer["original_receipt_id"] == receipt.receipt_id
        assert answer["integrity"] == "not_applicable"  # an external engine's receipt
        assert answer["replay_receipt_id"] and answer["dedup"] is False
        again = ledger.replay(receipt.receipt_id, idempotency_key="replay-1")
        assert again["dedup"] is True and again["replay_receipt_id"] == answer["replay_receipt_id"]
        shown = httpx.get(
            f"{server.base_url}/v1/receipts/{receipt.receipt_id}",
            headers={"Authorization": f"Bearer {token}"},
        ).json()
        assert answer["replay_receipt_id"] in str(shown["replay_chain"])
        try:
            ledger.replay("no-such-receipt")
            raise AssertionError("an unknown receipt must be refused")
        except NotFound as missing:
            assert missing.status == 404 and missing.retryable is False

        async def replay_async() -> dict[str, object]:
            async with AsyncClient(server.base_url, token, **FAST) as aledger:
                return await aledger.replay(receipt.receipt_id)

        assert asyncio.run(replay_async())["original_receipt_id"] == receipt.receipt_id
