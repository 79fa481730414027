"""Scale-out: `citeledger serve --workers 2` on PostgreSQL, many concurrent
clients; every acknowledged event is in the log exactly once and `citeledger
verify` is clean."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from ledger.config import LedgerConfig
from ledger.storage.store import LEDGER_STREAM_ID, Store
from tests import loopback_http
from tests.api_support import DOC
from tests.conftest import PG_DSN, pg_connect
from tests.server_process import free_port, run_cli

SNIPPETS = ("Audit logs are kept for 180 days.", "Restricted documents need a scope.")
ROOT = Path(__file__).resolve().parents[1]
CLIENTS = 12
POSTS_PER_CLIENT = 15


@pytest.mark.slow
def test_two_workers_on_postgres_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    schema = "t_" + uuid.uuid4().hex[:16]
    with pg_connect() as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    port = free_port()
    env = {
        **os.environ,
        "CITELEDGER_DATABASE_URL": f"{PG_DSN}?schema={schema}",
        "CITELEDGER_BOOTSTRAP_TOKEN": "multi-process-token",
        "CITELEDGER_RATE_LIMIT_RPS": "100000",
        "CITELEDGER_RATE_LIMIT_BURST": "100000",
    }
    data_dir = tmp_path / "data"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli.main",
            "serve",
            "--data-dir",
            str(data_dir),
            "--port",
            str(port),
            "--workers",
            "2",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    auth = {"Authorization": "Bearer multi-process-token"}
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if loopback_http.get(f"{base}/v1/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None, server.stderr.read().decode() if server.stderr else ""
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.2)
        doc = loopback_http.post(
            f"{base}/v1/documents", json={"path": "a.md", "text": DOC}, headers=auth, timeout=10
        ).json()

        def client(index: int) -> list[tuple[str, int]]:
            acked = []
            with loopback_http.client(base_url=base, headers=auth, timeout=20) as http:
                for n in range(POSTS_PER_CLIENT):
                    body: dict[str, Any] = {
                        "query": f"question {index}-{n}",
                        "engine": "external:load",
                        "selected_entries": [
                            {
                                "document_id": doc["document_id"],
                                "chunk_id": doc["chunks"][n % 2]["chunk_id"],
                                "score": "1.0",
                                # Each chunk's own text: snippets must occur in the cited chunk.
                                "snippet": SNIPPETS[n % 2],
                            }
                        ],
                    }
                    response = http.post("/v1/retrievals", json=body, headers={"X-Run-Id": f"c{index}"})
                    if response.status_code == 201:
                        acked.append((response.json()["receipt_id"], response.json()["position"]))
            return acked

        with ThreadPoolExecutor(CLIENTS) as pool:
            acknowledged = [item for part in pool.map(client, range(CLIENTS)) for item in part]
        assert len(acknowledged) == CLIENTS * POSTS_PER_CLIENT
        workers_seen = {
            loopback_http.get(f"{base}/v1/receipts/{receipt_id}", headers=auth, timeout=10).status_code
            for receipt_id, _ in acknowledged[:20]
        }
        assert workers_seen == {200}
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)

    config = LedgerConfig(
        data_dir=data_dir, database_url=env["CITELEDGER_DATABASE_URL"], run_checkpointer=False
    )
    store = Store(config)
    try:
        rows = store.recorder.select_events(LEDGER_STREAM_ID)
        receipts = Counter(
            orjson.loads(bytes(row.state))["payload"]["receipt_id"]
            for row in rows
            if row.topic.endswith("RetrievalRecorded")
        )
        positions = {int(row.originator_version) for row in rows}
    finally:
        store.close()
    for receipt_id, position in acknowledged:
        assert receipts[receipt_id] == 1
        assert position in positions
    assert sum(receipts.values()) == len(acknowledged)
    verify = run_cli(["verify", "--deep", "--data-dir", str(data_dir)], env)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    with pg_connect() as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
