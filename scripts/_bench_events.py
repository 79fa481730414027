"""The signed events the ledger-building benchmarks (`bench_projections.py`, `bench_replay.py`)
append in bulk, built one way: a document version of sealed chunks, a cited entry, a live
receipt. Each benchmark keeps its own mix (which documents, texts, engines and ids)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from ledger.domain.entries import EventDraft
from ledger.domain.events import (
    Chunk,
    DocumentIngested,
    Locator,
    PolicySnapshot,
    RetrievalRecorded,
    Sealed,
    SelectedEntry,
    TaskEnvelope,
)
from ledger.usecases.context import Caller, draft

TENANTS = [f"t{i}" for i in range(10)]
DOCS_PER_TENANT = 200


def document_version(
    tenant: str, doc: int, version: int, path: str, chunk_ids: Sequence[str], texts: Sequence[Sealed]
) -> EventDraft:
    """Version `version` of document `doc-<doc>`: one chunk per id, ten lines apart."""
    payload = DocumentIngested(
        document_id=f"doc-{doc}",
        version_id=f"doc-{doc}-v{version}",
        version=version,
        source="bench",
        path=path,
        content_sha256=hashlib.sha256(f"{tenant}{doc}{version}".encode()).hexdigest(),
        sensitivity="internal",
        chunks=[
            Chunk(
                chunk_id=chunk_id,
                ordinal=i,
                locator=Locator(start_line=1 + 10 * i, end_line=9 + 10 * i),
                text=text,
            )
            for i, (chunk_id, text) in enumerate(zip(chunk_ids, texts, strict=True))
        ],
    )
    return draft(Caller(tenant, "svc-ingest"), payload)


def cited(
    citation_id: str,
    doc: int,
    chunk_id: str,
    path: str,
    snippet: Sealed,
    expires_at: str,
    version_id: str | None = None,
) -> SelectedEntry:
    """One selected entry citing lines 1-9 of a chunk of `doc-<doc>`."""
    return SelectedEntry(
        citation_id=citation_id,
        document_id=f"doc-{doc}",
        chunk_id=chunk_id,
        path=path,
        locator=Locator(start_line=1, end_line=9),
        score="2.5",
        snapshot=snippet,
        sensitivity="internal",
        expires_at=expires_at,
        **({"version_id": version_id} if version_id is not None else {}),  # absent, as older entries
    )


def live_receipt(
    tenant: str,
    receipt_id: str,
    query: Sealed,
    task: TaskEnvelope,
    engine: str,
    snapshot: PolicySnapshot,
    entries: list[SelectedEntry],
) -> EventDraft:
    """A live retrieval receipt (status ok) under a frozen policy snapshot."""
    payload = RetrievalRecorded(
        receipt_id=receipt_id,
        query=query,
        task=task,
        engine=engine,
        mode="live",
        policy_snapshot=snapshot,
        selected_entries=entries,
        context_hash="c" * 64,
        status="ok",
    )
    return draft(Caller(tenant, "svc-rag"), payload)
