"""The embedded default end to end: ingest, retrieve, checkpoint, bundle, verify.

Built on the use cases (`ledger.usecases`), as the HTTP API is: the demo is one
more caller of `ingest_document` and `record_retrieval`.
"""

from __future__ import annotations

import hashlib
import time
import uuid

from rich.console import Console

from ledger.application import Ledger
from ledger.audit import verify_store
from ledger.bundle import build_bundle, verify_bundle
from ledger.claims import DocumentClaims
from ledger.config import LedgerConfig
from ledger.usecases.commands import DocumentIn, RetrievalIn, SelectedEntryIn, TaskIn
from ledger.usecases.context import Caller
from ledger.usecases.documents import ingest_document
from ledger.usecases.retrievals import record_retrieval
from projections.lookups import ledger_context
from projections.queries import ReadModels

SAMPLE = [
    (
        "handbook/retention.md",
        "Retention",
        "Audit logs of high-risk systems are kept for at least six months.",
    ),
    ("handbook/access.md", "Access", "Restricted documents need the knowledge.restricted.read scope."),
    ("handbook/replay.md", "Replay", "A replay re-runs a retrieval with its frozen policy snapshot."),
]

DEMO_CALLER = Caller(tenant_id="default", actor="demo", scopes=frozenset({"ingest.write", "retrieval.write"}))


def run_demo(config: LedgerConfig, retrievals: int, console: Console) -> int:
    caller = DEMO_CALLER
    tenant = caller.tenant_id
    started = time.perf_counter()
    with Ledger(config) as ledger:
        ctx = ledger_context(ledger)
        claims = DocumentClaims(ledger.store)
        documents = []
        for path, title, text in SAMPLE:
            document_id = uuid.uuid5(uuid.NAMESPACE_URL, f"demo:{path}").hex
            doc = DocumentIn(
                path=path,
                text=text,
                title=title,
                source="demo",
                sensitivity="internal",
                retention_days=180,
                document_id=document_id,
            )
            result = ingest_document(ctx, claims, caller, doc)
            if result.created:
                chunk_id = result.body["chunks"][0]["chunk_id"]
            else:  # the same text from an earlier run: cite the chunk already recorded
                chunk_id = next(
                    chunk.chunk_id
                    for chunk in ReadModels(ledger.store).corpus_now(tenant)
                    if chunk.document_id == document_id
                )
            documents.append((document_id, chunk_id, text))

        last_position = 0
        for index in range(retrievals):
            document_id, chunk_id, text = documents[index % len(documents)]
            retrieval = RetrievalIn(
                query=f"demo question {index}",
                engine="external:demo",
                task=TaskIn(task_id=f"task-{index}", deadline_ms=2000),
                selected_entries=[
                    SelectedEntryIn(
                        document_id=document_id, chunk_id=chunk_id, score="1.250000", snippet=text
                    )
                ],
                context_hash=hashlib.sha256(text.encode()).hexdigest(),
            )
            last_position = record_retrieval(ctx, caller, retrieval).body["position"]
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
