"""Exactly once across a crash: a real `citeledger serve` is SIGKILLed in the middle of an
OTLP export (after its first group of receipts committed, before the rest), restarted on the
same store, and the exporter's retry of the whole export records each span once."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ledger.usecases.span_ingest import ITEMS_PER_COMMIT
from tests import loopback_http
from tests.client_support import post_document
from tests.conftest import fresh_config
from tests.otlp_support import CORPUS
from tests.server_process import ServerProcess, server_env

TOKEN = "otlp-crash-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SPANS = ITEMS_PER_COMMIT * 2  # two commits: the kill lands while the second is being prepared
ENGINE = "external:crash-test"


def _export(chunk: dict[str, Any], sentence: str) -> bytes:
    request = ExportTraceServiceRequest()
    resource = request.resource_spans.add()
    resource.resource.attributes.add(key="service.name", value=AnyValue(string_value="crash-test"))
    spans = resource.scope_spans.add().spans
    for number in range(1, SPANS + 1):
        span = Span(trace_id=number.to_bytes(16, "big"), span_id=number.to_bytes(8, "big"), name="retrieve")
        attributes = {
            "openinference.span.kind": "RETRIEVER",
            "input.value": f"question {number}",
            "retrieval.documents.0.document.id": f"{chunk['document_id']}/{chunk['chunk_id']}",
            "retrieval.documents.0.document.content": sentence,
        }
        # Some spans of the first group carry text the ledger records as a document first (the
        # kill comes after that group: no document claim is left behind to wait out).
        if number % 50 == 0 and number <= ITEMS_PER_COMMIT:
            attributes["retrieval.documents.1.document.content"] = f"Foreign passage number {number}."
        for key, value in attributes.items():
            span.attributes.add(key=key, value=AnyValue(string_value=value))
        spans.append(span)
    return request.SerializeToString()


def _first_group_committed(base_url: str) -> bool:
    """One receipt of the export is readable: a page of one, so the kill follows the first
    commit within a poll, well before the second group of 512 is prepared and committed."""
    params = {"engine": ENGINE, "limit": 1}
    page = loopback_http.get(f"{base_url}/v1/receipts", params=params, headers=AUTH, timeout=30).json()
    return bool(page["receipts"])


def _receipts(base_url: str) -> list[str]:
    task_ids: list[str] = []
    params: dict[str, Any] = {"engine": ENGINE, "limit": 500}
    while True:
        page = loopback_http.get(f"{base_url}/v1/receipts", params=params, headers=AUTH, timeout=30).json()
        task_ids += [r["task_id"] for r in page["receipts"]]
        if not page.get("next_cursor"):
            return task_ids
        params = {**params, "cursor": page["next_cursor"]}


def _post(base_url: str, body: bytes) -> httpx.Response:
    headers = {**AUTH, "Content-Type": "application/x-protobuf"}
    return loopback_http.post(f"{base_url}/v1/traces", content=body, headers=headers, timeout=120)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_sigkill_mid_export_then_retry_records_each_span_once(backend: str, tmp_path: Path) -> None:
    with fresh_config(backend, tmp_path) as config:
        server = ServerProcess(config.data_dir, server_env(config, TOKEN), log_path=tmp_path / "serve.log")
        try:
            server.start()
            doc = post_document(
                server.base_url, TOKEN, "handbook/retention.md", CORPUS["handbook/retention.md"]
            )
            body = _export(
                {**doc["chunks"][0], "document_id": doc["document_id"]}, "Audit logs are kept for 180 days."
            )
            answered: list[httpx.Response | Exception] = []

            def send() -> None:
                try:
                    answered.append(_post(server.base_url, body))
                except httpx.HTTPError as exc:
                    answered.append(exc)

            sender = threading.Thread(target=send)
            sender.start()
            deadline = time.monotonic() + 120
            while not _first_group_committed(server.base_url):  # kill now
                assert time.monotonic() < deadline and sender.is_alive(), server.log_tail()
                time.sleep(0.01)
            server.kill()
            sender.join(timeout=60)
            assert answered and isinstance(answered[0], httpx.HTTPError), "the export was not cut short"
            server.start(port=server.port)
            before_retry = _receipts(server.base_url)
            assert 0 < len(before_retry) < SPANS  # killed mid-export
            retry = _post(server.base_url, body)
            waited = time.monotonic() + 60
            while retry.status_code == 503 and time.monotonic() < waited:
                # A claim the killed process held on a document lapses: come back as told.
                time.sleep(float(retry.headers["Retry-After"]))
                retry = _post(server.base_url, body)
            assert retry.status_code == 200, retry.content[:300]
            assert ExportTraceServiceResponse.FromString(retry.content).partial_success.rejected_spans == 0
            again = _post(server.base_url, body)  # and once more: nothing new
            assert again.status_code == 200
            task_ids = _receipts(server.base_url)
            assert len(task_ids) == len(set(task_ids)) == SPANS
        finally:
            server.stop()
