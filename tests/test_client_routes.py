"""Client methods against routes other helpers added, on the real server on loopback
(SQLite and PostgreSQL): replay (POST /v1/receipts/{id}/replay) and search (POST /v1/search)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic import ValidationError

from client import AsyncClient, Client, NotFound, RetrievalReceipt, SearchAnswer
from ledger.config import LedgerConfig
from tests import loopback_http
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
        shown = loopback_http.get(
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


def test_search_through_the_client(ledger_config: LedgerConfig) -> None:
    config = api_config(ledger_config)
    token = make_tokens(config)["admin"]
    with LoopbackServer(config) as server, Client(server.base_url, token, **FAST) as ledger:
        doc = ledger.ingest_document({"path": "handbook/retention.md", "text": DOC}).model_dump()
        found = ledger.search(
            "how long are audit logs kept", task_id="task-1", top_k=3, idempotency_key="search-1"
        )
        assert isinstance(found, SearchAnswer)
        assert found.status == "ok" and found.task_id == "task-1" and found.dedup is False
        cited = found.output.citations[0]
        assert cited.document_id == doc["document_id"] and cited.path == "handbook/retention.md"
        assert cited.snippet in DOC and "180 days" in cited.snippet
        assert cited.locator.start_line >= 1 and cited.reason["score_breakdown"]
        assert found.metrics["hits"] == len(found.output.citations)
        again = ledger.search(
            "how long are audit logs kept", task_id="task-1", top_k=3, idempotency_key="search-1"
        )
        assert again.dedup is True and again.receipt_id == found.receipt_id
        # The citation the search minted reads back through the client.
        read = ledger.get_citation(cited.citation_id)
        assert read.data["chunk_id"] == cited.chunk_id and cited.snippet in read.data["chunk_text"]
        filtered = ledger.search("audit logs", filters={"sensitivity": ["restricted"]})
        assert filtered.status == "no_hit" and filtered.output.gaps and not filtered.output.citations
        with pytest.raises(ValidationError, match="sensitivity"):  # refused before it is sent
            ledger.search("audit logs", filters={"sensitivity": ["secret"]})
        outside = ledger.search("audit logs", target_roots=["../etc"])
        assert outside.status == "denied" and outside.errors[0]["code"] == "denied.outside_allowlist"

        async def search_async() -> SearchAnswer:
            async with AsyncClient(server.base_url, token, **FAST) as aledger:
                return await aledger.search("submarine reactor maintenance", target_roots=["handbook"])

        absent = asyncio.run(search_async())
        assert isinstance(absent, SearchAnswer)
        assert absent.status == "no_hit" and absent.output.target_roots == ["handbook"]
        assert any(gap.startswith("no searchable document mentions: submarin") for gap in absent.output.gaps)
        assert any(gap.startswith("widen target_roots") for gap in absent.output.gaps)
        assert absent.receipt_id != found.receipt_id
        shown = loopback_http.get(
            f"{server.base_url}/v1/receipts/{absent.receipt_id}", headers={"Authorization": f"Bearer {token}"}
        )
        assert shown.status_code == 200 and shown.json()["status"] == "no_hit"
