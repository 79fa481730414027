"""Random but valid event sequences for projection tests (hypothesis strategies
and the drafts they turn into), plus helpers to open extra stores."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from ledger.domain.entries import EventDraft
from ledger.domain.events import (
    AccessDenied,
    Chunk,
    DocumentIngested,
    DocumentRemoved,
    Locator,
    PolicySnapshot,
    RetentionScrubbed,
    RetrievalRecorded,
    SelectedEntry,
    TaskEnvelope,
)
from ledger.usecases.context import Caller, draft
from ledger.writing.application import Ledger
from ledger.writing.sealing import document_key_ref

TENANTS = ("acme", "beta")


@dataclass(frozen=True)
class Op:
    kind: str  # ingest | remove | retrieve | scrub_doc | scrub_citation | deny
    tenant: str
    doc: int = 0
    chunks: int = 1
    snapshot: str = "absent"  # absent | null_pair | bundle
    cites: tuple[int, ...] = ()


def ops() -> st.SearchStrategy[list[Op]]:
    tenant = st.sampled_from(TENANTS)
    doc = st.integers(0, 3)
    one = st.one_of(
        st.builds(Op, kind=st.just("ingest"), tenant=tenant, doc=doc, chunks=st.integers(1, 3)),
        st.builds(Op, kind=st.just("remove"), tenant=tenant, doc=doc),
        st.builds(
            Op,
            kind=st.just("retrieve"),
            tenant=tenant,
            snapshot=st.sampled_from(["absent", "null_pair", "bundle"]),
            cites=st.lists(doc, max_size=3).map(tuple),
        ),
        st.builds(Op, kind=st.just("scrub_doc"), tenant=tenant, doc=doc),
        st.builds(Op, kind=st.just("scrub_citation"), tenant=tenant),
        st.builds(Op, kind=st.just("deny"), tenant=tenant),
    )
    return st.lists(one, min_size=1, max_size=14)


@dataclass
class Scenario:
    """Turns ops into drafts, remembering documents and citations per tenant. The
    payloads are built field by field (fixed ids, versions, engines the use cases
    would not produce); the drafts still come from `draft()`, type from payload class."""

    ledger: Ledger
    versions: dict[tuple[str, int], int] = field(default_factory=dict)
    citations: dict[str, list[str]] = field(default_factory=dict)

    def document_id(self, tenant: str, doc: int) -> str:
        return f"doc-{tenant}-{doc}"

    def draft(self, op: Op) -> EventDraft:
        handler = getattr(self, f"_{op.kind}")
        result: EventDraft = handler(op)
        return result

    def _ingest(self, op: Op) -> EventDraft:
        document_id = self.document_id(op.tenant, op.doc)
        version = self.versions.get((op.tenant, op.doc), 0) + 1
        self.versions[(op.tenant, op.doc)] = version
        key_ref = document_key_ref(op.tenant, document_id)
        seal = self.ledger.sealer.seal
        chunks = [
            Chunk(
                chunk_id=f"{document_id}-c{i}",
                ordinal=i,
                locator=Locator(
                    start_line=1 + 10 * i,
                    end_line=9 + 10 * i,
                    heading_path=seal(f"Heading {i}", tenant_id=op.tenant, key_ref=key_ref),
                ),
                text=seal(
                    f"text of {document_id} v{version} chunk {i}", tenant_id=op.tenant, key_ref=key_ref
                ),
            )
            for i in range(op.chunks)
        ]
        payload = DocumentIngested(
            document_id=document_id,
            version_id=f"{document_id}-v{version}",
            version=version,
            supersedes_version_id=f"{document_id}-v{version - 1}" if version > 1 else None,
            source="tests",
            path=f"docs/{op.doc}.md",
            content_sha256=hashlib.sha256(f"{document_id}{version}".encode()).hexdigest(),
            sensitivity="restricted" if op.doc == 3 else "internal",
            chunks=chunks,
        )
        return draft(Caller(op.tenant, "svc-ingest"), payload)

    def _remove(self, op: Op) -> EventDraft:
        payload = DocumentRemoved(document_id=self.document_id(op.tenant, op.doc), reason="source_deleted")
        return draft(Caller(op.tenant, "svc-ingest"), payload)

    def _retrieve(self, op: Op) -> EventDraft:
        snapshot: PolicySnapshot | None = None
        if op.snapshot == "null_pair":
            snapshot = PolicySnapshot(bundle_hash=None, bundle_yaml=None, captured_at="2026-01-01T00:00:00Z")
        elif op.snapshot == "bundle":
            snapshot = PolicySnapshot(
                bundle_hash="a" * 64, bundle_yaml="rules: []\n", captured_at="2026-01-01T00:00:00Z"
            )
        entries = []
        for doc in op.cites:
            document_id = self.document_id(op.tenant, doc)
            citation_id = uuid.uuid4().hex
            self.citations.setdefault(op.tenant, []).append(citation_id)
            entries.append(
                SelectedEntry(
                    citation_id=citation_id,
                    document_id=document_id,
                    chunk_id=f"{document_id}-c0",
                    path=f"docs/{doc}.md",
                    locator=Locator(start_line=1, end_line=9),
                    score="1.5",
                    snapshot=self.ledger.sealer.seal(
                        f"cited {document_id}",
                        tenant_id=op.tenant,
                        key_ref=document_key_ref(op.tenant, document_id),
                    ),
                    sensitivity="internal",
                    expires_at="2030-01-01T00:00:00Z",
                )
            )
        payload = RetrievalRecorded(
            receipt_id=uuid.uuid4().hex,
            query=self.ledger.sealer.seal("a query", tenant_id=op.tenant),
            task=TaskEnvelope(trace_id=f"trace-{op.tenant}"),
            engine="citeledger-bm25@1",
            mode="live",
            policy_snapshot=snapshot,
            selected_entries=entries,
            context_hash=hashlib.sha256(uuid.uuid4().bytes).hexdigest(),
            status="ok" if entries else "no_hit",
        )
        return draft(Caller(op.tenant, "svc-rag", run_id=f"run-{op.tenant}"), payload)

    def _scrub_doc(self, op: Op) -> EventDraft:
        document_id = self.document_id(op.tenant, op.doc)
        payload = RetentionScrubbed(
            reason="governance_scrub",
            key_refs=[document_key_ref(op.tenant, document_id)],
            document_ids=[document_id],
        )
        return draft(Caller(op.tenant, "svc-retention"), payload)

    def _scrub_citation(self, op: Op) -> EventDraft:
        known = self.citations.get(op.tenant, [])
        payload = RetentionScrubbed(
            reason="retention_expired",
            key_refs=[],
            citation_ids=known[:1] or ["nothing-yet"],
        )
        return draft(Caller(op.tenant, "svc-retention"), payload)

    def _deny(self, op: Op) -> EventDraft:
        payload = AccessDenied(
            resource_type="citation",
            resource_id="c-restricted",
            required_scope="knowledge.restricted.read",
            reason="restricted_scope_required",
        )
        return draft(Caller(op.tenant, "svc-api"), payload)


def config_dict(config: Any) -> dict[str, Any]:
    return dict(config.__dict__)
