"""Exactly-once delivery through the client, on SQLite and PostgreSQL, with real
processes: the ledger stopped mid-stream and restarted; the client SIGKILLed while
spooling; a load of 2 processes x several threads. Every acknowledged retrieval (a
receipt, or `Spooled`) is in the log exactly once after the spool drains, and
`citeledger verify` is clean."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from client import Client
from client.spool import Spool
from ledger.config import LedgerConfig
from tests.api_support import DOC
from tests.server_process import ROOT, ServerProcess, free_port, run_cli, server_env

TOKEN = "client-delivery-token"
FAST = {"backoff_base_s": 0.01, "backoff_max_s": 0.05, "drain_interval_s": None}


def _task_ids(base_url: str) -> Counter[str]:
    """Task ids of every RetrievalRecorded in the log (through the real API)."""
    with Client(base_url, TOKEN, **FAST) as reader:
        pages = reader.events(type="RetrievalRecorded", limit=500)
        return Counter(event["payload"]["task"]["task_id"] for page in pages for event in page.events)


def _document(base_url: str) -> dict[str, Any]:
    with Client(base_url, TOKEN, **FAST) as ledger:
        return ledger.ingest_document({"path": "handbook/retention.md", "text": DOC}).model_dump()


def _body(doc: dict[str, Any], task: str) -> dict[str, Any]:
    return {
        "query": f"query {task}",
        "engine": "external:client-test",
        "task": {"task_id": task},
        "selected_entries": [
            {
                "document_id": doc["document_id"],
                "chunk_id": doc["chunks"][0]["chunk_id"],
                "score": "1.5",
                "snippet": "Audit logs are kept for 180 days.",
            }
        ],
    }


def _server(ledger_config: LedgerConfig, tmp_path: Path) -> ServerProcess:
    env = server_env(ledger_config, TOKEN)
    return ServerProcess(ledger_config.data_dir, env, log_path=tmp_path / "server.log")


def _verify(ledger_config: LedgerConfig) -> None:
    result = run_cli(["verify", "--data-dir", str(ledger_config.data_dir)], server_env(ledger_config, TOKEN))
    assert result.returncode == 0, result.stdout + result.stderr


@contextmanager
def _served(ledger_config: LedgerConfig, tmp_path: Path) -> Iterator[tuple[ServerProcess, dict[str, Any]]]:
    """A real server holding one document; stopped after the test, whose log is then verified
    (when the test passed)."""
    server = _server(ledger_config, tmp_path).start()
    try:
        yield server, _document(server.base_url)
    finally:
        server.stop()
    _verify(ledger_config)


def _writer(
    url: str, spool_dir: Path, doc: dict[str, Any], name: str, threads: int, each: int
) -> subprocess.Popen[str]:
    """A `tests.client_writer` process: `threads` threads each recording `each` retrievals
    citing `doc`, printing a line per acknowledged one."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.client_writer", url, TOKEN, str(spool_dir), doc["document_id"],
         doc["chunks"][0]["chunk_id"], name, str(threads), str(each)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.mark.slow
def test_ledger_stopped_mid_stream_and_restarted(ledger_config: LedgerConfig, tmp_path: Path) -> None:
    with _served(ledger_config, tmp_path) as (server, doc):
        port = server.port
        acknowledged: list[tuple[str, Any]] = []
        settings = {**FAST, "max_attempts": 2, "breaker_threshold": 3, "breaker_cooldown_s": 0.3}
        with Client(server.base_url, TOKEN, spool_dir=str(tmp_path / "spool"), **settings) as ledger:
            for i in range(240):
                if i == 80:
                    server.kill()  # mid-stream: SIGKILL, nothing flushed
                if i == 160:
                    server.start(port=port)  # back at the same address
                result = ledger.record_retrieval(_body(doc, f"t-{i}"))
                acknowledged.append((f"t-{i}", result))
            kinds = Counter(type(result).__name__ for _, result in acknowledged)
            assert kinds["Spooled"] >= 60 and kinds["RetrievalReceipt"] >= 80, kinds
            report = ledger.flush_spool()
            assert report.pending == 0 and report.rejected == 0, report
            assert report.delivered == kinds["Spooled"]
            assert ledger.flush_spool().delivered == 0  # nothing left, nothing sent twice
        recorded = _task_ids(server.base_url)
        assert recorded == Counter(task for task, _ in acknowledged)  # each exactly once


@pytest.mark.slow
def test_client_sigkilled_while_spooling_loses_nothing_it_acknowledged(
    ledger_config: LedgerConfig, tmp_path: Path
) -> None:
    with _served(ledger_config, tmp_path) as (server, doc):
        spool_dir = tmp_path / "spool"
        nowhere = f"http://127.0.0.1:{free_port()}"  # the ledger unreachable: everything spools
        child = _writer(nowhere, spool_dir, doc, "killed", 4, 60)
        assert child.stdout is not None
        acknowledged: list[str] = []
        deadline = time.monotonic() + 60
        while len(acknowledged) < 150 and time.monotonic() < deadline:
            line = child.stdout.readline()
            if not line:
                break
            kind, task = line.split()
            assert kind == "S"
            acknowledged.append(task)
        child.send_signal(signal.SIGKILL)  # while its threads are appending
        child.wait(timeout=30)
        assert len(acknowledged) >= 150, child.stderr.read() if child.stderr else ""
        assert (spool_dir.stat().st_mode & 0o777) == 0o700
        assert all((p.stat().st_mode & 0o777) == 0o600 for p in spool_dir.iterdir())
        pending = Spool(spool_dir).status().pending
        assert pending >= len(acknowledged)  # a record may be durable before its line was printed
        with Client(server.base_url, TOKEN, spool_dir=str(spool_dir), **FAST) as ledger:
            report = ledger.flush_spool()
        assert report.pending == 0 and report.rejected == 0 and report.delivered == pending
        recorded = _task_ids(server.base_url)
        assert all(count == 1 for count in recorded.values()), recorded.most_common(3)
        assert set(acknowledged) <= set(recorded)
        assert sum(recorded.values()) == pending


@pytest.mark.slow
def test_load_from_two_processes_is_delivered_exactly_once(
    ledger_config: LedgerConfig, tmp_path: Path
) -> None:
    with _served(ledger_config, tmp_path) as (server, doc):
        children = [_writer(server.base_url, tmp_path / f"spool-{p}", doc, f"p{p}", 4, 6) for p in range(2)]
        acknowledged: Counter[str] = Counter()
        for child in children:
            out, err = child.communicate(timeout=120)
            assert child.returncode == 0, err
            acknowledged.update(line.split()[1] for line in out.splitlines())
        assert sum(acknowledged.values()) >= 50
        for p in range(2):  # anything a slow moment spooled is delivered now
            with Client(server.base_url, TOKEN, spool_dir=str(tmp_path / f"spool-{p}"), **FAST) as ledger:
                assert ledger.flush_spool().pending == 0
        recorded = _task_ids(server.base_url)
        assert recorded == acknowledged
        assert set(recorded.values()) == {1}
