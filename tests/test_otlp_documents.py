"""A span's documents matched to the ledger's chunks by source and path (OpenInference's
`source` + `path`, LangChain's `metadata.source`, LlamaIndex's `file_path`), the chunk chosen by
the carried text (docs/otlp.md "Cited documents"), and a restricted chunk the token may not
see refused as on `POST /v1/retrievals`: a signed AccessDenied, the span rejected, its text
never copied. Real server on loopback, both stores; spans made by the SDK's tracer and encoder."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests import loopback_http
from tests.otlp_support import CORPUS, OtlpServer, serve


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OtlpServer]:
    yield from serve(str(request.param), tmp_path_factory.mktemp("otlp-documents"))


def _chunk_of(server: OtlpServer, text: str) -> dict[str, Any]:
    return next(c for c in server.chunks if c["text"] == text)


def _cited(server: OtlpServer, trace_id: str) -> list[dict[str, Any]]:
    """The receipt's citations, each with the snippet it quotes (read back from its chunk)."""
    [listed] = server.receipts_of(trace_id)
    citations: list[dict[str, Any]] = server.receipt(listed["receipt_id"])["citations"]
    for citation in citations:
        read = server.get(f"/v1/citations/{citation['citation_id']}")["data"]
        span = read["cited_span"]
        citation["snippet"] = read["chunk_text"][span["start"] : span["end"]]
    return citations


def test_source_and_path_name_the_ledgers_document_and_the_text_names_its_chunk(server: OtlpServer) -> None:
    erasure = "A data subject may ask for erasure at any time."
    tokens = "Every token is bound to one tenant."
    retention = {"source": "api", "path": "handbook/retention.md"}
    documents: list[dict[str, Any]] = [
        # OpenInference metadata: source + path; the text lies in the document's second chunk.
        {"content": erasure, "score": 0.5, "metadata": retention},
        # LangChain: the path in `metadata.source`.
        {"content": tokens, "metadata": {"source": "handbook/access.md"}},
        # LlamaIndex: `file_path`, no text: the document's first chunk.
        {"metadata": {"file_path": "handbook/backups.md"}},
        # The whole file (two of the ledger's chunks): the longer chunk it holds.
        {
            "content": CORPUS["handbook/retention.md"],
            "metadata": {"source": "api", "path": "handbook/retention.md"},
        },
        # Text the named document does not hold, and a path the ledger does not know: carried text.
        {"content": "Not in that document.", "metadata": retention},
        {"content": "Another system's page.", "metadata": {"file_path": "/elsewhere/handbook/none.md"}},
    ]
    trace_id, answer = server.send_retrieval(documents)
    assert answer.partial_success.rejected_spans == 0, answer.partial_success.error_message
    cited = _cited(server, trace_id)
    assert [c["source"] for c in cited] == ["api", "api", "api", "api", "otlp.docs-bot", "otlp.docs-bot"]
    assert cited[0]["chunk_id"] == _chunk_of(server, erasure)["chunk_id"] and cited[0]["snippet"] == erasure
    assert cited[0]["score"] == "0.5"
    assert cited[1]["chunk_id"] == _chunk_of(server, tokens)["chunk_id"] and cited[1]["snippet"] == tokens
    backups = _chunk_of(server, "Backups run every night and are kept for 30 days.")
    assert cited[2]["chunk_id"] == backups["chunk_id"] and cited[2]["snippet"].startswith("# Backups")
    assert cited[3]["chunk_id"] == _chunk_of(server, erasure)["chunk_id"]
    assert cited[3]["snippet"] == "## Erasure\n\nA data subject may ask for erasure at any time."
    assert [c["snippet"] for c in cited[4:]] == ["Not in that document.", "Another system's page."]


def _restricted(server: OtlpServer, path: str) -> dict[str, Any]:
    response = loopback_http.post(
        f"{server.base_url}/v1/documents",
        json={"path": path, "text": "# Plan\n\nThe merger closes in May.\n", "sensitivity": "restricted"},
        headers=server.headers(),
        timeout=30,
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def test_a_restricted_chunk_the_token_may_not_see_is_denied_and_its_text_never_copied(
    server: OtlpServer,
) -> None:
    secret = _restricted(server, "secret/plan.md")
    chunk_id = secret["chunks"][0]["chunk_id"]
    by_id = {"id": f"{secret['document_id']}/{chunk_id}", "content": "The merger closes in May."}
    by_path = {
        "content": "The merger closes in May.",
        "metadata": {"source": "api", "path": "secret/plan.md"},
    }
    ingested = len(server.events("DocumentIngested"))
    denied = len(server.events("AccessDenied"))
    messages = []
    for document in (by_id, by_path):
        trace_id, answer = server.send_retrieval([document], service="probe")
        assert answer.partial_success.rejected_spans == 1
        messages.append(answer.partial_success.error_message)
        assert server.receipts_of(trace_id) == []  # the retrieval is refused, as on POST /v1/retrievals
    # The words an unknown chunk gets on POST /v1/retrievals; by path, not even the chunk's id.
    assert f"unknown_chunk: selected_entries[0]: no chunk {chunk_id} in document" in messages[0]
    assert "unknown_chunk: selected_entries[0]: no chunk at that source and path" in messages[1]
    assert not any("merger" in m for m in messages)
    denials = server.events("AccessDenied")[denied:]
    assert [(d["payload"]["resource_type"], d["payload"]["resource_id"]) for d in denials] == [
        ("chunk", chunk_id),
        ("document", secret["document_id"]),
    ]
    assert all(d["payload"]["required_scope"] == "knowledge.restricted.read" for d in denials)
    # Nothing of the carried text was recorded under the service's own source.
    assert len(server.events("DocumentIngested")) == ingested
    # With the scope, both cite the restricted chunk itself.
    for document in (by_id, by_path):
        trace_id, answer = server.send_retrieval([document], service="probe", who="admin")
        assert answer.partial_success.rejected_spans == 0
        [citation] = _cited(server, trace_id)
        assert (citation["document_id"], citation["chunk_id"]) == (secret["document_id"], chunk_id)
        assert citation["sensitivity"] == "restricted"


def test_the_data_source_is_recorded_on_the_receipt(server: OtlpServer) -> None:
    trace_id, answer = server.send_retrieval(
        [{"content": "Audit logs are kept for 180 days."}], gen_ai__data_source__id="kb-handbook.v2"
    )
    assert answer.partial_success.rejected_spans == 0
    [listed] = server.receipts_of(trace_id)
    assert server.receipt(listed["receipt_id"])["event"]["payload"]["data_source"] == "kb-handbook.v2"
    trace_id, answer = server.send_retrieval([{"content": "x"}], gen_ai__data_source__id="not an id!")
    assert answer.partial_success.rejected_spans == 1
    assert "gen_ai.data_source.id: not an identifier" in answer.partial_success.error_message
    assert server.receipts_of(trace_id) == []
