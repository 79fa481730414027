"""A client pointed at a ledger that does not answer says so, once and loudly, when it
starts spooling (a mistyped URL would otherwise spool every record in silence), and says
it again only after the spool has drained empty (`Spool.tell_outage`)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from client import Client, RetrievalReceipt, Spooled
from ledger.config import LedgerConfig
from tests.api_support import DOC, LoopbackServer, api_config, make_tokens
from tests.client_support import retrieval
from tests.server_process import free_port

FAST = {"backoff_base_s": 0.01, "backoff_max_s": 0.05, "drain_interval_s": None, "max_attempts": 1}


def _outage_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "citeledger.client.spool" and r.levelno == logging.WARNING]


def test_spooling_because_the_ledger_is_unreachable_is_said_once_then_again_after_a_drain(
    ledger_config: LedgerConfig, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = api_config(ledger_config)
    token = make_tokens(config)["admin"]
    spool_dir = tmp_path / "spool"
    nowhere = f"http://127.0.0.1:{free_port()}"
    caplog.set_level(logging.INFO)
    with LoopbackServer(config) as server, Client(server.base_url, token, **FAST) as live:
        doc = live.ingest_document({"path": "a.md", "text": DOC}).model_dump()
        with Client(nowhere, token, spool_dir=str(spool_dir), **FAST) as offline:
            first = [offline.record_retrieval(retrieval(doc, task_id=f"t-{i}")) for i in range(3)]
            batch = offline.record_retrievals([retrieval(doc, task_id="t-batch")])
            assert all(isinstance(r, Spooled) for r in [*first, *batch])
            told = _outage_warnings(caplog)
            assert len(told) == 1, [r.getMessage() for r in told]
            message = told[0].getMessage()
            assert nowhere in message and str(spool_dir) in message and "spooling" in message
            # the warning names where and why, never what was asked
            assert "question" not in message.lower() and DOC[:20] not in message
        with Client(server.base_url, token, spool_dir=str(spool_dir), **FAST) as back:
            report = back.flush_spool()
            assert (report.delivered, report.pending) == (4, 0)
            assert isinstance(back.record_retrieval(retrieval(doc, task_id="t-live")), RetrievalReceipt)
            assert len(_outage_warnings(caplog)) == 1  # delivering directly: nothing more said
