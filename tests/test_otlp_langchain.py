"""A real framework's own spans: a LangChain retriever (langchain-core's InMemoryVectorStore
with a deterministic embedding) over a corpus the ledger ingested, instrumented by
OpenInference and exported by the SDK's OTLP/HTTP exporter to a real server. The receipts
read back, replay (entry fates) and verify offline in a bundle like any other."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace

from tests.otlp_support import OtlpServer, replay_and_verify, serve, tracer_provider
from tests.server_process import ROOT

CLI_ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OtlpServer]:
    yield from serve(str(request.param), tmp_path_factory.mktemp("otlp-langchain"))


@pytest.fixture
def pipeline(server: OtlpServer) -> Iterator[Any]:
    """The service's own pipeline: a vector store over the ledger's chunks (ids in metadata),
    instrumented with nothing but an OTLP exporter pointed at the ledger. langchain-core is
    imported here, not at the top: ~6 s of CPU that every xdist worker would pay at collection."""
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore
    from openinference.instrumentation.langchain import LangChainInstrumentor

    provider = tracer_provider(server.exporter("protobuf"), service="langchain-rag")
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    store.add_documents(
        [
            Document(
                page_content=chunk["text"],
                metadata={
                    "document_id": chunk["document_id"],
                    "chunk_id": chunk["chunk_id"],
                    "path": chunk["path"],
                },
            )
            for chunk in server.chunks
        ]
        + [
            Document(
                page_content="A note from another system, not in the ledger.", metadata={"origin": "wiki"}
            )
        ]
    )
    try:
        yield store.as_retriever(search_kwargs={"k": len(server.chunks) + 1}), provider
    finally:
        instrumentor.uninstrument()
        provider.shutdown()


def _receipt_of_last_trace(server: OtlpServer, provider: Any, run: Any) -> dict[str, Any]:
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("answer question") as root:
        documents = run()
        trace_id = trace.format_trace_id(root.get_span_context().trace_id)
    provider.force_flush()
    [listed] = server.receipts_of(trace_id)
    return {"listed": listed, "documents": documents, "receipt": server.receipt(listed["receipt_id"])}


def test_langchain_retrieval_becomes_a_receipt_that_replays_and_verifies(
    server: OtlpServer, pipeline: Any, tmp_path: Path
) -> None:
    retriever, provider = pipeline
    found = _receipt_of_last_trace(
        server, provider, lambda: retriever.invoke("how long are audit logs kept?")
    )
    receipt, documents = found["receipt"], found["documents"]
    assert found["listed"]["engine"] == "external:langchain-rag"
    cited = receipt["citations"]
    assert len(cited) == len(documents) == len(server.chunks) + 1  # every document, the foreign one too
    # In the retriever's order; ledger chunks where the metadata named them, the carried text otherwise.
    for citation, document in zip(cited, documents, strict=True):
        if "chunk_id" in document.metadata:
            assert citation["chunk_id"] == document.metadata["chunk_id"]
            assert citation["source"] == "api"
        else:
            assert citation["source"] == "otlp.langchain-rag"
        assert citation["score"] is None  # LangChain's RETRIEVER spans carry no score
        text = server.get(f"/v1/citations/{citation['citation_id']}")["data"]["chunk_text"]
        assert document.page_content in text
    replay_and_verify(server, found["listed"]["receipt_id"], tmp_path)


def test_the_readme_example_runs_as_written(server: OtlpServer) -> None:
    """The README's LangChain example, configured by the environment alone, leaves a receipt."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "LangChainInstrumentor" in b)
    env = {
        **CLI_ENV,
        "OTEL_EXPORTER_OTLP_ENDPOINT": server.base_url,
        "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer%20{server.tokens['writer']}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
    }
    done = subprocess.run([sys.executable, "-c", block], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    [listed] = server.get("/v1/receipts", engine="external:my-rag")["receipts"]
    [citation] = server.receipt(listed["receipt_id"])["citations"]
    assert citation["source"] == "otlp.my-rag"
    assert server.get(f"/v1/citations/{citation['citation_id']}")["data"]["chunk_text"] == (
        "Audit logs are kept for 180 days."
    )
