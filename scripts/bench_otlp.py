"""OTLP ingestion against the batch API, side by side in one run: one real `citeledger serve`
(SQLite, or PostgreSQL with --database-url), the same retrievals recorded alternately as
OTLP exports (the SDK's own OTLP/HTTP protobuf exporter, 512 spans per export, 5 documents
per span) and as `POST /v1/retrievals/batch` (512 items of 5 entries). Prints spans/s of
each, the ratio OTLP ÷ batch, and the exporter-side latency p50/p95 of an export.

    python scripts/bench_otlp.py [--rounds 8] [--database-url postgresql://...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from ledger.config import LedgerConfig  # noqa: E402
from tests.server_process import ServerProcess, server_env  # noqa: E402

TOKEN = "bench-otlp-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SPANS_PER_EXPORT = 512
DOCUMENTS_PER_SPAN = 5


def _serve(data: Path, database_url: str | None) -> ServerProcess:
    config = LedgerConfig(data_dir=data, database_url=database_url)
    return ServerProcess(data, server_env(config, TOKEN)).start()


def _corpus(base: str) -> list[dict[str, str]]:
    """20 documents of 5 sections: 100 chunks, each cited by its id and its sentence."""
    chunks = []
    for number in range(20):
        sections = [
            f"## Part {s}\n\nDocument {number} section {s} says fact {number * 5 + s}." for s in range(5)
        ]
        text = f"# Doc {number}\n\n" + "\n\n".join(sections) + "\n"
        response = httpx.post(
            f"{base}/v1/documents",
            json={"path": f"bench/doc{number}.md", "text": text},
            headers=AUTH,
            timeout=60,
        )
        body = response.json()
        for s, chunk in enumerate(body["chunks"][-5:]):
            chunks.append(
                {
                    "document_id": body["document_id"],
                    "chunk_id": chunk["chunk_id"],
                    "text": f"Document {number} section {s} says fact {number * 5 + s}.",
                }
            )
    return chunks


def _spans(chunks: list[dict[str, str]], round_number: int) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "bench-rag"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("bench")
    for n in range(SPANS_PER_EXPORT):
        with tracer.start_as_current_span("retrieve") as span:
            span.set_attribute("openinference.span.kind", "RETRIEVER")
            span.set_attribute("input.value", f"question {round_number}-{n}")
            for d in range(DOCUMENTS_PER_SPAN):
                chunk = chunks[(n + d * 7) % len(chunks)]
                prefix = f"retrieval.documents.{d}.document"
                span.set_attribute(f"{prefix}.id", f"{chunk['document_id']}/{chunk['chunk_id']}")
                span.set_attribute(f"{prefix}.content", chunk["text"])
                span.set_attribute(f"{prefix}.score", 1.0 / (d + 1))
    return list(memory.get_finished_spans())


def _batch(chunks: list[dict[str, str]], round_number: int) -> dict[str, Any]:
    items = []
    for n in range(SPANS_PER_EXPORT):
        entries = []
        for d in range(DOCUMENTS_PER_SPAN):
            chunk = chunks[(n + d * 7) % len(chunks)]
            entries.append(
                {
                    "document_id": chunk["document_id"],
                    "chunk_id": chunk["chunk_id"],
                    "score": repr(1.0 / (d + 1)),
                    "snippet": chunk["text"],
                }
            )
        retrieval = {
            "query": f"question {round_number}-{n}",
            "engine": "external:bench-rag",
            "selected_entries": entries,
        }
        items.append({"idempotency_key": uuid.uuid4().hex, "retrieval": retrieval})
    return {"items": items}


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = _serve(Path(tmp) / "data", args.database_url)
        base = server.base_url
        try:
            chunks = _corpus(base)
            exporter = OTLPSpanExporter(endpoint=f"{base}/v1/traces", headers=AUTH, timeout=120)
            otlp_s: list[float] = []
            batch_s: list[float] = []
            for round_number in range(args.rounds + 1):  # round 0 warms both paths up
                spans = _spans(chunks, round_number)
                started = time.perf_counter()
                assert exporter.export(spans) == SpanExportResult.SUCCESS
                otlp = time.perf_counter() - started
                body = _batch(chunks, round_number)
                started = time.perf_counter()
                response = httpx.post(f"{base}/v1/retrievals/batch", json=body, headers=AUTH, timeout=120)
                batch = time.perf_counter() - started
                assert response.status_code == 200 and response.json()["recorded"] == SPANS_PER_EXPORT, (
                    response.text[:300]
                )
                if round_number:
                    otlp_s.append(otlp)
                    batch_s.append(batch)
            receipts = httpx.get(
                f"{base}/v1/receipts", params={"engine": "external:bench-rag", "limit": 1}, headers=AUTH
            )
            assert receipts.status_code == 200
        finally:
            server.stop()
    otlp_rate = SPANS_PER_EXPORT / statistics.median(otlp_s)
    batch_rate = SPANS_PER_EXPORT / statistics.median(batch_s)
    result = {
        "store": "postgresql" if args.database_url else "sqlite",
        "rounds": args.rounds,
        "spans_per_export": SPANS_PER_EXPORT,
        "documents_per_span": DOCUMENTS_PER_SPAN,
        "otlp_spans_per_s": round(otlp_rate),
        "batch_retrievals_per_s": round(batch_rate),
        "ratio_otlp_to_batch": round(otlp_rate / batch_rate, 2),
        "export_latency_p50_ms": round(_percentile(otlp_s, 0.5) * 1000),
        "export_latency_p95_ms": round(_percentile(otlp_s, 0.95) * 1000),
        "batch_latency_p50_ms": round(_percentile(batch_s, 0.5) * 1000),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
