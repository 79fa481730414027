"""Shared parts of the OTLP tests: one real server per module and backend (uvicorn on
loopback), real tokens, a small corpus ingested through the API, and an SDK tracer whose
real OTLP/HTTP exporter (protobuf or JSON) sends to that server."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.json.http.trace_exporter import OTLPSpanExporter as JsonSpanExporter
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as ProtobufSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from api.config import ApiConfig
from ledger.config import LedgerConfig
from ledger.retrieval.source_registry import SourceRegistry
from ledger.retrieval.sources import SourceLimits
from ledger.usecases.sources import add_source
from tests import loopback_http
from tests.api_support import LoopbackServer, api_config, make_tokens
from tests.client_support import post_document
from tests.conftest import fresh_config
from tests.server_process import ROOT, run_cli

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
    synced: Path | None = None  # the folder synced as the source `handbook`, if any

    def headers(self, who: str = "admin", **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}", **extra}

    def get(self, path: str, who: str = "admin", **params: Any) -> dict[str, Any]:
        response = loopback_http.get(
            f"{self.base_url}{path}", headers=self.headers(who), params=params, timeout=30
        )
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

    def events(self, event_type: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = self.get("/v1/events", type=event_type, limit=500, order="asc")[
            "events"
        ]
        return events

    def send_retrieval(
        self, documents: list[dict[str, Any]], service: str = "docs-bot", who: str = "writer", **extra: Any
    ) -> tuple[str, ExportTraceServiceResponse]:
        """One OpenInference RETRIEVER span made by the SDK's tracer (each document's `id`,
        `content`, `score`, `metadata` (a dict, sent as JSON); `extra` attributes with `__` for
        `.`), encoded by the SDK's OTLP encoder and posted: (trace id, the export's answer)."""
        captured = InMemorySpanExporter()
        provider = tracer_provider(captured, service=service)
        with provider.get_tracer("test").start_as_current_span("retrieve") as span:
            span.set_attribute("openinference.span.kind", "RETRIEVER")
            span.set_attribute("input.value", "what does the handbook say?")
            for key, value in extra.items():
                span.set_attribute(key.replace("__", "."), value)
            for n, document in enumerate(documents):
                for field, value in document.items():
                    text = json.dumps(value) if field == "metadata" else value
                    span.set_attribute(f"retrieval.documents.{n}.document.{field}", text)
            trace_id = f"{span.get_span_context().trace_id:032x}"
        response = loopback_http.post(
            f"{self.base_url}/v1/traces",
            content=encode_spans(captured.get_finished_spans()).SerializeToString(),
            headers=self.headers(who, **{"Content-Type": "application/x-protobuf"}),
            timeout=60,
        )
        assert response.status_code == 200, response.content[:300]
        return trace_id, ExportTraceServiceResponse.FromString(response.content)

    def exporter(self, encoding: str = "protobuf", who: str = "writer") -> SpanExporter:
        kind = ProtobufSpanExporter if encoding == "protobuf" else JsonSpanExporter
        return kind(endpoint=f"{self.base_url}/v1/traces", headers=self.headers(who), timeout=30)


def ingest_corpus(base_url: str, token: str) -> list[dict[str, Any]]:
    chunks = []
    for path, text in CORPUS.items():
        body = post_document(base_url, token, path, text)
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


def serve(backend: str, root: Path, synced: Path | None = None) -> Iterator[OtlpServer]:
    """A server holding the corpus posted under `api`; with `synced`, also written under that
    folder and synced from it as the source `handbook`."""
    config: LedgerConfig
    with fresh_config(backend, root) as config:
        api = api_config(config)
        tokens = make_tokens(api)
        if synced is not None:
            for path, text in CORPUS.items():
                (synced / path).parent.mkdir(parents=True, exist_ok=True)
                (synced / path).write_text(text, encoding="utf-8")
            add_source(SourceRegistry(config.data_dir), SourceLimits(), "handbook", str(synced), "acme")
        with LoopbackServer(api) as server:
            chunks = ingest_corpus(server.base_url, tokens["admin"])
            if synced is not None:
                response = loopback_http.post(
                    f"{server.base_url}/v1/sources/handbook/sync",
                    headers=_bearer(tokens["writer"]),
                    timeout=60,
                )
                assert response.status_code == 200, response.text
            yield OtlpServer(server.base_url, tokens, api, chunks, synced)


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def replay_and_verify(server: OtlpServer, receipt_id: str, tmp_path: Path) -> None:
    """The receipt replays (the ledger cannot re-run a foreign engine: each entry's fate) and
    its bundle verifies offline with the root public key alone (`citeledger verify-bundle`)."""
    response = loopback_http.post(
        f"{server.base_url}/v1/receipts/{receipt_id}/replay", headers=server.headers(), timeout=30
    )
    assert response.status_code == 201, response.text
    assert "unchanged" in json.dumps(response.json())
    bundle_file = tmp_path / f"bundle-{receipt_id}.json"
    bundle_file.write_text(json.dumps(server.get(f"/v1/receipts/{receipt_id}/bundle")))
    key_file = server.config.ledger.keys_dir / "root.pub"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = run_cli(["verify-bundle", str(bundle_file), "--public-key", str(key_file)], env=env)
    assert result.returncode == 0, result.stdout + result.stderr


def tracer_provider(exporter: SpanExporter, service: str = "support-bot") -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider
