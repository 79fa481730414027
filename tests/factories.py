"""Builders for realistic events (sealed text, minted ids) used across tests.

`UseCases` records documents and retrievals through the real use cases, as the
API and the demo do. `document_draft` and `retrieval_draft` build drafts for the
tests of the append path itself (batches, refusals, the group committer), whose
types come from their payload classes (`ledger.usecases.context.draft`).
`search_receipt` builds a search receipt as an older engine or version recorded it.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from bootstrap import ledger_context
from ledger.domain.entries import EventDraft, RecordedEvent
from ledger.domain.events import (
    Chunk,
    DocumentIngested,
    Locator,
    PolicySnapshot,
    RetrievalRecorded,
    SearchRequest,
    SelectedEntry,
    TaskEnvelope,
)
from ledger.schemas.requests import DocumentIn, RetrievalIn, SelectedEntryIn, TaskIn
from ledger.storage.claims import DocumentClaims
from ledger.usecases.context import Caller, UseCaseContext, draft
from ledger.usecases.documents import ingest_document
from ledger.usecases.ports import PolicyState
from ledger.usecases.ranking import SearchRun
from ledger.usecases.retrievals import (
    BatchItem,
    policy_snapshot,
    record_retrieval,
    record_retrievals,
    seal_query,
)
from ledger.usecases.search import seal_hits
from ledger.writing.application import Ledger
from ledger.writing.idempotency import IdempotencyKey
from ledger.writing.sealing import document_key_ref
from projections.lookups import ProjectedLookups
from projections.runner import ProjectionRunner

TENANT = "acme"


def _rag_caller(tenant: str) -> Caller:
    return Caller(tenant, "svc-rag", frozenset({"retrieval.write"}), trace_id="trace-1")


class UseCases:
    """The use cases over one ledger (once per ledger: it attaches the write-path projections)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.ctx = ledger_context(ledger)
        self.claims = DocumentClaims(ledger.store)
        assert isinstance(self.ctx.lookups, ProjectedLookups)
        self.runner: ProjectionRunner = self.ctx.lookups.runner  # every projection, attached to the ledger

    def ingest(
        self,
        text: str = "The retention floor is 180 days.",
        *,
        tenant: str = TENANT,
        path: str = "docs/a.md",
    ) -> RecordedEvent:
        """A new document (its own id) through `ingest_document`; the recorded entry."""
        doc = DocumentIn(
            path=path,
            text=text,
            title="Title " + " ".join(text[:10].split()),
            source="tests",
            document_id=uuid.uuid4().hex,
        )
        result = ingest_document(self.ctx, self.claims, Caller(tenant, "svc-ingest"), doc)
        return self._entry(result.body["position"])

    def retrieve(
        self, document: RecordedEvent, query: str = "how long are logs kept?", *, tenant: str = TENANT
    ) -> RecordedEvent:
        """A retrieval citing the first chunk of `document`, through `record_retrieval`."""
        body = self._retrieval(document, query, tenant)
        return self._entry(record_retrieval(self.ctx, _rag_caller(tenant), body).body["position"])

    def retrieve_batch(
        self, document: RecordedEvent, queries: list[str], *, subject_id: str | None = None
    ) -> list[RecordedEvent]:
        """Retrievals citing the first chunk of `document`, one batch through `record_retrievals`."""
        items = [
            BatchItem(
                IdempotencyKey(TENANT, uuid.uuid4().hex, f"fingerprint-{i}"),
                self._retrieval(document, query, TENANT, subject_id=subject_id),
            )
            for i, query in enumerate(queries)
        ]
        outcomes = record_retrievals(self.ctx, _rag_caller(TENANT), items)
        return [self._entry(o.result.body["position"]) for o in outcomes if o.result is not None]

    def _retrieval(
        self, document: RecordedEvent, query: str, tenant: str, subject_id: str | None = None
    ) -> RetrievalIn:
        chunk = document.payload["chunks"][0]
        return RetrievalIn(
            query=query,
            subject_id=subject_id,
            engine="external:test-rag",
            task=TaskIn(task_id="task-1", deadline_ms=1500),
            selected_entries=[
                SelectedEntryIn(
                    document_id=document.payload["document_id"],
                    chunk_id=chunk["chunk_id"],
                    score="3.141593",
                    # A passage of the chunk itself: the ledger refuses snippets it does not hold.
                    snippet=self.ledger.sealer.unseal(chunk["text"], tenant_id=tenant)[:200],
                )
            ],
        )

    def _entry(self, position: int) -> RecordedEvent:
        event = self.ledger.get(position)
        assert event is not None
        return event


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
    return draft(Caller(tenant, "svc-ingest"), payload)


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
    return draft(Caller(tenant, "svc-rag", run_id=run_id, trace_id="trace-1"), payload)


def search_receipt(
    ctx: UseCaseContext,
    caller: Caller,
    query: str,
    run: SearchRun,
    request: SearchRequest,
    engine: str,
    policy_state: PolicyState | None = None,
    **fields: Any,
) -> RetrievalRecorded:
    """The receipt of `run` as the search use case builds one (`ledger.usecases.search`), but
    made by `engine` and carrying only the optional `fields` given: what an older engine or
    an older version of the code recorded."""
    entries, expiry = seal_hits(ctx, caller.tenant_id, run.hits, query_keys=True)
    return RetrievalRecorded(
        receipt_id=uuid.uuid4().hex,
        query=seal_query(ctx, caller.tenant_id, query, None, expiry),
        task=TaskEnvelope(auth_scope=sorted(caller.scopes)),
        engine=engine,
        mode="live",
        policy_snapshot=policy_snapshot(policy_state),
        search=request,
        selected_entries=entries,
        context_hash=run.context_hash,
        status=run.status,
        **fields,
    )
