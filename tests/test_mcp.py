"""MCP end to end, with the SDK's own client: Streamable HTTP against the real app under
uvicorn on loopback, stdio against real `citeledger mcp` subprocesses on the same store;
every test on SQLite and on PostgreSQL. Each tool is called for success and for its
refusals; what it records is compared with what its `/v1` twin records for the same input."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from api.mcp.tools import TOOLS, input_schema, output_schema, untitled
from ledger.config import LedgerConfig
from ledger.schemas.answers import CitationOut, SearchOut
from ledger.schemas.reads import ReceiptOut, ReceiptVerificationOut
from ledger.schemas.requests import DocumentIn, RetrievalIn, SearchIn
from ledger.storage.store import LEDGER_STREAM_ID
from tests import loopback_http
from tests.api_support import serving
from tests.client_support import retrieval
from tests.conftest import RawStore
from tests.mcp_support import TRANSPORTS, Ledger, answer, comparable, mcp_ledger, refusal  # noqa: F401 - fixture
from tests.server_process import CLI_MODULE, ROOT

TEXT = "# Retention\n\nAudit logs are kept for 180 days.\n\n## Access\n\nRestricted documents need a scope.\n"
SNIPPET = "Audit logs are kept for 180 days."
NOT_FOUND = "The requested citation was not found"


def _event(ledger: Ledger, position: int) -> dict[str, Any]:
    response = ledger.v1("GET", f"/v1/events/{position}")
    assert response.status_code == 200, response.text
    event: dict[str, Any] = response.json()["event"]
    return event


def _events(ledger: Ledger, event_type: str, **filters: str) -> list[dict[str, Any]]:
    """The tenant's events of a type; waits (bounded) for the read model to catch up with
    entries another process appended."""
    deadline = time.monotonic() + 10
    while True:
        page = ledger.v1(
            "GET", "/v1/events", params={"type": event_type, **filters, "limit": 500, "order": "asc"}
        )
        events: list[dict[str, Any]] = page.json()["events"]
        if events or time.monotonic() > deadline:
            return events
        time.sleep(0.2)


def _undescribed(schema: dict[str, Any]) -> list[str]:
    """The arguments (at any depth, through $defs) that carry no description."""
    defs, missing = schema.get("$defs", {}), []

    def walk(node: dict[str, Any], path: str, seen: frozenset[str]) -> None:
        for key, value in node.get("properties", {}).items():
            if "description" not in value:
                missing.append(f"{path}{key}")
            branches = [value, value.get("items") or {}, *value.get("anyOf", [])]
            refs = [b.get("$ref") or (b.get("items") or {}).get("$ref") for b in branches]
            for ref in filter(None, refs):
                name = ref.rsplit("/", 1)[-1]
                if name not in seen:
                    walk(defs[name], f"{path}{key}.", seen | {name})

    walk(schema, "", frozenset())
    return missing


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_tools_and_resources_are_listed_with_the_http_contracts_schemas(
    mcp_ledger: Ledger, transport: str
) -> None:
    async def scenario() -> None:
        async with mcp_ledger.client(transport) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            resources = {str(r.uri) for r in (await client.list_resources()).resources}
            templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        assert set(tools) == {
            "search",
            "get_document_chunk",
            "record_retrieval",
            "ingest_document",
            "get_receipt",
            "list_receipts",
            "find_documents",
            "replay_receipt",
            "verify_receipt",
        }
        expected: dict[str, tuple[type[BaseModel], type[BaseModel]]] = {
            spec.name: (spec.arguments, spec.answer) for spec in TOOLS
        }
        for name, tool in tools.items():
            model_in, model_out = expected[name]
            assert tool.input_schema == input_schema(model_in), name
            assert tool.output_schema == output_schema(model_out), name
            # Every argument says what it is for, in words (the generated titles are left out).
            assert not _undescribed(tool.input_schema), (name, _undescribed(tool.input_schema))
            assert '"title": "' not in json.dumps(tool.input_schema), name
            assert tool.annotations is not None and tool.annotations.destructive_hint is False
        # One source: the tool schemas are the models of the HTTP contract's OpenAPI document.
        assert tools["search"].input_schema == untitled(SearchIn.model_json_schema())
        assert tools["search"].output_schema == untitled(SearchOut.model_json_schema(mode="serialization"))
        assert tools["get_document_chunk"].output_schema == untitled(
            CitationOut.model_json_schema(mode="serialization")
        )
        assert tools["ingest_document"].input_schema["properties"]["title"]["description"]
        record_fields = set(tools["record_retrieval"].input_schema["properties"])
        assert record_fields == set(RetrievalIn.model_fields) | {"idempotency_key"}
        ingest_fields = set(tools["ingest_document"].input_schema["properties"])
        assert ingest_fields == set(DocumentIn.model_fields) | {"idempotency_key"}
        assert tools["search"].input_schema["additionalProperties"] is False
        reads = {"get_document_chunk", "get_receipt", "list_receipts", "find_documents", "verify_receipt"}
        for name, tool in tools.items():
            assert tool.annotations is not None
            assert tool.annotations.read_only_hint is (name in reads), name
        # A repeat records a new receipt (unless its idempotency_key repeats): not idempotent.
        for name, tool in tools.items():
            assert tool.annotations is not None
            assert tool.annotations.idempotent_hint is (name in reads | {"ingest_document"}), name
        assert resources == {"citeledger://checkpoints/latest", "citeledger://keys"}
        assert templates == {"citeledger://receipts/{receipt_id}"}

    anyio.run(scenario)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_each_tool_answers_and_records_what_its_http_twin_records(mcp_ledger: Ledger, transport: str) -> None:
    ledger = mcp_ledger
    meta = {"run_id": "run-mcp-e2e", "trace_id": "trace-mcp-e2e"}
    twin_headers = {"X-Run-Id": "run-mcp-e2e", "X-Trace-Id": "trace-mcp-e2e"}

    async def scenario() -> dict[str, Any]:
        async with ledger.client(transport) as client:
            doc = answer(
                await client.call_tool("ingest_document", {"path": "handbook/retention.md", "text": TEXT})
            )
            again = answer(
                await client.call_tool("ingest_document", {"path": "handbook/retention.md", "text": TEXT})
            )
            recorded = answer(await client.call_tool("record_retrieval", retrieval(doc), meta=meta))
            envelope = {"task_id": "task-9", "input": {"query": "audit logs kept days", "top_k": 3}}
            found = answer(await client.call_tool("search", envelope, meta=meta))
            chunk = answer(
                await client.call_tool("get_document_chunk", {"citation_id": recorded["citation_ids"][0]})
            )
            receipt = answer(await client.call_tool("get_receipt", {"receipt_id": recorded["receipt_id"]}))
            page = answer(await client.call_tool("list_receipts", {"trace_id": "trace-mcp-e2e"}))
            replayed = answer(await client.call_tool("replay_receipt", {"receipt_id": found["receipt_id"]}))
            verified = answer(
                await client.call_tool("verify_receipt", {"receipt_id": recorded["receipt_id"]})
            )
            checkpoint = await client.read_resource("citeledger://checkpoints/latest")
            keys = await client.read_resource("citeledger://keys")
            by_uri = await client.read_resource(f"citeledger://receipts/{recorded['receipt_id']}")
        return {
            "doc": doc,
            "again": again,
            "recorded": recorded,
            "envelope": envelope,
            "found": found,
            "chunk": chunk,
            "receipt": receipt,
            "page": page,
            "replayed": replayed,
            "verified": verified,
            "checkpoint": json.loads(checkpoint.contents[0].text),  # type: ignore[union-attr]
            "keys": json.loads(keys.contents[0].text),  # type: ignore[union-attr]
            "by_uri": json.loads(by_uri.contents[0].text),  # type: ignore[union-attr]
        }

    got = anyio.run(scenario)
    doc, recorded, found = got["doc"], got["recorded"], got["found"]
    assert doc["dedup"] is False and got["again"]["dedup"] is True
    assert doc["version_id"] == got["again"]["version_id"]
    assert recorded["run_id"] == "run-mcp-e2e" and recorded["trace_id"] == "trace-mcp-e2e"
    assert recorded["server_version"] and recorded["policy_version"]
    assert found["status"] == "ok" and found["output"]["citations"], found
    assert got["chunk"]["data"]["chunk_text"].endswith(SNIPPET)
    span = got["chunk"]["data"]["cited_span"]
    assert got["chunk"]["data"]["chunk_text"][span["start"] : span["end"]] == SNIPPET
    assert got["receipt"]["receipt_id"] == recorded["receipt_id"]
    ReceiptOut.model_validate(got["receipt"])
    listed = {item["receipt_id"] for item in got["page"]["receipts"]}
    assert {recorded["receipt_id"], found["receipt_id"]} <= listed
    assert got["replayed"]["integrity"] == "ok" and got["replayed"]["replay_receipt_id"]
    verified = ReceiptVerificationOut.model_validate(got["verified"])
    assert verified.intact is True and verified.problem is None
    assert verified.checkpoint.tree_size >= recorded["position"]
    assert got["checkpoint"]["checkpoint"]["tree_size"] >= 1 and got["checkpoint"]["origin"]
    assert got["keys"]["root_public_key"] and got["keys"]["keys"]
    assert got["by_uri"]["receipt_id"] == recorded["receipt_id"]

    # The HTTP twins, same input, same correlation ids: the same events.
    twin = ledger.v1("POST", "/v1/retrievals", json=retrieval(doc), headers=twin_headers)
    assert twin.status_code == 201, twin.text
    twin_search = ledger.v1("POST", "/v1/search", json=got["envelope"], headers=twin_headers)
    assert twin_search.status_code == 200, twin_search.text
    for mcp_position, http_position in (
        (recorded["position"], twin.json()["position"]),
        (found["position"], twin_search.json()["position"]),
    ):
        by_mcp, by_http = _event(ledger, mcp_position), _event(ledger, http_position)
        assert by_mcp["type"] == by_http["type"] == "RetrievalRecorded"
        for field in ("tenant_id", "actor", "run_id", "trace_id"):
            assert by_mcp[field] == by_http[field], field
        assert by_mcp["trace_id"] == "trace-mcp-e2e" and by_mcp["run_id"] == "run-mcp-e2e"
        mcp_payload, http_payload = comparable(by_mcp["payload"]), comparable(by_http["payload"])
        # A search ranks at the log's position, which the first of the two moved on.
        for payload in (mcp_payload, http_payload):
            payload.get("search", {}).pop("corpus_position", None)
        assert mcp_payload == http_payload
    replay_events = _events(ledger, "ReplayRecorded")
    assert any(e["payload"]["original_receipt_id"] == found["receipt_id"] for e in replay_events)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_each_tool_refuses_with_the_http_contracts_error(mcp_ledger: Ledger, transport: str) -> None:
    ledger = mcp_ledger
    doc = ledger.v1("POST", "/v1/documents", json={"path": "a/retention.md", "text": TEXT}).json()
    restricted = ledger.v1(
        "POST", "/v1/documents", json={"path": "a/secret.md", "text": TEXT, "sensitivity": "restricted"}
    ).json()
    mine = ledger.v1("POST", "/v1/retrievals", json=retrieval(doc)).json()
    secret = ledger.v1("POST", "/v1/retrievals", json=retrieval(restricted)).json()
    erased_doc = ledger.v1("POST", "/v1/documents", json={"path": "a/gone.md", "text": TEXT + "\nx\n"}).json()
    erased = ledger.v1("POST", "/v1/retrievals", json=retrieval(erased_doc)).json()
    assert (
        ledger.v1("POST", "/v1/erasures", json={"document_id": erased_doc["document_id"]}).status_code == 200
    )
    theirs = ledger.v1("POST", "/v1/retrievals", json=retrieval(doc), who="other")
    assert theirs.status_code == 422  # another tenant cannot even cite our document
    their_doc = ledger.v1("POST", "/v1/documents", json={"path": "g.md", "text": TEXT}, who="other").json()
    their_receipt = ledger.v1("POST", "/v1/retrievals", json=retrieval(their_doc), who="other").json()

    async def scenario() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with ledger.client(transport, "writer") as writer:  # retrieval.write, ingest.write
            out["missing"] = refusal(
                await writer.call_tool("get_document_chunk", {"citation_id": "never-was"})
            )
            out["erased"] = refusal(
                await writer.call_tool("get_document_chunk", {"citation_id": erased["citation_ids"][0]})
            )
            out["restricted"] = refusal(
                await writer.call_tool(
                    "get_document_chunk",
                    {"citation_id": secret["citation_ids"][0]},
                    meta={"trace_id": "t-denied"},
                )
            )
            out["their_chunk"] = refusal(
                await writer.call_tool(
                    "get_document_chunk", {"citation_id": their_receipt["citation_ids"][0]}
                )
            )
            out["no_scope"] = refusal(
                await writer.call_tool("get_receipt", {"receipt_id": mine["receipt_id"]})
            )
            out["bad_args"] = refusal(await writer.call_tool("search", {"input": {"query": 5}}))
            out["extra_arg"] = refusal(await writer.call_tool("search", {"input": {"query": "x"}, "evil": 1}))
            out["snippet"] = refusal(
                await writer.call_tool("record_retrieval", retrieval(doc, snippet="Not in the chunk at all."))
            )
            keyed = {**retrieval(doc), "idempotency_key": "key-1"}
            out["first"] = answer(await writer.call_tool("record_retrieval", keyed))
            out["repeat"] = answer(await writer.call_tool("record_retrieval", keyed))
            out["reused"] = refusal(
                await writer.call_tool("record_retrieval", {**keyed, "query": "another question"})
            )
            out["bad_meta"] = refusal(
                await writer.call_tool(
                    "search", {"input": {"query": "audit"}}, meta={"trace_id": "no spaces"}
                )
            )
        async with ledger.client(transport, "reader") as reader:  # audit.read only
            out["ingest_denied"] = refusal(
                await reader.call_tool("ingest_document", {"path": "x.md", "text": "x"})
            )
            out["their_receipt"] = refusal(
                await reader.call_tool("get_receipt", {"receipt_id": their_receipt["receipt_id"]})
            )
            out["their_verify"] = refusal(
                await reader.call_tool("verify_receipt", {"receipt_id": their_receipt["receipt_id"]})
            )
            out["cursor"] = refusal(await reader.call_tool("list_receipts", {"cursor": "bogus"}))
            out["their_list"] = answer(await reader.call_tool("list_receipts", {}))
            try:
                await reader.read_resource(f"citeledger://receipts/{their_receipt['receipt_id']}")
            except MCPError as exc:
                out["their_resource"] = exc.error
        async with ledger.client(transport, "admin") as admin:
            out["replay_unknown"] = refusal(await admin.call_tool("replay_receipt", {"receipt_id": "nope"}))
        return out

    out = anyio.run(scenario)

    def code(name: str) -> str:
        return str(out[name]["error"]["code"])

    # Read-back: one not-found message for every not-found reason; the reason is the code.
    assert code("missing") == "chunk_not_found" and out["missing"]["http_status"] == 404
    assert code("erased") == "chunk_retention_expired"
    assert code("their_chunk") == "chunk_not_found"  # another tenant's citation does not exist here
    for name in ("missing", "erased", "their_chunk"):
        assert out[name]["error"]["message"] == NOT_FOUND
        assert out[name]["error"]["retryable"] is False
        assert set(out[name]) == {"error", "run_id", "trace_id", "http_status"}
    assert code("restricted") == "restricted_scope_required" and out["restricted"]["http_status"] == 403
    assert "chunk_text" not in json.dumps(out["restricted"])
    denials = _events(ledger, "AccessDenied", trace_id="t-denied")
    assert [d["payload"]["resource_id"] for d in denials] == [secret["citation_ids"][0]]
    assert denials[0]["actor"] == f"token:{ledger.tokens['writer'].split('_')[1]}"
    assert code("no_scope") == "forbidden" and "audit.read" in out["no_scope"]["error"]["message"]
    assert code("bad_args") == "bad_request" and "input.query" in out["bad_args"]["error"]["message"]
    assert code("extra_arg") == "bad_request" and "evil" in out["extra_arg"]["error"]["message"]
    assert code("snippet") == "snippet_not_in_chunk" and out["snippet"]["http_status"] == 422
    assert "Not in the chunk" not in json.dumps(out["snippet"])  # no caller text echoed back
    assert out["first"]["dedup"] is False and out["repeat"]["dedup"] is True
    assert out["repeat"]["receipt_id"] == out["first"]["receipt_id"]
    assert code("reused") == "idempotency_key_reused" and out["reused"]["http_status"] == 409
    assert code("bad_meta") == "bad_request" and "_meta.trace_id" in out["bad_meta"]["error"]["message"]
    assert code("ingest_denied") == "forbidden" and out["ingest_denied"]["http_status"] == 403
    for name in ("their_receipt", "their_verify", "replay_unknown"):
        assert code(name) == "not_found" and out[name]["http_status"] == 404, name
    assert code("cursor") in ("invalid_cursor", "bad_request")
    assert their_receipt["receipt_id"] not in {r["receipt_id"] for r in out["their_list"]["receipts"]}
    assert mine["receipt_id"] in {r["receipt_id"] for r in out["their_list"]["receipts"]}
    resource_error = out["their_resource"]
    assert resource_error.data["error"]["code"] == "not_found" and resource_error.data["http_status"] == 404
    for body in out.values():
        text = json.dumps(body if isinstance(body, dict) else {})
        assert "Traceback" not in text and "Restricted documents need" not in text


def test_http_mount_keeps_the_v1_contract(mcp_ledger: Ledger) -> None:
    """`/mcp` is behind the same guard, headers and error envelope as `/v1`; stateless."""
    url = mcp_ledger.base_url + "/mcp"
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    anonymous = loopback_http.post(url, json=call, headers=accept, timeout=10)
    assert anonymous.status_code == 401 and anonymous.json()["error"]["code"] == "unauthorized"
    assert anonymous.headers["x-run-id"] and anonymous.headers["x-request-duration-ms"]
    operator = loopback_http.post(
        url, json=call, headers={**accept, **mcp_ledger.headers("operator")}, timeout=10
    )
    assert operator.status_code == 403
    session = loopback_http.post(
        url, json=call, headers={**accept, **mcp_ledger.headers(), "Mcp-Session-Id": "abc"}, timeout=10
    )
    assert session.status_code == 400
    assert session.json()["error"] == {
        "code": "bad_request",
        "message": "MCP session state is not supported",
        "retryable": False,
    }
    traced = loopback_http.post(
        url,
        json={
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "search", "arguments": {"input": {"query": "audit logs"}}},
        },
        headers={
            **accept,
            **mcp_ledger.headers(),
            "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        },
        timeout=30,
    )
    assert traced.status_code == 200, traced.text
    assert traced.headers["x-trace-id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert "mcp-session-id" not in traced.headers
    result = traced.json()["result"]
    assert result["structuredContent"]["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    position = result["structuredContent"]["position"]
    assert _event(mcp_ledger, position)["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    protocol_misuse = loopback_http.post(
        url,
        json={"jsonrpc": "2.0", "id": 3, "method": "no/such/method", "params": {}},
        headers={**accept, **mcp_ledger.headers()},
        timeout=10,
    )
    assert "error" in protocol_misuse.json() and "result" not in protocol_misuse.json()
    unknown_tool = loopback_http.post(
        url,
        json={"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "nope", "arguments": {}}},
        headers={**accept, **mcp_ledger.headers()},
        timeout=10,
    )
    assert unknown_tool.json()["error"]["message"] == "Unknown tool: nope"
    # Stateless: no stream to open, no session to end; and the /v1 limits hold.
    for method in ("GET", "DELETE"):
        refused = loopback_http.request(method, url, headers={**accept, **mcp_ledger.headers()}, timeout=10)
        assert refused.status_code == 405 and refused.headers["allow"] == "POST"
        assert refused.json()["error"]["code"] == "method_not_allowed"
    too_large = loopback_http.post(
        url,
        content=b"[" + b"1," * (mcp_ledger.config.limits.max_body_bytes // 2) + b"1]",
        headers={**accept, **mcp_ledger.headers()},
        timeout=30,
    )
    assert too_large.status_code == 413 and too_large.json()["error"]["code"] == "payload_too_large"
    elsewhere = loopback_http.post(
        url + "/x", json=call, headers={**accept, **mcp_ledger.headers()}, timeout=10
    )
    assert elsewhere.status_code == 404


def _stdio_exchange(ledger: Ledger, who: str, messages: list[dict[str, Any]]) -> tuple[int, list[str], str]:
    """Run `citeledger mcp`, send `messages` one line each, read stdout until every request
    was answered, then close stdin; (exit status, stdout lines, stderr)."""
    expected = {message["id"] for message in messages if "id" in message}
    process = subprocess.Popen(
        [sys.executable, "-m", CLI_MODULE, "mcp", "--data-dir", str(ledger.config.ledger.data_dir)],
        cwd=ROOT,
        env=ledger.stdio_env(who),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    lines: list[str] = []
    try:
        try:
            for message in messages:
                process.stdin.write(json.dumps(message) + "\n")
            process.stdin.flush()
        except BrokenPipeError:  # stopped before reading (a refused token)
            pass
        answered: set[int] = set()
        while answered != expected:
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
            answered.add(json.loads(line).get("id"))
        try:
            process.stdin.close()
        except BrokenPipeError:
            pass
        process.wait(timeout=60)
        lines += process.stdout.read().splitlines()
        return process.returncode, lines, process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_stdio_writes_nothing_but_protocol_to_stdout(mcp_ledger: Ledger) -> None:
    legacy = "2025-11-25"
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": legacy,
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "search", "arguments": {"input": {"query": "audit logs"}}},
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "get_document_chunk", "arguments": {}},
        },
        {"jsonrpc": "2.0", "id": 5, "method": "no/such/method"},
        {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "nope", "arguments": {}}},
    ]
    status, lines, stderr = _stdio_exchange(mcp_ledger, "admin", messages)
    assert status == 0, stderr
    replies = [json.loads(line) for line in lines]  # every line is JSON-RPC
    assert all(reply.get("jsonrpc") == "2.0" for reply in replies)
    by_id = {reply["id"]: reply for reply in replies if "id" in reply}
    assert set(by_id) == {1, 2, 3, 4, 5, 6}
    assert by_id[3]["result"]["structuredContent"]["status"] in ("ok", "no_hit")
    assert by_id[4]["result"]["isError"] is True
    assert "structuredContent" not in by_id[4]["result"]  # the envelope is the text, as JSON
    assert json.loads(by_id[4]["result"]["content"][0]["text"])["error"]["code"] == "bad_request"
    assert "error" in by_id[5]  # protocol misuse is a JSON-RPC error, not a tool result
    assert by_id[6]["error"]["message"] == "Unknown tool: nope"

    status, lines, stderr = _stdio_exchange(mcp_ledger, "operator", messages[:1])
    assert status == 2 and lines == []
    assert "operator" in stderr


def test_rate_limit_applies_to_both_transports_and_history_is_an_opt_in_resource(
    ledger_config: LedgerConfig,
) -> None:
    limits = {"rate_limit_rps": 0.001, "rate_limit_burst": 4, "mcp_history_resource": True}
    with serving(ledger_config, **limits) as (server, config, tokens):
        ledger = Ledger(config, tokens, server)
        assert (
            ledger.v1("POST", "/v1/documents", who="writer", json={"path": "a.md", "text": TEXT}).status_code
            == 201
        )
        url = ledger.base_url + "/mcp"
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {"Accept": "application/json, text/event-stream", **ledger.headers("reader")}
        statuses = [loopback_http.post(url, json=call, headers=headers, timeout=10) for _ in range(5)]
        assert [s.status_code for s in statuses] == [200, 200, 200, 200, 429]
        assert statuses[-1].json()["error"]["code"] == "rate_limited" and statuses[-1].headers["retry-after"]

        async def scenario() -> tuple[set[str], dict[str, Any], list[dict[str, Any]]]:
            async with ledger.client("http", "admin") as client:
                listed = {str(r.uri) for r in (await client.list_resources()).resources}
                today = await client.read_resource("citeledger://history/today")
            limited = {"CITELEDGER_RATE_LIMIT_RPS": "0.001", "CITELEDGER_RATE_LIMIT_BURST": "4"}
            async with ledger.client("stdio", "other", **limited) as client:
                results = [await client.call_tool("list_receipts", {}) for _ in range(5)]
            # A refusal is the envelope as text (no structuredContent); an answer has no `error`.
            bodies = [refusal(r) if r.is_error else answer(r) for r in results]
            return listed, json.loads(today.contents[0].text), bodies  # type: ignore[union-attr]

        listed, today, results = anyio.run(scenario)
    assert "citeledger://history/today" in listed
    assert [e["type"] for e in today["events"]] == ["DocumentIngested"]
    assert all(e["tenant_id"] == "acme" for e in today["events"])
    assert [("error" in r) for r in results] == [False, False, False, False, True]
    assert results[-1]["error"]["code"] == "rate_limited" and results[-1]["retry_after_s"] >= 1
    assert results[-1]["error"]["retryable"] is True


def test_verify_receipt_names_what_fails_on_a_rewritten_entry(
    mcp_ledger: Ledger, raw_store: RawStore
) -> None:
    doc = mcp_ledger.v1("POST", "/v1/documents", json={"path": "a.md", "text": TEXT}).json()
    kept = mcp_ledger.v1("POST", "/v1/retrievals", json=retrieval(doc)).json()
    rewritten = mcp_ledger.v1("POST", "/v1/retrievals", json=retrieval(doc)).json()
    rows = raw_store.execute(
        "SELECT state FROM stored_events WHERE originator_id=? AND originator_version=?",
        (raw_store.stream_value(LEDGER_STREAM_ID), rewritten["position"]),
    )
    state = bytes(rows[0][0])
    assert b'"status":"ok"' in state
    raw_store.execute(
        "UPDATE stored_events SET state=? WHERE originator_id=? AND originator_version=?",
        (
            state.replace(b'"status":"ok"', b'"status":"no_hit"'),
            raw_store.stream_value(LEDGER_STREAM_ID),
            rewritten["position"],
        ),
    )

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with mcp_ledger.client("http", "reader") as client:
            intact = answer(await client.call_tool("verify_receipt", {"receipt_id": kept["receipt_id"]}))
            broken = answer(await client.call_tool("verify_receipt", {"receipt_id": rewritten["receipt_id"]}))
        return intact, broken

    intact, broken = anyio.run(scenario)
    assert intact["intact"] is True and intact["problem"] is None
    assert broken["intact"] is False and broken["problem"].startswith("entry:")
