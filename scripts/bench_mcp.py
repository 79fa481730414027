"""MCP latency and throughput, one run, against a real `citeledger serve` (one worker) on
loopback with the committed corpus `tests/corpus` ingested:

  - `search` and `get_document_chunk` over Streamable HTTP (`/mcp`, the SDK's client, one
    connection) against the same calls on `/v1` (`POST /v1/search`, `GET /v1/citations/{id}`,
    one keep-alive httpx client), interleaved in rounds so both see the same machine;
    p50/p95 per call. Target: MCP p95 <= 1.5x /v1.
    The same MCP calls are also timed as bare JSON-RPC POSTs (httpx, no SDK client): the
    server's share of the MCP cost without the client's (its output-schema validation).
  - calls/s over stdio (`citeledger mcp` on the same data directory, the SDK's client).

    python scripts/bench_mcp.py [--calls 200] [--out docs/benchmarks/mcp.md] [--postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from ledger.config import LedgerConfig
from tests.conftest import PG_DSN, pg_connect
from tests.server_process import CLI_MODULE, ROOT, ServerProcess, server_env

TOKEN = "bench-mcp-token-0123456789"
CORPUS = ROOT / "tests" / "corpus"
QUERIES = [
    "how long are audit logs kept",
    "learning budget for conferences and books",
    "notice period after probation",
    "hotel limit per night in the 2026 travel policy",
    "how to restart query-service",
    "recovery time objective",
    "penetration test before the SOC 2 audit",
    "home office allowance for a desk and monitor",
]
ROUNDS = 4


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ingest(base: str, headers: dict[str, str]) -> None:
    with httpx.Client(base_url=base, headers=headers, timeout=60) as http:
        for path in sorted(CORPUS.rglob("*.md")):
            text = path.read_text(encoding="utf-8")
            answer = http.post("/v1/documents", json={"path": str(path.relative_to(CORPUS)), "text": text})
            answer.raise_for_status()


async def timed(calls: int, one: Callable[[int], Awaitable[None]]) -> list[float]:
    latencies = []
    for n in range(calls):
        started = time.perf_counter()
        await one(n)
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


async def http_side(base: str, headers: dict[str, str], calls: int) -> dict[str, list[float]]:
    """Interleaved rounds of /v1 and /mcp for each call kind; latencies in ms."""
    out: dict[str, list[float]] = {
        f"{side} {kind}": [] for side in ("v1", "mcp", "raw") for kind in ("search", "chunk")
    }
    per_round = max(1, calls // ROUNDS)
    async with (
        httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as v1,
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(base + "/mcp", http_client=http)) as mcp,
    ):

        async def v1_search(n: int) -> None:
            answer = await v1.post("/v1/search", json={"input": {"query": QUERIES[n % len(QUERIES)]}})
            assert answer.status_code == 200, answer.text

        async def mcp_search(n: int) -> None:
            result = await mcp.call_tool("search", {"input": {"query": QUERIES[n % len(QUERIES)]}})
            assert not result.is_error, result.structured_content

        first = await v1.post("/v1/search", json={"input": {"query": QUERIES[0], "top_k": 10}})
        citations = [c["citation_id"] for c in first.json()["output"]["citations"]]
        assert citations, "the corpus answers the first query"

        async def v1_chunk(n: int) -> None:
            answer = await v1.get(f"/v1/citations/{citations[n % len(citations)]}")
            assert answer.status_code == 200, answer.text

        async def mcp_chunk(n: int) -> None:
            result = await mcp.call_tool("get_document_chunk", {"citation_id": citations[n % len(citations)]})
            assert not result.is_error, result.structured_content

        rpc_headers = {"Accept": "application/json, text/event-stream"}

        async def raw(name: str, arguments: dict[str, Any]) -> None:
            call = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": name, "arguments": arguments},
            }
            answer = await v1.post("/mcp", json=call, headers=rpc_headers)
            assert answer.status_code == 200 and not answer.json()["result"].get("isError"), answer.text

        async def raw_search(n: int) -> None:
            await raw("search", {"input": {"query": QUERIES[n % len(QUERIES)]}})

        async def raw_chunk(n: int) -> None:
            await raw("get_document_chunk", {"citation_id": citations[n % len(citations)]})

        sides = {
            "v1 search": v1_search,
            "mcp search": mcp_search,
            "raw search": raw_search,
            "v1 chunk": v1_chunk,
            "mcp chunk": mcp_chunk,
            "raw chunk": raw_chunk,
        }
        for warm in sides.values():  # first-call costs out of the figures
            await timed(10, warm)
        for _ in range(ROUNDS):
            for name, one in sides.items():
                out[name] += await timed(per_round, one)
    return out


async def stdio_side(env: dict[str, str], data_dir: Path, citation: str, calls: int) -> dict[str, float]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", CLI_MODULE, "mcp", "--data-dir", str(data_dir)],
        cwd=str(ROOT),
        env={**env, "CITELEDGER_TOKEN": TOKEN},
    )
    # The server's stderr (one access line per call) is not the benchmark's output.
    with open(os.devnull, "w") as quiet:
        return await _stdio_rates(
            Client(stdio_client(params, errlog=quiet), read_timeout_seconds=60), citation, calls
        )


async def _stdio_rates(connect: Client, citation: str, calls: int) -> dict[str, float]:
    rates: dict[str, float] = {}
    async with connect as client:

        async def search(n: int) -> None:
            result = await client.call_tool("search", {"input": {"query": QUERIES[n % len(QUERIES)]}})
            assert not result.is_error, result.structured_content

        async def chunk(n: int) -> None:
            result = await client.call_tool("get_document_chunk", {"citation_id": citation})
            assert not result.is_error, result.structured_content

        for name, one in (("search", search), ("get_document_chunk", chunk)):
            await timed(10, one)
            started = time.perf_counter()
            await timed(calls, one)
            rates[name] = calls / (time.perf_counter() - started)
    return rates


def run(store: str, calls: int) -> tuple[dict[str, list[float]], dict[str, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        schema = None
        database_url = None
        if store == "postgres":
            schema = "bench_" + uuid.uuid4().hex[:12]
            with pg_connect() as conn:
                conn.execute(f'CREATE SCHEMA "{schema}"')
            database_url = f"{PG_DSN}?schema={schema}"
        try:
            config = LedgerConfig(data_dir=data_dir, database_url=database_url)
            quiet = {"CITELEDGER_RATE_LIMIT_RPS": "0", "CITELEDGER_RETENTION_INTERVAL_S": "0"}
            env = server_env(config, TOKEN, **quiet)
            if store == "postgres":
                env["CITELEDGER_EMBEDDED_PROJECTIONS"] = "true"
            headers = {"Authorization": f"Bearer {TOKEN}"}
            with ServerProcess(data_dir, env) as server:
                ingest(server.base_url, headers)
                http_figures = asyncio.run(http_side(server.base_url, headers, calls))
                with httpx.Client(base_url=server.base_url, headers=headers, timeout=60) as v1:
                    found = v1.post("/v1/search", json={"input": {"query": QUERIES[0]}}).json()
                citation = found["output"]["citations"][0]["citation_id"]
                stdio_figures = asyncio.run(stdio_side(env, data_dir, citation, calls))
            return http_figures, stdio_figures
        finally:
            if schema is not None:
                with pg_connect() as conn:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def table(results: dict[str, tuple[dict[str, list[float]], dict[str, float]]]) -> str:
    lines = [
        "| store | call | /v1 p50 ms | /v1 p95 ms | MCP HTTP p50 ms | MCP HTTP p95 ms | p95 MCP / v1 "
        "| target | bare JSON-RPC p50 / p95 ms | stdio calls/s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for store, (http_figures, stdio_figures) in results.items():
        for kind, tool in (("search", "search"), ("chunk", "get_document_chunk")):
            v1, mcp, bare = (
                http_figures[f"v1 {kind}"],
                http_figures[f"mcp {kind}"],
                http_figures[f"raw {kind}"],
            )
            ratio = percentile(mcp, 0.95) / percentile(v1, 0.95)
            verdict = "met" if ratio <= 1.5 else "missed"
            lines.append(
                f"| {store} | `{tool}` | {statistics.median(v1):.2f} | {percentile(v1, 0.95):.2f} | "
                f"{statistics.median(mcp):.2f} | {percentile(mcp, 0.95):.2f} | {ratio:.2f}x | "
                f"<= 1.5x {verdict} | {statistics.median(bare):.2f} / {percentile(bare, 0.95):.2f} | "
                f"{stdio_figures[tool]:.0f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=200, help="calls per kind and side")
    parser.add_argument("--postgres", action="store_true", help="also on PostgreSQL")
    parser.add_argument("--out", type=Path, help="write the table (markdown) here")
    args = parser.parse_args()
    stores = ["sqlite", "postgres"] if args.postgres else ["sqlite"]
    results = {store: run(store, args.calls) for store in stores}
    rendered = table(results)
    print(rendered)
    if args.out:
        args.out.write_text(rendered + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
