"""MCP `list_receipts` and `get_receipt` as an audit agent uses them, over each transport (the
SDK's own client; stdio-url forwards to the `/v1` twin): every filter of `GET /v1/receipts`
(task, document, order, days and times, status, kind), totals, plain questions for an
`audit.content` token (a signed ContentRead each), and refusals that name the argument."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from api.auth import create_token
from tests.api_support import DOC
from tests.mcp_support import TRANSPORTS, Ledger, answer, mcp_ledger, refusal  # noqa: F401


def _seed(ledger: Ledger) -> dict[str, Any]:
    doc = ledger.v1("POST", "/v1/documents", json={"path": "handbook/retention.md", "text": DOC}).json()
    entry = {"document_id": doc["document_id"], "chunk_id": doc["chunks"][0]["chunk_id"], "score": "2.5"}
    made = []
    for n in range(3):
        body = {
            "query": f"what is kept, question {n}",
            "engine": "external:rag",
            "task": {"task_id": f"task-{n % 2}"},
            "selected_entries": [{**entry, "snippet": "Audit logs are kept for 180 days."}],
        }
        answered = ledger.v1("POST", "/v1/retrievals", json=body)
        assert answered.status_code == 201, answered.text
        made.append(answered.json())
    return {"doc": doc, "made": made}


def _content_reads(ledger: Ledger) -> int:
    return int(ledger.v1("GET", "/v1/events", params={"type": "ContentRead"}).json()["total"])


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_list_receipts_takes_the_routes_filters_and_reads_questions(
    mcp_ledger: Ledger, transport: str
) -> None:
    ledger = mcp_ledger
    seeded = _seed(ledger)
    ids = [r["receipt_id"] for r in seeded["made"]]
    day = ledger.v1("GET", f"/v1/receipts/{ids[0]}").json()["recorded_at"][:10]
    ledger.tokens["auditor"] = create_token(ledger.config.token_path, "acme", ["audit.read", "audit.content"])

    async def scenario() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with ledger.client(transport, "auditor") as client:

            async def call(name: str, arguments: dict[str, Any]) -> Any:
                return await client.call_tool(name, arguments)

            out["newest"] = answer(await call("list_receipts", {}))
            out["task"] = answer(await call("list_receipts", {"task_id": "task-0", "order": "asc"}))
            out["document"] = answer(
                await call("list_receipts", {"document_id": seeded["doc"]["document_id"]})
            )
            out["day"] = answer(await call("list_receipts", {"since": day, "until": day, "kind": "external"}))
            out["paged"] = answer(await call("list_receipts", {"limit": 2, "order": "asc"}))
            out["next"] = answer(
                await call(
                    "list_receipts", {"limit": 2, "order": "asc", "cursor": out["paged"]["next_cursor"]}
                )
            )
            before = _content_reads(ledger)
            out["plain"] = answer(await call("list_receipts", {"content": "plain", "task_id": "task-1"}))
            out["one"] = answer(await call("get_receipt", {"receipt_id": ids[0], "content": "plain"}))
            out["reads"] = _content_reads(ledger) - before
            out["bad_day"] = refusal(await call("list_receipts", {"since": "2026-02-30"}))
            out["bad_status"] = refusal(await call("list_receipts", {"status": "nohit"}))
        async with ledger.client(transport, "reader") as reader:  # audit.read only
            out["sealed_list"] = refusal(await reader.call_tool("list_receipts", {"content": "plain"}))
            out["sealed_one"] = refusal(
                await reader.call_tool("get_receipt", {"receipt_id": ids[0], "content": "plain"})
            )
        return out

    out = anyio.run(scenario)
    assert [r["receipt_id"] for r in out["newest"]["receipts"]] == ids[::-1]
    assert out["newest"]["total"] == 3 and out["newest"]["total_exact"] is True
    assert [r["receipt_id"] for r in out["task"]["receipts"]] == [ids[0], ids[2]]
    assert out["task"]["total"] == 2
    assert [r["receipt_id"] for r in out["document"]["receipts"]] == ids[::-1]
    assert out["day"]["total"] == 3 and {r["kind"] for r in out["day"]["receipts"]} == {"external"}
    assert [r["receipt_id"] for r in out["paged"]["receipts"] + out["next"]["receipts"]] == ids
    assert out["next"]["next_cursor"] is None

    # The question in plain for audit.content, each read a signed ContentRead.
    [plain] = out["plain"]["receipts"]
    assert plain["content"]["query"] == {"state": "plain", "text": "what is kept, question 1"}
    assert out["one"]["content"]["query"]["text"] == "what is kept, question 0"
    assert out["reads"] == 2
    for name in ("sealed_list", "sealed_one"):
        assert out[name]["http_status"] == 403, out[name]

    # Refusals name the argument and what it takes, never a pattern.
    message = out["bad_day"]["error"]["message"]
    assert "since" in message and "RFC 3339" in message and "\\d" not in message
    status = out["bad_status"]["error"]["message"]
    assert "status" in status and "no_hit" in status and "\\d" not in status
    assert out["bad_day"]["http_status"] == 422 and out["bad_status"]["http_status"] == 400
