"""The embedded default end to end: ingest, retrieve, checkpoint, bundle, verify."""

from __future__ import annotations

import hashlib
import time
import uuid

from rich.console import Console

from ledger.application import Ledger
from ledger.audit import verify_store
from ledger.bundle import build_bundle, verify_bundle
from ledger.config import LedgerConfig
from ledger.entries import EventDraft
from ledger.events import Chunk, DocumentIngested, Locator, RetrievalRecorded, SelectedEntry, TaskEnvelope
from ledger.sealing import document_key_ref

SAMPLE = [
    (
        "handbook/retention.md",
        "Retention",
        "Audit logs of high-risk systems are kept for at least six months.",
    ),
    ("handbook/access.md", "Access", "Restricted documents need the knowledge.restricted.read scope."),
    ("handbook/replay.md", "Replay", "A replay re-runs a retrieval with its frozen policy snapshot."),
]


def run_demo(config: LedgerConfig, retrievals: int, console: Console) -> int:
    tenant = "default"
    started = time.perf_counter()
    with Ledger(config) as ledger:
        documents = []
        drafts = []
        for path, title, text in SAMPLE:
            document_id = uuid.uuid5(uuid.NAMESPACE_URL, f"demo:{path}").hex
            key_ref = document_key_ref(tenant, document_id)
            seal = ledger.sealer.seal
            chunk_id = f"{document_id[:12]}-0"
            document = DocumentIngested(
                document_id=document_id,
                version_id=uuid.uuid4().hex,
                version=1,
                source="demo",
                path=path,
                title=seal(title, tenant_id=tenant, key_ref=key_ref),
                content_sha256=hashlib.sha256(text.encode()).hexdigest(),
                sensitivity="internal",
                retention_days=180,
                chunks=[
                    Chunk(
                        chunk_id=chunk_id,
                        ordinal=0,
                        locator=Locator(start_line=1, end_line=1),
                        text=seal(text, tenant_id=tenant, key_ref=key_ref),
                    )
                ],
            )
            documents.append((document_id, chunk_id, path, key_ref, text))
            drafts.append(
                EventDraft(type="DocumentIngested", tenant_id=tenant, actor="demo", payload=document)
            )
        ledger.append_batch(drafts, tenant_id=tenant)

        batch: list[EventDraft] = []
        last_position = 0
        for index in range(retrievals):
            document_id, chunk_id, path, key_ref, text = documents[index % len(documents)]
            entry = SelectedEntry(
                citation_id=uuid.uuid4().hex,
                document_id=document_id,
                chunk_id=chunk_id,
                path=path,
                locator=Locator(start_line=1, end_line=1),
                score="1.250000",
                snapshot=ledger.sealer.seal(text, tenant_id=tenant, key_ref=key_ref),
                sensitivity="internal",
            )
            payload = RetrievalRecorded(
                receipt_id=uuid.uuid4().hex,
                query=ledger.sealer.seal(f"demo question {index}", tenant_id=tenant),
                task=TaskEnvelope(task_id=f"task-{index}", deadline_ms=2000),
                engine="external:demo",
                mode="live",
                selected_entries=[entry],
                context_hash=hashlib.sha256(text.encode()).hexdigest(),
                status="ok",
            )
            batch.append(
                EventDraft(type="RetrievalRecorded", tenant_id=tenant, actor="demo", payload=payload)
            )
            if len(batch) == 50:
                last_position = ledger.append_batch(batch, tenant_id=tenant)[-1].position
                batch = []
        if batch:
            last_position = ledger.append_batch(batch, tenant_id=tenant)[-1].position
        checkpoint = ledger.issue_checkpoint()
        assert checkpoint is not None
        bundle = build_bundle(ledger, last_position or ledger.size)
        bundle_entry = verify_bundle(bundle, ledger.root_public_key)
        report = verify_store(ledger.store, ledger.root_public_key, deep=True)
        elapsed = time.perf_counter() - started
        console.print(f"data directory: {config.data_dir}")
        console.print(f"log size {ledger.size}, checkpoint #{checkpoint.seq} covers {checkpoint.tree_size}")
        console.print(checkpoint.note.rstrip(), soft_wrap=True, highlight=False)
        console.print(f"bundle for position {bundle_entry['position']} verifies offline")
        console.print(f"verify --deep: {'OK' if report.ok else report.first_bad} ({elapsed:.2f}s)")
        return 0 if report.ok else 1
