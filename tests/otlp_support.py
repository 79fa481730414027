"""Shared parts of the OTLP tests: one real server per module and backend (uvicorn on
loopback), real tokens, a small corpus ingested through the API, and an SDK tracer whose
real OTLP/HTTP exporter (protobuf or JSON) sends to that server."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from opentelemetry.exporter.otlp.json.http.trace_exporter import OTLPSpanExporter as JsonSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as ProtobufSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter

from api.config import ApiConfig
from ledger.config import LedgerConfig
from tests.api_support import LoopbackServer, api_config, make_tokens
from tests.conftest import fresh_config

CORPUS = {
    "handbook/retention.md": "# Retention\n\nAudit logs are kept for 180 days.\n\n"
    "## Erasure\n\nA data subject may ask for erasure at any time.\n",
    "handbook/access.md": "# Access\n\nRestricted documents need the restricted scope.\n\n"
    "## Tokens\n\nEvery token is bound to one tenant.\n",
    "handbook/backups.md": "# Backups\n\nBackups run every night and are kept for 30 days.\n",
}


@dataclass
class OtlpServer:
    base_url: str
    tokens: dict[str, str]
    config: ApiConfig
    chunks: list[dict[str, Any]]  # {document_id, chunk_id, path, text} of the ingested corpus

    def headers(self, who: str = "admin", **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}", **extra}

    def get(self, path: str, who: str = "admin", **params: Any) -> dict[str, Any]:
        response = httpx.get(f"{self.base_url}{path}", headers=self.headers(who), params=params, timeout=30)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def receipts_of(self, trace_id: str) -> list[dict[str, Any]]:
        receipts: list[dict[str, Any]] = self.get("/v1/receipts", trace_id=trace_id, limit=200, order="asc")[
            "receipts"
        ]
        return receipts

    def receipt(self, receipt_id: str) -> dict[str, Any]:
        return self.get(f"/v1/receipts/{receipt_id}")

    def log_size(self) -> int:
        """The newest position of the tenant's entries."""
        newest, params = 0, {"limit": 500}
        while True:
            page = self.get("/v1/events", **params)
            newest = max([newest, *(int(e["position"]) for e in page["events"])])
            if not page.get("next_cursor"):
                return newest
            params = {"limit": 500, "cursor": page["next_cursor"]}

    def exporter(self, encoding: str = "protobuf", who: str = "writer") -> SpanExporter:
        kind = ProtobufSpanExporter if encoding == "protobuf" else JsonSpanExporter
        return kind(endpoint=f"{self.base_url}/v1/traces", headers=self.headers(who), timeout=30)


def ingest_corpus(base_url: str, token: str) -> list[dict[str, Any]]:
    chunks = []
    for path, text in CORPUS.items():
        response = httpx.post(
            f"{base_url}/v1/documents",
            json={"path": path, "text": text},
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert response.status_code in (200, 201), response.text
        body = response.json()
        lines = text.split("\n")
        for number, line in enumerate(lines, start=1):
            if not line or line.startswith("#"):
                continue  # one sentence per paragraph: each is cited by the chunk holding its line
            chunk = next(c for c in body["chunks"] if c["start_line"] <= number <= c["end_line"])
            chunks.append(
                {
                    "document_id": body["document_id"],
                    "chunk_id": chunk["chunk_id"],
                    "path": path,
                    "text": line,
                }
            )
    return chunks


def serve(backend: str, root: Path) -> Iterator[OtlpServer]:
    config: LedgerConfig
    with fresh_config(backend, root) as config:
        api = api_config(config)
        tokens = make_tokens(api)
        with LoopbackServer(api) as server:
            chunks = ingest_corpus(server.base_url, tokens["admin"])
            yield OtlpServer(server.base_url, tokens, api, chunks)


def tracer_provider(exporter: SpanExporter, service: str = "support-bot") -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider
