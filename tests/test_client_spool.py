"""The spool and the batching modes against the real server on loopback (SQLite and
PostgreSQL): order and keys kept, a torn tail cut off, a record refused for good set
aside, `citeledger spool status|flush`, the async client, the buffered recorder."""

from __future__ import annotations

import asyncio
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

from client import AsyncClient, BatchRecorder, Client, RetrievalReceipt, Spooled
from client.spool import Spool, SpoolRecord
from ledger.config import LedgerConfig
from tests.api_support import DOC, LoopbackServer, api_config, make_tokens
from tests.client_support import retrieval
from tests.server_process import free_port, run_cli, server_env

FAST = {"backoff_base_s": 0.01, "backoff_max_s": 0.05, "drain_interval_s": None}


def _tasks(ledger: Client) -> list[str]:
    pages = ledger.events(type="RetrievalRecorded", limit=500)
    return [event["payload"]["task"]["task_id"] for page in pages for event in page.events]


def test_spool_delivers_in_order_with_original_keys_and_sets_refusals_aside(
    ledger_config: LedgerConfig, tmp_path: Path
) -> None:
    config = api_config(ledger_config)
    token = make_tokens(config)["admin"]
    spool_dir = tmp_path / "spool"
    nowhere = f"http://127.0.0.1:{free_port()}"
    with LoopbackServer(config) as server, Client(server.base_url, token, **FAST) as live:
        doc = live.ingest_document({"path": "a.md", "text": DOC}).model_dump()
        first = live.record_retrieval(retrieval(doc, task_id="t-0"), idempotency_key="key-0")
        assert isinstance(first, RetrievalReceipt)
        with Client(nowhere, token, spool_dir=str(spool_dir), max_attempts=1, **FAST) as offline:
            # key-0 was recorded already (its answer got lost, say): spooled again, delivered once
            results = [offline.record_retrieval(retrieval(doc, task_id="t-0"), idempotency_key="key-0")]
            bad = retrieval(doc, task_id="t-bad")
            bad["selected_entries"][0]["snippet"] = "never in the chunk"
            results.append(offline.record_retrieval(bad, idempotency_key="key-bad"))
            results += [offline.record_retrieval(retrieval(doc, task_id=f"t-{i}")) for i in range(1, 30)]
            assert all(isinstance(r, Spooled) for r in results)
        # a crash in the middle of an append: a line without its newline
        segment = sorted(spool_dir.glob("segment-*.jsonl"))[-1]
        with open(segment, "ab") as handle:
            handle.write(b'{"idempotency_key":"torn","retr')
        spool = Spool(spool_dir)
        assert spool.status().pending == 31
        spool.append(SpoolRecord("key-30", retrieval(doc, task_id="t-30")))  # cuts the torn tail first
        assert spool.status().pending == 32
        env = {**server_env(ledger_config, "unused"), "CITELEDGER_TOKEN": token}
        shown = run_cli(["spool", "status", "--dir", str(spool_dir), "--json"], env)
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["pending"] == 32
        flushed = run_cli(["spool", "flush", "--dir", str(spool_dir), "--url", server.base_url], env)
        assert flushed.returncode == 0, flushed.stdout + flushed.stderr
        assert "delivered 31, rejected 1, pending 0" in flushed.stdout
        status = spool.status()
        assert (status.pending, status.rejected) == (0, 1)
        rejected = json.loads((spool_dir / "rejected.jsonl").read_text())
        assert rejected["record"]["idempotency_key"] == "key-bad"
        assert "snippet_not_in_chunk" in rejected["reason"]
        tasks = _tasks(live)
        assert Counter(tasks) == Counter(["t-0", *[f"t-{i}" for i in range(1, 31)]])
        spooled_order = [t for t in tasks if t != "t-0"]
        assert spooled_order == [f"t-{i}" for i in range(1, 31)]  # delivered in order
        assert (
            run_cli(["spool", "flush", "--dir", str(spool_dir), "--url", server.base_url], env).returncode
            == 0
        )
        assert len(_tasks(live)) == 31
    assert (os.stat(spool_dir).st_mode & 0o777) == 0o700


def test_async_client_records_spools_and_drains(ledger_config: LedgerConfig, tmp_path: Path) -> None:
    config = api_config(ledger_config)
    token = make_tokens(config)["admin"]

    async def scenario(base_url: str) -> tuple[list[Any], Any, list[Any]]:
        async with AsyncClient(base_url, token, **FAST) as ledger:
            doc = (await ledger.ingest_document({"path": "a.md", "text": DOC})).model_dump()
            recorded = await asyncio.gather(
                *(ledger.record_retrieval(retrieval(doc, task_id=f"a-{i}")) for i in range(10))
            )
            batch = await ledger.record_retrievals([retrieval(doc, task_id=f"b-{i}") for i in range(20)])
        nowhere = f"http://127.0.0.1:{free_port()}"
        async with AsyncClient(nowhere, token, spool_dir=str(tmp_path / "s"), max_attempts=1, **FAST) as off:
            spooled = await off.record_retrievals([retrieval(doc, task_id=f"c-{i}") for i in range(5)])
            spooled.append(await off.record_retrieval(retrieval(doc, task_id="c-5")))
        async with AsyncClient(base_url, token, spool_dir=str(tmp_path / "s"), **FAST) as back:
            report = await back.flush_spool()
        return [*recorded, *batch], report, spooled

    with LoopbackServer(config) as server:
        results, report, spooled = asyncio.run(scenario(server.base_url))
        assert all(
            isinstance(r, RetrievalReceipt) or (r.error is None and r.http_status == 201) for r in results
        )
        assert all(isinstance(r, Spooled) for r in spooled)
        assert (report.delivered, report.pending) == (6, 0)
        with Client(server.base_url, token, **FAST) as reader:
            assert len(set(_tasks(reader))) == len(_tasks(reader)) == 36


def test_buffered_recorder_sends_batches_in_memory_and_durably(
    ledger_config: LedgerConfig, tmp_path: Path
) -> None:
    config = api_config(ledger_config)
    token = make_tokens(config)["admin"]
    with LoopbackServer(config) as server:
        with Client(server.base_url, token, spool_dir=str(tmp_path / "s"), **FAST) as ledger:
            doc = ledger.ingest_document({"path": "a.md", "text": DOC}).model_dump()
            before = server.app.state.services.committer.batches
            with BatchRecorder(ledger, max_batch=50, max_delay_s=0.2) as recorder:
                keys = [recorder.record(retrieval(doc, task_id=f"m-{i}")) for i in range(120)]
                assert recorder.flush()
            assert len(set(keys)) == 120 and recorder.refused == [] and recorder.failed == []
            # 120 writes in a handful of batch requests, not 120 transactions
            assert server.app.state.services.committer.batches - before <= 6
            with BatchRecorder(ledger, max_batch=50, max_delay_s=0.2, durable=True) as durable:
                for i in range(60):
                    durable.record(retrieval(doc, task_id=f"d-{i}"))
            assert Spool(tmp_path / "s").status().pending == 0
            tasks = _tasks(ledger)
        assert Counter(tasks) == Counter([f"m-{i}" for i in range(120)] + [f"d-{i}" for i in range(60)])
