"""The MCP end-to-end tests' setup: a real ledger app under uvicorn on loopback (the `/v1`
twin and the Streamable HTTP transport at `/mcp`), and real `citeledger mcp` subprocesses on
the same store for stdio — all driven by the SDK's own client."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from api.config import ApiConfig
from ledger.config import LedgerConfig
from tests import forked_cli, loopback_http
from tests.api_support import LoopbackServer, serving
from tests.server_process import ROOT

TRANSPORTS = ("http", "stdio", "stdio-url")
SECRET_FIELDS = frozenset({"receipt_id", "citation_id", "captured_at", "ciphertext", "nonce", "commitment"})


@dataclass
class Ledger:
    """One store with its tokens, served over HTTP; MCP clients over either transport."""

    config: ApiConfig
    tokens: dict[str, str]
    server: LoopbackServer

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def headers(self, who: str = "admin", **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}", **extra}

    def v1(self, method: str, path: str, who: str = "admin", **kwargs: Any) -> httpx.Response:
        headers = {**self.headers(who), **kwargs.pop("headers", {})}
        return loopback_http.request(method, self.base_url + path, headers=headers, timeout=30, **kwargs)

    def stdio_env(self, who: str, **settings: str) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if not key.startswith("CITELEDGER_")}
        env.update(
            {
                "PYTHONPATH": str(ROOT),
                "CITELEDGER_TOKEN": self.tokens[who],
                "CITELEDGER_DATA_DIR": str(self.config.ledger.data_dir),
                "CITELEDGER_RATE_LIMIT_RPS": "100000",
                "CITELEDGER_RATE_LIMIT_BURST": "100000",
            }
        )
        if self.config.ledger.database_url:
            env["CITELEDGER_DATABASE_URL"] = self.config.ledger.database_url
        env.update(settings)
        return env

    def stdio_params(self, who: str, *, remote: bool = False, **settings: str) -> StdioServerParameters:
        """`citeledger mcp` on the store's data directory, or (`remote`) in front of the
        loopback server with `--url`."""
        where = ["--url", self.base_url] if remote else ["--data-dir", str(self.config.ledger.data_dir)]
        env = self.stdio_env(who, **settings)
        return StdioServerParameters(
            command=sys.executable,
            args=forked_cli.launch_args(["mcp", *where], env),
            cwd=str(ROOT),
            env=env,
        )

    @asynccontextmanager
    async def client(self, transport: str, who: str = "admin", **settings: str) -> AsyncIterator[Client]:
        """An MCP client of `who`; `settings` (CITELEDGER_*) apply to a stdio server."""
        if transport in ("stdio", "stdio-url"):
            params = self.stdio_params(who, remote=transport == "stdio-url", **settings)
            async with Client(params, read_timeout_seconds=60) as client:
                yield client
            return
        async with httpx2.AsyncClient(headers=self.headers(who), timeout=60) as http:
            async with Client(streamable_http_client(self.base_url + "/mcp", http_client=http)) as client:
                yield client


@pytest.fixture
def mcp_ledger(ledger_config: LedgerConfig) -> Iterator[Ledger]:
    with serving(ledger_config) as (server, config, tokens):
        yield Ledger(config, tokens, server)


def answer(result: CallToolResult) -> dict[str, Any]:
    """A successful call's structured answer."""
    assert not result.is_error, result.structured_content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def refusal(result: CallToolResult) -> dict[str, Any]:
    """A refused call's error envelope (a result with isError, never a protocol error): the
    JSON of its one text content, and no `structuredContent` a schema-checking client would
    compare with the tool's output schema."""
    assert result.is_error, result.content
    assert result.structured_content is None, result.structured_content
    assert len(result.content) == 1 and isinstance(result.content[0], TextContent)
    envelope = json.loads(result.content[0].text)
    assert isinstance(envelope, dict)
    return envelope


def comparable(value: Any) -> Any:
    """An entry with what differs between two recordings of the same input dropped: fresh ids,
    the time a policy was frozen, and the random parts of sealed values (ciphertext, nonce,
    salted commitment)."""
    if isinstance(value, dict):
        return {key: comparable(item) for key, item in value.items() if key not in SECRET_FIELDS}
    if isinstance(value, list):
        return [comparable(item) for item in value]
    return value
