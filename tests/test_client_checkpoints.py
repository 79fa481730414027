"""A client that remembers: it keeps the newest checkpoint it has seen beside its
spool, trusts a newer one only after its consistency proof, and raises
CheckpointMismatch at a server that was rolled back or rewritten (real server on
loopback, real store cut back underneath it)."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import pytest

from client import AsyncClient, CheckpointMismatch, Client
from ledger.config import LedgerConfig
from ledger.writing.application import Ledger
from tests.api_support import LoopbackServer, api_config, make_tokens
from tests.conftest import RawStore
from tests.factories import TENANT, retrieval_draft
from tests.test_witness import _wipe_local_evidence


def _grow(ledger: Ledger, count: int, query: str = "how long are logs kept?") -> int:
    ledger.append_batch([retrieval_draft(ledger, query) for _ in range(count)], tenant_id=TENANT)
    record = ledger.issue_checkpoint()
    assert record is not None
    return record.tree_size


def async_checkpoint_verdict(base_url: str, token: str, spool: Path) -> str:
    """What a fresh AsyncClient keeping its checkpoint in `spool` says of the server's newest
    checkpoint: the CheckpointMismatch code, or "accepted"."""

    async def check() -> str:
        async with AsyncClient(base_url, token, spool_dir=str(spool)) as client:
            try:
                await client.latest_checkpoint()
            except CheckpointMismatch as error:
                return error.code
        return "accepted"

    return asyncio.run(check())


def test_client_detects_a_rolled_back_and_a_rewritten_server(
    ledger_config: LedgerConfig, raw_store: RawStore, tmp_path: Path
) -> None:
    config = api_config(ledger_config)
    token = make_tokens(config)["reader"]
    spool = tmp_path / "spool"
    with LoopbackServer(config) as server:
        ledger = server.app.state.services.ledger
        first = _grow(ledger, 20)
        with Client(server.base_url, token, spool_dir=str(spool), drain_interval_s=None) as client:
            assert client.latest_checkpoint().size == first
            second = _grow(ledger, 10)
            seen = client.latest_checkpoint()  # newer: accepted after its consistency proof
            assert seen.size == second == 31 and seen.root == ledger.tree.root(31)
        remembered = spool / "checkpoint.json"
        assert remembered.exists() and stat.S_IMODE(remembered.stat().st_mode) == 0o600
    _wipe_local_evidence(raw_store, above=12)  # leaves nothing the server could notice
    with LoopbackServer(config) as server:
        ledger = server.app.state.services.ledger
        assert ledger.findings == []
        assert _grow(ledger, 3) == 15
        assert async_checkpoint_verdict(server.base_url, token, spool) == "checkpoint_rollback"
        # A new client process with the same spool directory remembers the longer tree.
        with Client(server.base_url, token, spool_dir=str(spool), drain_interval_s=None) as client:
            with pytest.raises(CheckpointMismatch) as rolled_back:
                client.latest_checkpoint()
            assert rolled_back.value.code == "checkpoint_rollback"
            assert _grow(ledger, 16, query="a different history") == 31
            with pytest.raises(CheckpointMismatch) as forked:
                client.latest_checkpoint()
            assert forked.value.code == "checkpoint_fork"
            assert _grow(ledger, 5, query="and longer") == 36
            with pytest.raises(CheckpointMismatch) as rewritten:
                client.latest_checkpoint()
            assert rewritten.value.code == "checkpoint_inconsistent"
            assert client.checkpoints.seen is not None and client.checkpoints.seen.size == 31  # unchanged
