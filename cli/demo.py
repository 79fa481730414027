"""The embedded default end to end: ingest, retrieve, checkpoint, bundle, verify.

Built on the use cases (`ledger.usecases`), as the HTTP API is: the demo is one
more caller of `ingest_document` and `record_retrieval`.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections import Counter

import orjson
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

    def say(text: str = "") -> None:
        console.print(text, soft_wrap=True)  # whole lines: commands copy as they are

    with Ledger(config) as ledger:
        existing = ledger.size
        if existing > 1:
            say(f"Appending to the existing ledger in {config.data_dir} ({existing} entries already).")
        else:
            say(f"New ledger in {config.data_dir}.")
        ctx = ledger_context(ledger)
        claims = DocumentClaims(ledger.store)
        timer = time.perf_counter()
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
        recording_s = time.perf_counter() - timer
        checkpoint = ledger.issue_checkpoint()
        assert checkpoint is not None
        counts = Counter(event.type for event in ledger.read(existing + 1))

        timer = time.perf_counter()
        report = verify_store(ledger.store, ledger.root_public_key, deep=True)
        verify_s = time.perf_counter() - timer
        bundle = build_bundle(ledger, last_position or ledger.size)
        bundle_entry = verify_bundle(bundle, ledger.root_public_key)
        bundle_file = config.data_dir / "demo-bundle.json"
        bundle_file.write_bytes(orjson.dumps(bundle, option=orjson.OPT_INDENT_2))
        bundle_file.chmod(0o600)
        public_key = ledger.keydir.root_public_key_path

        say("")
        say(f"Recorded {ledger.size - existing} signed entries in {recording_s:.2f} s:")
        for event_type, count in sorted(counts.items()):
            say(f"  {count:6d}  {event_type}")
        say("")
        say(f"Signed checkpoint #{checkpoint.seq} (a C2SP signed note), line by line:")
        lines = checkpoint.note.rstrip("\n").split("\n")
        meaning = {
            0: "origin: which log this is (derived from the root public key)",
            1: "tree size: the number of entries this checkpoint commits to",
            2: "root hash: RFC 9162 Merkle root over those entries (base64)",
        }
        signatures = False
        for index, line in enumerate(lines):
            if index in meaning:
                explained = meaning[index]
            elif line == "":
                explained, signatures = "blank line: the signatures follow", True
            elif signatures:
                explained = "signature: '—', key name, then base64 of key id and Ed25519 signature"
            elif line.startswith("time "):
                explained = "extension line: when the checkpoint was issued (covered by the signature)"
            else:
                explained = "extension line (covered by the signature)"
            say(f"  {line}")
            say(f"      <- {explained}")
        say("")
        status = "OK" if report.ok else f"FAILED: {report.first_bad}"
        say(
            f"verify --deep: {status} ({report.signatures_checked} of {report.entries} entry signatures and "
            f"every Merkle root checked in {verify_s:.2f} s)"
        )
        say(
            f"Bundle for the receipt at position {bundle_entry['position']} written to {bundle_file}; "
            "it verifies offline with the root public key alone:"
        )
        say(f"  citeledger verify-bundle {bundle_file} --public-key {public_key}")
        say("")
        say("Next, try:")
        say(f"  citeledger verify --data-dir {config.data_dir}")
        say(f"  citeledger export --data-dir {config.data_dir} --out log.jsonl")
        say(f"  citeledger serve --data-dir {config.data_dir}   (the HTTP API; see README)")
        say(f"The root public key an auditor receives: {public_key}")
        return 0 if report.ok else 1
