"""A real LlamaIndex pipeline's own spans: llama-index-core's `SimpleDirectoryReader` and
`VectorStoreIndex` (a deterministic hashing embedding, so no model and no network) over the
folder the ledger synced as a source, instrumented by `openinference-instrumentation-llama-index`
and exported by the SDK's real OTLP/HTTP exporter to a real server on loopback.

LlamaIndex emits a second, nested RETRIEVER span (`_retrieve`, input a JSON query bundle, no
documents) that ends, and is exported, before its parent: one retrieval is one receipt. Its
documents carry `file_path`: the ledger matches them to the synced documents (docs/otlp.md
"Cited documents"). The receipts read back, replay, verify offline in a bundle, and show intact
in the console, the CLI and MCP like any other.

(`llama-index-retrievers-bm25` is not used: it requires PyStemmer < 3, the ledger PyStemmer 3.)
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from opentelemetry import trace

from tests import loopback_http
from tests.mcp_support import answer
from tests.otlp_support import OtlpServer, replay_and_verify, serve, tracer_provider
from tests.server_process import ROOT, run_cli

CLI_ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def hashing_embedding() -> Any:
    """Words hashed into 64 buckets: deterministic, offline. llama-index is imported here, not at
    the top: it costs ~8 s of CPU to import, and every xdist worker collects this module."""
    from llama_index.core.embeddings import BaseEmbedding

    class HashingEmbedding(BaseEmbedding):
        def _vector(self, text: str) -> list[float]:
            vector = [0.0] * 64
            for word in text.lower().split():
                vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % 64] += 1.0
            return vector

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._vector(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._vector(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._vector(text)

    return HashingEmbedding()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OtlpServer]:
    root = tmp_path_factory.mktemp("otlp-llamaindex")
    folder = (root / "synced").resolve()
    folder.mkdir()
    yield from serve(str(request.param), root, synced=folder)


@pytest.fixture
def retriever(server: OtlpServer, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    """The service's own pipeline, over the files the ledger synced, instrumented with nothing
    but an OTLP exporter pointed at the ledger."""
    from llama_index.core import SimpleDirectoryReader, VectorStoreIndex
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    provider = tracer_provider(server.exporter("protobuf"), service="llamaindex-rag")
    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    documents = SimpleDirectoryReader(input_dir=str(server.synced), recursive=True).load_data()
    index = VectorStoreIndex.from_documents(documents, embed_model=hashing_embedding())
    try:
        yield index.as_retriever(similarity_top_k=2), provider
    finally:
        instrumentor.uninstrument()
        provider.shutdown()


def test_llamaindex_retrieval_becomes_one_receipt_citing_the_synced_chunks(
    server: OtlpServer, retriever: tuple[Any, Any], tmp_path: Path
) -> None:
    pipeline, provider = retriever
    with provider.get_tracer("app").start_as_current_span("answer question") as root:
        found = pipeline.retrieve("how long are audit logs kept?")
        trace_id = trace.format_trace_id(root.get_span_context().trace_id)
    provider.force_flush()
    [listed] = server.receipts_of(trace_id)  # the nested `_retrieve` span is no second receipt
    assert listed["engine"] == "external:llamaindex-rag"
    citations = server.receipt(listed["receipt_id"])["citations"]
    assert len(citations) == len(found) == 2
    for citation, node in zip(citations, found, strict=True):
        # The synced document at the node's file_path, not a copy of the text.
        assert citation["source"] == "handbook"
        assert node.node.metadata["file_path"].endswith(citation["path"])
        assert citation["score"] == repr(node.score)  # the span's double, exactly as carried
        read = server.get(f"/v1/citations/{citation['citation_id']}")["data"]
        span = read["cited_span"]
        snippet = read["chunk_text"][span["start"] : span["end"]]
        # Within one ledger chunk the node's text is the snippet; a node spanning several of the
        # ledger's chunks cites the longest of them, whole.
        assert snippet.strip() and snippet.strip() in node.node.get_content()
    backups, retention = sorted(citations, key=lambda c: str(c["path"]))
    assert backups["path"] == "handbook/backups.md"  # the node's text lies in one chunk: it is the snippet
    assert retention["path"] == "handbook/retention.md"  # the node holds both of its chunks: the longer
    cited_text = server.get(f"/v1/citations/{retention['citation_id']}")["data"]["chunk_text"]
    assert cited_text.startswith("## Erasure")
    replay_and_verify(server, listed["receipt_id"], tmp_path)
    _read_on_every_surface(server, listed["receipt_id"])


def _read_on_every_surface(server: OtlpServer, receipt_id: str) -> None:
    """The console, the CLI and MCP show the OTLP receipt like any other: intact."""
    with loopback_http.client(base_url=server.base_url, timeout=30) as http:
        signed = http.post(
            "/console/sign-in", data={"token": server.tokens["admin"]}, headers={"Origin": server.base_url}
        )
        assert signed.status_code == 303, signed.text
        page = http.get(f"/console/receipts/{receipt_id}")
        assert (
            page.status_code == 200 and "badge intact" in page.text and "external:llamaindex-rag" in page.text
        )
    env = {**CLI_ENV, "CITELEDGER_URL": server.base_url, "CITELEDGER_TOKEN": server.tokens["admin"]}
    shown = run_cli(["receipts", "show", receipt_id], env=env)
    assert shown.returncode == 0 and "proof: intact" in shown.stdout, shown.stdout + shown.stderr

    async def through_mcp() -> tuple[dict[str, Any], dict[str, Any]]:
        from mcp.client.client import Client
        from mcp.client.streamable_http import streamable_http_client

        async with httpx2.AsyncClient(headers=server.headers(), timeout=60) as http:
            async with Client(streamable_http_client(server.base_url + "/mcp", http_client=http)) as client:
                receipt = answer(await client.call_tool("get_receipt", {"receipt_id": receipt_id}))
                verified = answer(await client.call_tool("verify_receipt", {"receipt_id": receipt_id}))
                return receipt, verified

    receipt, verified = anyio.run(through_mcp)
    assert receipt["engine"] == "external:llamaindex-rag" and verified["intact"] is True
