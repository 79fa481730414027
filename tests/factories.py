"""Builders for realistic events (sealed text, minted ids) used across tests."""

from __future__ import annotations

import hashlib
import uuid

from ledger.application import Ledger
from ledger.entries import EventDraft
from ledger.events import (
    Chunk,
    DocumentIngested,
    Locator,
    PolicySnapshot,
    RetrievalRecorded,
    SelectedEntry,
    TaskEnvelope,
)
from ledger.sealing import document_key_ref

TENANT = "acme"


def document_draft(
    ledger: Ledger,
    text: str = "The retention floor is 180 days.",
    *,
    tenant: str = TENANT,
    path: str = "docs/a.md",
) -> EventDraft:
    document_id = uuid.uuid4().hex
    key_ref = document_key_ref(tenant, document_id)
    payload = DocumentIngested(
        document_id=document_id,
        version_id=uuid.uuid4().hex,
        version=1,
        source="tests",
        path=path,
        title=ledger.sealer.seal("Title " + text[:10], tenant_id=tenant, key_ref=key_ref),
        content_sha256=hashlib.sha256(text.encode()).hexdigest(),
        sensitivity="internal",
        chunks=[
            Chunk(
                chunk_id=f"{document_id[:8]}-0",
                ordinal=0,
                locator=Locator(start_line=1, end_line=3),
                text=ledger.sealer.seal(text, tenant_id=tenant, key_ref=key_ref),
            )
        ],
    )
    return EventDraft(type="DocumentIngested", tenant_id=tenant, actor="svc-ingest", payload=payload)


def retrieval_draft(
    ledger: Ledger,
    query: str = "how long are logs kept?",
    *,
    tenant: str = TENANT,
    snapshot: PolicySnapshot | None = None,
    run_id: str | None = None,
) -> EventDraft:
    payload = RetrievalRecorded(
        receipt_id=uuid.uuid4().hex,
        query=ledger.sealer.seal(query, tenant_id=tenant),
        task=TaskEnvelope(
            trace_id="trace-1", task_id="task-1", deadline_ms=1500, auth_scope=["retrieval.write"]
        ),
        engine="external:test-rag",
        mode="live",
        policy_snapshot=snapshot,
        selected_entries=[
            SelectedEntry(
                citation_id=uuid.uuid4().hex,
                document_id=uuid.uuid4().hex,
                chunk_id="c-1",
                path="docs/a.md",
                locator=Locator(start_line=1, end_line=3),
                score="3.141593",
                snapshot=ledger.sealer.seal("cited passage " + query, tenant_id=tenant),
                sensitivity="internal",
                expires_at="2027-05-22T00:00:00Z",
            )
        ],
        context_hash=hashlib.sha256(query.encode()).hexdigest(),
        status="ok",
    )
    return EventDraft(
        type="RetrievalRecorded",
        tenant_id=tenant,
        actor="svc-rag",
        payload=payload,
        run_id=run_id,
        trace_id="trace-1",
    )
