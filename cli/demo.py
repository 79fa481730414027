"""The embedded default end to end, on the sample corpus (tests/corpus): sync it as an
allowlisted source, search it, read a citation back, publish a policy, erase a document,
replay a search receipt, record retrievals, checkpoint, bundle, verify.

Built on the use cases (`ledger.usecases`), as the HTTP API is: the demo is one more
caller. The steps live in `cli.demo_steps`; this module runs them in order and adds
what the ledger itself proves (counts, the checkpoint line by line, a bundle, verify).
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console

from bootstrap import ledger_context
from cli import demo_steps as steps
from ledger.config import LedgerConfig, SettingError
from ledger.evidence.bundle import build_bundle, verify_bundle
from ledger.evidence.verify import VerifyReport
from ledger.retrieval.source_registry import SourceRegistry
from ledger.retrieval.sources import SourceLimits
from ledger.schemas.requests import RetrievalIn, SelectedEntryIn, TaskIn
from ledger.storage.audit import verify_store
from ledger.usecases.context import Caller
from ledger.usecases.errors import UseCaseError
from ledger.usecases.retrievals import record_retrieval
from ledger.writing.application import Ledger

DEMO_CALLER = Caller(
    tenant_id="default",
    actor="demo",
    scopes=frozenset({"ingest.write", "retrieval.write", "replay.run", "audit.read", "admin"}),
)
CHECKPOINT_LINES = {
    0: "origin: which log this is (derived from the root public key)",
    1: "tree size: the number of entries this checkpoint commits to",
    2: "root hash: RFC 9162 Merkle root over those entries (base64)",
}


def run_demo(config: LedgerConfig, retrievals: int, console: Console, corpus: Path | None = None) -> int:
    corpus = corpus or steps.default_corpus()
    if not corpus.is_dir() or not any(corpus.rglob("*.md")):
        console.print(
            f"the sample corpus is missing: no markdown files under {corpus}", markup=False, soft_wrap=True
        )
        return 1
    try:
        limits = SourceLimits.from_env()
    except SettingError as exc:
        console.print(str(exc), markup=False, soft_wrap=True)
        return 2
    try:
        with Ledger(config) as ledger:
            return _run(config, ledger, limits, retrievals, console, corpus)
    except UseCaseError as exc:  # e.g. the corpus lies under a denylisted system path
        console.print(f"refused ({exc.code}): {exc.message}", markup=False, soft_wrap=True)
        return 1
    except steps.UnfitCorpus as exc:
        console.print(str(exc), markup=False, soft_wrap=True)
        return 1


def _run(
    config: LedgerConfig,
    ledger: Ledger,
    limits: SourceLimits,
    retrievals: int,
    console: Console,
    corpus: Path,
) -> int:
    demo = steps.Demo(ledger, ledger_context(ledger), DEMO_CALLER, console)
    existing = ledger.size
    if existing > 1:
        demo.say(f"Appending to the existing ledger in {config.data_dir} ({existing} entries already).")
    else:
        demo.say(f"New ledger in {config.data_dir}.")
    started = time.perf_counter()
    registry = SourceRegistry(config.data_dir)
    steps.register_corpus(demo, registry, limits, corpus)
    steps.sync_corpus(demo, registry, limits)
    english = steps.search_corpus(demo)
    steps.show_citation(demo, english["output"]["citations"][0]["citation_id"])
    travel_before = steps.publish_demo_policy(demo)
    steps.erase_a_document(demo)
    integrity = steps.replay_receipt(demo, travel_before["receipt_id"])
    last_position = record_retrievals(demo, english, retrievals)
    elapsed = time.perf_counter() - started
    report = prove(demo, config, existing, elapsed, last_position)
    return 0 if report.ok and integrity in ("ok", "reproduced_apart_from_erased") else 1


def record_retrievals(demo: steps.Demo, english: dict[str, Any], count: int) -> int:
    """Retrievals a service's own engine made (`external:`), citing the chunks the search found."""
    demo.heading(f"8. Record {count} retrievals of an external engine (POST /v1/retrievals)")
    cited = english["output"]["citations"]
    last_position = english["position"]
    started = time.perf_counter()
    for index in range(count):
        hit = cited[index % len(cited)]
        retrieval = RetrievalIn(
            query=f"demo question {index}",
            engine="external:demo",
            task=TaskIn(task_id=f"task-{index}", deadline_ms=2000),
            selected_entries=[
                SelectedEntryIn(
                    document_id=hit["document_id"],
                    chunk_id=hit["chunk_id"],
                    score="1.250000",
                    snippet=hit["snippet"],
                )
            ],
            context_hash=hashlib.sha256(hit["snippet"].encode()).hexdigest(),
        )
        last_position = record_retrieval(demo.ctx, demo.caller, retrieval).body["position"]
    seconds = time.perf_counter() - started
    demo.say(f"{count} receipts in {seconds:.2f} s (wall time, one signed commit each)")
    return int(last_position)


def prove(
    demo: steps.Demo, config: LedgerConfig, existing: int, elapsed: float, last_position: int
) -> VerifyReport:
    """What the ledger proves about all of the above: counts, a checkpoint, a bundle, verify."""
    ledger = demo.ledger
    checkpoint = ledger.issue_checkpoint()
    assert checkpoint is not None
    counts = Counter(event.type for event in ledger.read(existing + 1))
    started = time.perf_counter()
    report = verify_store(ledger.store, ledger.root_public_key, deep=True)
    verify_s = time.perf_counter() - started
    bundle = build_bundle(ledger, last_position or ledger.size)
    bundle_entry = verify_bundle(bundle, ledger.root_public_key)
    bundle_file = config.data_dir / "demo-bundle.json"
    bundle_file.write_bytes(orjson.dumps(bundle, option=orjson.OPT_INDENT_2))
    bundle_file.chmod(0o600)
    public_key = ledger.keydir.root_public_key_path

    demo.heading("9. What the ledger proves")
    demo.say(
        f"Recorded {ledger.size - existing} signed entries in {elapsed:.2f} s (wall time of steps 1-8); "
        f"the log now holds {ledger.size}: these and the {existing} before them"
        + (" (the genesis entry that publishes the root key)" if existing == 1 else "")
        + ":"
    )
    for event_type, count in sorted(counts.items()):
        demo.say(f"  {count:6d}  {event_type}")
    demo.say("")
    explain_checkpoint(demo, checkpoint.seq, checkpoint.note)
    demo.say("")
    status = "OK" if report.ok else f"FAILED: {report.first_bad}"
    demo.say(
        f"verify --deep: {status} ({report.signatures_checked} of {report.entries} entry signatures and "
        f"every Merkle root checked in {verify_s:.2f} s)"
    )
    demo.say(
        f"Bundle for the receipt at position {bundle_entry['position']} written to {bundle_file}; "
        "it verifies offline with the root public key alone:"
    )
    demo.say(f"  {citeledger_command()} verify-bundle {bundle_file} --public-key {public_key}")
    demo.say("")
    command = citeledger_command()
    demo.say("Next, try:")
    demo.say(f"  {command} verify --data-dir {config.data_dir}")
    demo.say(f"  {command} export --data-dir {config.data_dir} --out log.jsonl")
    demo.say(f"  {command} serve --data-dir {config.data_dir}   (the HTTP API; see README)")
    demo.say(f"The root public key an auditor receives: {public_key}")
    return report


def citeledger_command() -> str:
    """How to call this very `citeledger` again: the executable beside the running Python (a
    virtual environment's bin/, which is not on the PATH unless it was activated)."""
    beside = Path(sys.executable).parent / "citeledger"
    on_path = shutil.which("citeledger")
    if beside.exists() and (on_path is None or Path(on_path).resolve() != beside.resolve()):
        return str(beside)
    return "citeledger"


def explain_checkpoint(demo: steps.Demo, seq: int, note: str) -> None:
    demo.say(f"Signed checkpoint #{seq} (a C2SP signed note), line by line:")
    signatures = False
    for index, line in enumerate(note.rstrip("\n").split("\n")):
        if index in CHECKPOINT_LINES:
            explained = CHECKPOINT_LINES[index]
        elif line == "":
            explained, signatures = "blank line: the signatures follow", True
        elif signatures:
            explained = "signature: '—', key name, then base64 of key id and Ed25519 signature"
        elif line.startswith("time "):
            explained = "extension line: when the checkpoint was issued (covered by the signature)"
        else:
            explained = "extension line (covered by the signature)"
        demo.say(f"  {line}")
        demo.say(f"      <- {explained}")
