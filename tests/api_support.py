"""Fixtures for the API tests: a real app on a real store (SQLite file or
PostgreSQL schema, from conftest's `ledger_config`), real tokens."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import httpx
import pytest
from litestar.testing import TestClient

from api.app import create_app
from api.auth import SCOPES, create_operator_token, create_token
from api.config import ApiConfig
from cli.server import UVICORN_FIXED
from ledger.config import LedgerConfig
from tests import loopback_http
from tests.server_process import free_port

DOC = "# Retention\n\nAudit logs are kept for 180 days.\n\n## Access\n\nRestricted documents need a scope.\n"


@dataclass
class Api:
    client: TestClient[Any]
    config: ApiConfig
    tokens: dict[str, str]

    def headers(self, who: str = "admin", **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}", **extra}

    @property
    def services(self) -> Any:
        return self.client.app.state.services

    def document(self, text: str = DOC, who: str = "admin", **fields: Any) -> dict[str, Any]:
        response = self.client.post(
            "/v1/documents",
            json={"path": "handbook/retention.md", "text": text, **fields},
            headers=self.headers(who),
        )
        assert response.status_code in (200, 201), response.text
        body: dict[str, Any] = response.json()
        return body

    def retrieval_body(
        self, doc: dict[str, Any], query: str = "how long are audit logs kept?"
    ) -> dict[str, Any]:
        chunk = doc["chunks"][0]
        return {
            "query": query,
            "engine": "external:test-rag",
            "task": {"task_id": "task-1", "deadline_ms": 1500},
            "selected_entries": [
                {
                    "document_id": doc["document_id"],
                    "chunk_id": chunk["chunk_id"],
                    "score": "3.25",
                    "snippet": "Audit logs are kept for 180 days.",
                }
            ],
        }

    def retrieval(self, doc: dict[str, Any], who: str = "admin", **headers: str) -> dict[str, Any]:
        response = self.client.post(
            "/v1/retrievals", json=self.retrieval_body(doc), headers=self.headers(who, **headers)
        )
        assert response.status_code == 201, response.text
        body: dict[str, Any] = response.json()
        return body


def make_tokens(config: ApiConfig) -> dict[str, str]:
    path = config.token_path
    return {
        "admin": create_token(path, "acme", list(SCOPES)),
        "reader": create_token(path, "acme", ["audit.read"]),
        "writer": create_token(path, "acme", ["retrieval.write", "ingest.write"]),
        "other": create_token(path, "globex", list(SCOPES)),
        "other-reader": create_token(path, "globex", ["audit.read"]),
        "operator": create_operator_token(path),  # bound to no tenant: whole-log export only
    }


def api_config(ledger_config: LedgerConfig, **overrides: Any) -> ApiConfig:
    base = ApiConfig(
        ledger=ledger_config, rate_limit_rps=10_000, rate_limit_burst=10_000, embedded_projections=True
    )
    return replace(base, **overrides)


@pytest.fixture
def make_api(ledger_config: LedgerConfig) -> Iterator[Callable[..., Api]]:
    opened: list[TestClient[Any]] = []

    def factory(**overrides: Any) -> Api:
        config = api_config(ledger_config, **overrides)
        tokens = make_tokens(config)
        client = TestClient(create_app(config), raise_server_exceptions=False)
        client.__enter__()
        opened.append(client)
        return Api(client, config, tokens)

    yield factory
    for client in opened:
        client.__exit__(None, None, None)


@pytest.fixture
def api(make_api: Callable[..., Api]) -> Api:
    return make_api()


@contextmanager
def serving(
    ledger_config: LedgerConfig, **overrides: Any
) -> Iterator[tuple[LoopbackServer, ApiConfig, dict[str, str]]]:
    """The real app on loopback with the usual tokens: (the server, its config, tokens by role)."""
    config = api_config(ledger_config, **overrides)
    tokens = make_tokens(config)
    with LoopbackServer(config) as server:
        yield server, config, tokens


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@contextmanager
def http_to_served(ledger_config: LedgerConfig) -> Iterator[tuple[httpx.Client, dict[str, str]]]:
    """`serving`, with an HTTP client on its address: (the client, tokens by role)."""
    with serving(ledger_config) as (server, _, tokens):
        with loopback_http.client(base_url=server.base_url, timeout=60) as http:
            yield http, tokens


@contextmanager
def admin_http(ledger_config: LedgerConfig) -> Iterator[httpx.Client]:
    """`serving`, with an HTTP client that sends the admin token on every request."""
    with serving(ledger_config) as (server, _, tokens):
        with loopback_http.client(base_url=server.base_url, headers=bearer(tokens["admin"])) as http:
            yield http


class LoopbackServer:
    """The real app under a real uvicorn on 127.0.0.1, in a thread of this process."""

    def __init__(self, config: ApiConfig) -> None:
        import threading

        import uvicorn

        self.port = free_port()
        self.app = create_app(config)
        self.server = uvicorn.Server(
            uvicorn.Config(
                self.app,
                host="127.0.0.1",
                port=self.port,
                log_level="warning",
                access_log=False,
                http=UVICORN_FIXED["http"],  # the protocol `citeledger serve` runs
            )
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LoopbackServer:
        import time

        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
