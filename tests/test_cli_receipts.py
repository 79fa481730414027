"""`citeledger receipts list|show` in real subprocesses: against a real server (both stores)
and against a local SQLite data directory; filters, pages, `--json`, the proof check, the
recorded content read."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from api.auth import create_token
from client import AsyncClient
from ledger.config import LedgerConfig
from ledger.writing.application import Ledger
from tests import loopback_http
from tests.api_support import DOC, LoopbackServer, api_config, make_tokens
from tests.factories import UseCases
from tests.test_cli import citeledger

SNIPPET = "Audit logs are kept for 180 days."


def _post(base: str, token: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = loopback_http.post(base + path, json=body, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code in (200, 201), response.text
    answer: dict[str, Any] = response.json()
    return answer


def _retrieval(doc: dict[str, Any], query: str, task_id: str, engine: str = "external:rag") -> dict[str, Any]:
    entry = {"document_id": doc["document_id"], "chunk_id": doc["chunks"][0]["chunk_id"], "score": "2.5"}
    return {
        "query": query,
        "engine": engine,
        "task": {"task_id": task_id},
        "selected_entries": [{**entry, "snippet": SNIPPET}],
    }


def _json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_receipts_list_and_show_against_a_server(ledger_config: LedgerConfig) -> None:
    config = api_config(ledger_config)
    tokens = make_tokens(config)
    auditor = create_token(config.token_path, "acme", ["audit.read", "audit.content"])
    with LoopbackServer(config) as server:
        base, admin = server.base_url, tokens["admin"]
        handbook = _post(base, admin, "/v1/documents", {"path": "handbook/retention.md", "text": DOC})
        other = _post(base, admin, "/v1/documents", {"path": "wiki/other.md", "text": DOC})
        made = [
            _post(base, admin, "/v1/retrievals", _retrieval(handbook, "first question", "task-a")),
            _post(
                base, admin, "/v1/retrievals", _retrieval(other, "second question", "task-b", "external:bot")
            ),
            _post(base, admin, "/v1/retrievals", _retrieval(handbook, "third question", "task-b")),
        ]
        ids = [r["receipt_id"] for r in made]
        remote = {"CITELEDGER_URL": base, "CITELEDGER_TOKEN": auditor, "COLUMNS": "200"}

        # Newest first, JSON lines, filters by task, document and engine.
        listed = citeledger("receipts", "list", "--json", **remote)
        assert listed.returncode == 0, listed.stderr
        assert [r["receipt_id"] for r in _json_lines(listed.stdout)] == ids[::-1]
        by_task = _json_lines(
            citeledger("receipts", "list", "--json", "--task-id", "task-b", **remote).stdout
        )
        assert [r["receipt_id"] for r in by_task] == [ids[2], ids[1]]
        assert all(r["task_id"] == "task-b" for r in by_task)
        by_doc = citeledger("receipts", "list", "--json", "--document", handbook["document_id"], **remote)
        assert [r["receipt_id"] for r in _json_lines(by_doc.stdout)] == [ids[2], ids[0]]
        by_engine = citeledger("receipts", "list", "--json", "--engine", "external:bot", **remote)
        assert [r["receipt_id"] for r in _json_lines(by_engine.stdout)] == [ids[1]]
        nothing = citeledger("receipts", "list", "--json", "--until", "2000-01-01", **remote)
        assert nothing.returncode == 0 and _json_lines(nothing.stdout) == []
        # Oldest first on asking; a day is the whole day; a wrong choice names the allowed ones.
        day = _json_lines(listed.stdout)[0]["recorded_at"][:10]
        ascending = citeledger(
            "receipts",
            "list",
            "--json",
            "--order",
            "asc",
            "--since",
            day,
            "--until",
            day,
            "--kind",
            "external",
            **remote,
        )
        assert [r["receipt_id"] for r in _json_lines(ascending.stdout)] == ids
        wrong = citeledger("receipts", "list", "--status", "nohit", **remote)
        assert (
            wrong.returncode == 2
            and "--status must be one of: ok, no_hit, denied, timeout, error" in wrong.stderr
        )
        # Pages: the cursor printed under one page gives the next.
        first = citeledger("receipts", "list", "--json", "--limit", "2", **remote)
        cursor = first.stderr.split("--cursor")[1].split()[0]
        rest = citeledger("receipts", "list", "--json", "--limit", "2", "--cursor", cursor, **remote)
        assert [r["receipt_id"] for r in _json_lines(first.stdout) + _json_lines(rest.stdout)] == ids[::-1]
        # The table, with the queries in plain when asked.
        table = citeledger("receipts", "list", "--queries", **{**remote, "COLUMNS": "80"})
        assert table.returncode == 0, table.stderr
        assert ids[0] in table.stdout and "second question" in table.stdout
        # How many match in all (not the page size), and what made each.
        assert "3 receipts, newest first; 3 on this page" in table.stdout and "external" in table.stdout
        paged = citeledger(
            "receipts", "list", "--limit", "1", "--task-id", "task-b", **{**remote, "COLUMNS": "200"}
        )
        assert "2 receipts, newest first; 1 on this page" in paged.stdout

        # show: the query and snippet in plain, the proof checked, the read recorded.
        shown = citeledger("receipts", "show", ids[0], **remote)
        assert shown.returncode == 0, shown.stderr
        assert "query: first question" in shown.stdout and SNIPPET in shown.stdout
        assert "proof: intact" in shown.stdout and "handbook/retention.md" in shown.stdout
        detail = json.loads(citeledger("receipts", "show", ids[0], "--json", **remote).stdout)
        assert detail["proof"]["intact"] is True and detail["content"]["query"]["text"] == "first question"
        assert detail["policy"]["note"] == "no policy bundle was active"
        reads = loopback_http.get(
            f"{base}/v1/events",
            params={"type": "ContentRead"},
            headers={"Authorization": f"Bearer {auditor}"},
        ).json()["events"]
        assert ids[0] in [
            r["payload"]["receipt_ids"][0] for r in reads if len(r["payload"]["receipt_ids"]) == 1
        ]

        # A token without audit.content sees the receipt, not its text.
        sealed = citeledger(
            "receipts", "show", ids[0], CITELEDGER_URL=base, CITELEDGER_TOKEN=tokens["reader"]
        )
        assert sealed.returncode == 0, sealed.stderr
        assert "sealed: needs audit.content" in sealed.stdout and "first question" not in sealed.stdout
        unknown = citeledger("receipts", "show", "no-such-receipt", **remote)
        assert unknown.returncode == 2 and "not_found" in unknown.stderr

        # The async client reads the same.
        async def via_async() -> tuple[dict[str, Any], dict[str, Any]]:
            async with AsyncClient(base, auditor, drain_interval_s=None) as client:
                return await client.receipt(ids[0], content=True), await client.receipts(task_id="task-a")

        one, page = asyncio.run(via_async())
        assert one["content"]["query"]["text"] == "first question"
        assert [r["receipt_id"] for r in page["receipts"]] == [ids[0]]


def test_receipts_list_and_show_on_a_local_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Ledger(LedgerConfig(data_dir=data, run_checkpointer=False)) as ledger:
        cases = UseCases(ledger)
        document = cases.ingest("# Logs\n\nAudit logs are kept for 180 days.\n", path="handbook/retention.md")
        receipt = cases.retrieve(document, query="how long are logs kept?")
        size = ledger.size
    receipt_id = receipt.payload["receipt_id"]

    listed = citeledger("receipts", "list", "--tenant", "acme", "--json", data_dir=data)
    assert listed.returncode == 0, listed.stderr
    [line] = _json_lines(listed.stdout)
    assert line["receipt_id"] == receipt_id and line["task_id"] == "task-1"
    assert citeledger("receipts", "list", "--tenant", "globex", "--json", data_dir=data).stdout.strip() == ""
    assert (
        _json_lines(
            citeledger(
                "receipts", "list", "--tenant", "acme", "--json", "--status", "no_hit", data_dir=data
            ).stdout
        )
        == []
    )

    shown = citeledger("receipts", "show", receipt_id, "--tenant", "acme", data_dir=data, COLUMNS="200")
    assert shown.returncode == 0, shown.stderr
    assert "query: how long are logs kept?" in shown.stdout and "proof: intact" in shown.stdout
    with Ledger(LedgerConfig(data_dir=data, run_checkpointer=False)) as ledger:
        [read] = [e for e in ledger.read(size + 1) if e.type == "ContentRead"]
        assert read.envelope["actor"] == "cli" and read.payload["receipt_ids"] == [receipt_id]
