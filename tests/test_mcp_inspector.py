"""The official MCP Inspector CLI (npm, run as a subprocess) against the real server's `/mcp`:
a refusal is a tool error it reports as such (exit 5, `tool_is_error`) with the error code
readable in the result it prints, never a result that breaks the tool's `outputSchema`
(exit 1, "Structured content does not match..." / "data must have required property").
Inspector 0.15 (stdio: it cannot send a bearer header) must show the refusal, not that error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.inspector_support import InspectorRun, call_tool, call_tool_stdio
from tests.mcp_support import Ledger, mcp_ledger  # noqa: F401 - fixture

TEXT = "# Retention\n\nAudit logs are kept for 180 days.\n"
TOOL_ERROR = 5  # the Inspector's exit code for a result with isError: true


def _envelope(run: InspectorRun) -> dict[str, Any]:
    """The refusal the Inspector printed: isError, no structuredContent, the envelope as text."""
    assert run.returncode == TOOL_ERROR, (run.returncode, run.stderr)
    assert "tool_is_error" in run.stderr, run.stderr
    assert "output schema" not in run.stderr and "required property" not in run.stderr
    assert run.result is not None and run.result["isError"] is True
    assert "structuredContent" not in run.result
    envelope: dict[str, Any] = json.loads(run.result["content"][0]["text"])
    return envelope


@pytest.mark.parametrize("backend", ["sqlite"])  # the transport's shape, not the store, is tested
def test_inspector_cli_reads_answers_and_refusals(mcp_ledger: Ledger, tmp_path: Path) -> None:
    doc = mcp_ledger.v1("POST", "/v1/documents", json={"path": "a/retention.md", "text": TEXT}).json()
    retrieval = {
        "query": "how long are audit logs kept?",
        "engine": "external:agent",
        "selected_entries": [
            {
                "document_id": doc["document_id"],
                "chunk_id": doc["chunks"][0]["chunk_id"],
                "score": "2.5",
                "snippet": "Audit logs are kept for 180 days.",
            }
        ],
    }
    receipt = mcp_ledger.v1("POST", "/v1/retrievals", json=retrieval).json()
    url = mcp_ledger.base_url + "/mcp"

    def run(who: str, tool: str, **args: str) -> InspectorRun:
        return call_tool(url, mcp_ledger.tokens[who], tool, args, tmp_path)

    found = run("admin", "get_document_chunk", citation_id=receipt["citation_ids"][0])
    assert found.returncode == 0, found.stderr  # its structuredContent passed the Inspector's check
    assert found.result is not None and found.result["structuredContent"]["data"]["path"] == "a/retention.md"

    missing = _envelope(run("admin", "get_document_chunk", citation_id="never-was"))
    assert missing["error"]["code"] == "chunk_not_found" and missing["http_status"] == 404
    denied = _envelope(run("writer", "get_receipt", receipt_id=receipt["receipt_id"]))
    assert denied["error"]["code"] == "forbidden" and denied["http_status"] == 403
    bad = _envelope(run("admin", "search", input='{"query": 5}'))
    assert bad["error"]["code"] == "bad_request" and "input.query" in bad["error"]["message"]
    unknown = _envelope(run("reader", "get_receipt", receipt_id="nope"))
    assert unknown["error"]["code"] == "not_found"
    lookalike = _envelope(run("admin", "ingest_document", path="a\uff0fb.md", text="# A\n\nB.\n"))
    assert lookalike["error"]["code"] == "lookalike_separator" and lookalike["http_status"] == 422


@pytest.mark.parametrize("backend", ["sqlite"])
def test_inspector_0_15_over_stdio_shows_the_refusal(mcp_ledger: Ledger, tmp_path: Path) -> None:
    params = mcp_ledger.stdio_params("admin")
    env = {k: v for k, v in (params.env or {}).items() if k.startswith("CITELEDGER_") or k == "PYTHONPATH"}
    server = [params.command, *params.args]
    refused = call_tool_stdio(server, env, "get_document_chunk", {"citation_id": "never-was"}, tmp_path)
    assert refused.returncode == 0, refused.stdout + refused.stderr  # 0.15 exits 0 on isError
    assert "does not match" not in refused.stdout + refused.stderr
    assert refused.result is not None and refused.result["isError"] is True
    assert "structuredContent" not in refused.result
    envelope = json.loads(refused.result["content"][0]["text"])
    assert envelope["error"]["code"] == "chunk_not_found" and envelope["http_status"] == 404
    listed = call_tool_stdio(server, env, "list_receipts", {}, tmp_path)
    assert listed.returncode == 0 and listed.result is not None, listed.stdout + listed.stderr
    assert listed.result["structuredContent"]["receipts"] == []  # an answer passes its schema check
