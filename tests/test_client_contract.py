"""The client against the seed's six contract families (success, 429, 408/timeout, 5xx,
empty answer, oversized answer), the circuit breaker, and the contract headers.

Success runs against the real server on loopback; the misbehaving families run against a
real misbehaving HTTP peer on loopback (`tests.client_support.ScriptedPeer`) whose good
answers are receipts the real server gave."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from client import (
    BadResponse,
    BundleError,
    CircuitOpen,
    Client,
    IdempotencyConflict,
    RateLimited,
    Refused,
    RetrievalReceipt,
    Spooled,
    Unavailable,
)
from client.spool import Spool
from ledger.config import LedgerConfig
from tests import loopback_http
from tests.api_support import DOC, Api, LoopbackServer, api, api_config, make_api, make_tokens  # noqa: F401
from tests.client_support import Reply, ScriptedPeer, envelope, receipt_body, retrieval

FAST = {"backoff_base_s": 0.01, "backoff_max_s": 0.05, "drain_interval_s": None}


def _client(base_url: str, **settings: Any) -> Client:
    return Client(base_url, "token-for-the-peer", **{**FAST, **settings})


def _keys(peer: ScriptedPeer) -> list[str | None]:
    return [seen.headers.get("idempotency-key") for seen in peer.seen]


# -- 1. success, against the real server ---------------------------------------------------------
def test_success_against_the_real_server(ledger_config: LedgerConfig, tmp_path: Path) -> None:
    config = api_config(ledger_config)
    tokens = make_tokens(config)
    with LoopbackServer(config) as server, Client(server.base_url, tokens["admin"], **FAST) as ledger:
        doc = ledger.ingest_document({"path": "handbook/retention.md", "text": DOC})
        assert doc.chunks and doc.dedup is False
        body = retrieval(doc.model_dump(), task_id="task-ok")
        receipt = ledger.record_retrieval(body, idempotency_key="key-1", trace_id="trace-1")
        assert isinstance(receipt, RetrievalReceipt) and receipt.dedup is False
        assert receipt.run_id == ledger.settings.run_id and receipt.trace_id == "trace-1"
        again = ledger.record_retrieval(body, idempotency_key="key-1")
        assert isinstance(again, RetrievalReceipt)
        assert again.dedup is True and again.receipt_id == receipt.receipt_id
        with pytest.raises(IdempotencyConflict) as conflict:
            ledger.record_retrieval(retrieval(doc.model_dump(), task_id="other"), idempotency_key="key-1")
        assert conflict.value.code == "idempotency_key_reused" and conflict.value.retryable is False
        assert conflict.value.run_id == ledger.settings.run_id and conflict.value.trace_id
        with pytest.raises(Refused) as refused:
            bad = retrieval(doc.model_dump())
            bad["selected_entries"][0]["chunk_id"] = "no-such-chunk"
            ledger.record_retrieval(bad)
        assert refused.value.code == "unknown_chunk" and refused.value.status == 422
        citation = ledger.get_citation(receipt.citation_ids[0])
        assert "Audit logs are kept for 180 days." in str(citation.data)
        for i in range(4):
            ledger.record_retrieval(retrieval(doc.model_dump(), task_id=f"task-{i}"))
        pages = list(ledger.events(type="RetrievalRecorded", limit=2))
        assert len(pages) >= 3
        events = [event for page in pages for event in page.events]
        assert len(events) == 5
        first = next(e for e in events if e["payload"]["receipt_id"] == receipt.receipt_id)
        assert first["run_id"] == ledger.settings.run_id and first["trace_id"] == "trace-1"
        auth = {"Authorization": f"Bearer {tokens['admin']}"}
        bundle = loopback_http.get(
            f"{server.base_url}/v1/receipts/{receipt.receipt_id}/bundle", headers=auth
        ).json()
        root = loopback_http.get(f"{server.base_url}/v1/keys", headers=auth).json()["root_public_key"]
    # offline: the server is gone
    entry = Client.verify_bundle(bundle, root)
    assert entry["payload"]["receipt_id"] == receipt.receipt_id
    bundle["bundle"]["entry"]["payload"]["status"] = "error"
    with pytest.raises(BundleError):
        Client.verify_bundle(bundle, root)


# -- 2. 429 -----------------------------------------------------------------------------------
def test_429_honours_retry_after_with_the_same_key(api: Api) -> None:
    good = receipt_body(api)
    script = [Reply(429, envelope("rate_limited", True), {"Retry-After": "1"}), Reply(201, good)]
    with ScriptedPeer(script) as peer, _client(peer.base_url) as ledger:
        started = time.monotonic()
        receipt = ledger.record_retrieval(retrieval({"document_id": "d", "chunks": [{"chunk_id": "c"}]}))
        assert isinstance(receipt, RetrievalReceipt) and receipt.receipt_id == good["receipt_id"]
        assert peer.seen[1].at - peer.seen[0].at >= 0.95  # waited for Retry-After
        assert time.monotonic() - started >= 0.95
        keys = _keys(peer)
        assert len(keys) == 2 and keys[0] and keys[0] == keys[1]
        assert peer.seen[0].headers["x-trace-id"] == peer.seen[1].headers["x-trace-id"]
        assert peer.seen[0].headers["x-run-id"] == ledger.settings.run_id


def test_429_without_end_raises_rate_limited_or_spools(tmp_path: Path) -> None:
    script = [Reply(429, envelope("rate_limited", True), {"Retry-After": "0"})]
    body = retrieval({"document_id": "d", "chunks": [{"chunk_id": "c"}]})
    with ScriptedPeer(script) as peer, _client(peer.base_url, max_attempts=3) as ledger:
        with pytest.raises(RateLimited) as raised:
            ledger.record_retrieval(body)
        assert raised.value.code == "rate_limited" and raised.value.retryable and len(peer.seen) == 3
        assert ledger.breaker.state == "closed"  # a busy ledger is not a broken one
    with (
        ScriptedPeer(script) as peer,
        _client(peer.base_url, max_attempts=2, spool_dir=str(tmp_path / "s")) as ledger,
    ):
        spooled = ledger.record_retrieval(body, idempotency_key="k-429")
        assert isinstance(spooled, Spooled) and spooled.idempotency_key == "k-429"
    assert Spool(tmp_path / "s").status().pending == 1


# -- 3. 408 / timeout ----------------------------------------------------------------------------
def test_408_is_retried_and_a_slow_search_times_out_at_its_own_limit(api: Api) -> None:
    good = receipt_body(api)
    script = [Reply(408, envelope("request_timeout", True)), Reply(201, good)]
    with ScriptedPeer(script) as peer, _client(peer.base_url) as ledger:
        receipt = ledger.record_retrieval(retrieval({"document_id": "d", "chunks": [{"chunk_id": "c"}]}))
        assert isinstance(receipt, RetrievalReceipt) and len(peer.seen) == 2
        assert len(set(_keys(peer))) == 1
    slow = [Reply(200, {"hits": []}, delay_s=1.5)]
    with ScriptedPeer(slow) as peer, _client(peer.base_url, search_timeout_s=0.3, max_attempts=2) as ledger:
        started = time.monotonic()
        with pytest.raises(Unavailable) as raised:
            ledger.search("audit logs")
        elapsed = time.monotonic() - started
        assert raised.value.code == "timeout" and raised.value.retryable
        assert "0.3 s (search)" in raised.value.message
        assert len(peer.seen) == 2 and elapsed < 1.4  # two tries of 0.3 s, not the peer's 1.5 s
        body = peer.seen[0].body
        assert b'"idempotency_key"' in body and peer.seen[0].path == "/v1/search"
        assert peer.seen[0].headers["idempotency-key"] == peer.seen[1].headers["idempotency-key"]


def test_default_timeouts_per_call_kind() -> None:
    ledger = _client("http://127.0.0.1:9")
    assert ledger.settings.timeout("search") <= 2.0
    assert ledger.settings.timeout("write") <= 12.0
    assert ledger.settings.timeout("search") < ledger.settings.timeout("write")
    ledger.close()


# -- 4. 5xx ----------------------------------------------------------------------------------------
def test_5xx_retried_only_when_the_envelope_says_retryable(api: Api, tmp_path: Path) -> None:
    good = receipt_body(api)
    body = retrieval({"document_id": "d", "chunks": [{"chunk_id": "c"}]})
    with ScriptedPeer([Reply(503, envelope("unavailable", True)), Reply(201, good)]) as peer:
        with _client(peer.base_url) as ledger:
            assert isinstance(ledger.record_retrieval(body), RetrievalReceipt)
        assert len(peer.seen) == 2
    with ScriptedPeer([Reply(500, envelope("internal_error", False))]) as peer:
        with _client(peer.base_url) as ledger, pytest.raises(Unavailable) as raised:
            ledger.record_retrieval(body)
        assert len(peer.seen) == 1 and raised.value.code == "internal_error" and raised.value.status == 500
    with ScriptedPeer([Reply(502, b"<html>bad gateway</html>")]) as peer:  # a proxy: no envelope
        with _client(peer.base_url, max_attempts=2, spool_dir=str(tmp_path / "s")) as ledger:
            spooled = ledger.record_retrieval(body, idempotency_key="k-502")
        assert isinstance(spooled, Spooled) and len(peer.seen) == 2
    assert Spool(tmp_path / "s").status().pending == 1


# -- 5. empty answer ---------------------------------------------------------------------------------
def test_empty_answers_are_retried_with_the_same_key(api: Api) -> None:
    good = receipt_body(api)
    body = retrieval({"document_id": "d", "chunks": [{"chunk_id": "c"}]})
    script = [Reply(close_without_answer=True), Reply(201, None), Reply(201, good)]
    with ScriptedPeer(script) as peer, _client(peer.base_url) as ledger:
        receipt = ledger.record_retrieval(body)
        assert isinstance(receipt, RetrievalReceipt) and receipt.receipt_id == good["receipt_id"]
        assert len(peer.seen) == 3 and len(set(_keys(peer))) == 1
    with ScriptedPeer([Reply(201, None)]) as peer, _client(peer.base_url, max_attempts=2) as ledger:
        with pytest.raises(BadResponse) as raised:
            ledger.record_retrieval(body)
        assert raised.value.code == "empty_response" and raised.value.retryable


# -- 6. oversized answer -----------------------------------------------------------------------------
@pytest.mark.parametrize("chunked", [False, True])
def test_oversized_answers_are_cut_off_and_not_retried(chunked: bool) -> None:
    huge = {"receipt_id": "x" * (3 * 1024 * 1024)}
    with ScriptedPeer([Reply(201, huge, chunked=chunked)]) as peer:
        with _client(peer.base_url, max_response_bytes=1024 * 1024) as ledger:
            with pytest.raises(BadResponse) as raised:
                ledger.record_retrieval(retrieval({"document_id": "d", "chunks": [{"chunk_id": "c"}]}))
        assert raised.value.code == "response_too_large" and raised.value.retryable is False
        assert len(peer.seen) == 1


# -- the breaker ---------------------------------------------------------------------------------------
def test_breaker_opens_after_consecutive_failures_and_recovers_after_cooldown(
    api: Api, tmp_path: Path
) -> None:
    good = receipt_body(api)
    state = {"healthy": False}

    def answer(_: Any) -> Reply:
        return Reply(201, good) if state["healthy"] else Reply(503, envelope("unavailable", True))

    body = retrieval({"document_id": "d", "chunks": [{"chunk_id": "c"}]})
    settings = {"max_attempts": 1, "breaker_threshold": 3, "breaker_cooldown_s": 0.5}
    with ScriptedPeer(answer) as peer, _client(peer.base_url, **settings) as ledger:
        for _ in range(3):
            with pytest.raises(Unavailable):
                ledger.record_retrieval(body)
        assert ledger.breaker.state == "open" and len(peer.seen) == 3
        with pytest.raises(CircuitOpen) as raised:
            ledger.record_retrieval(body)
        assert raised.value.retryable and len(peer.seen) == 3  # not attempted
        time.sleep(0.6)
        assert ledger.breaker.state == "half-open"
        with pytest.raises(Unavailable):  # the probe fails: open again at once
            ledger.record_retrieval(body)
        assert ledger.breaker.state == "open" and len(peer.seen) == 4
        time.sleep(0.6)
        state["healthy"] = True
        assert isinstance(ledger.record_retrieval(body), RetrievalReceipt)
        assert ledger.breaker.state == "closed" and len(peer.seen) == 5
    # With a spool, a write during an open breaker is kept instead of refused.
    state["healthy"] = False
    with ScriptedPeer(answer) as peer:
        with _client(peer.base_url, spool_dir=str(tmp_path / "s"), **settings) as ledger:
            results = [ledger.record_retrieval(body) for _ in range(5)]
        assert all(isinstance(result, Spooled) for result in results)
        assert len(peer.seen) == 3  # the last two never reached the peer
    assert Spool(tmp_path / "s").status().pending == 5
