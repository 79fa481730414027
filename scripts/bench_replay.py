"""Replay benchmark: receipt replay latency at random positions in ledgers of growing
size, against the naive way measured in the same run.

- replay: the real use case (`ledger.usecases.replay.replay`) on a receipt drawn at
  random, from projected state: load + check the receipt and its snapshot, every entry's
  fate from the corpus read model, a signed replay receipt and `ReplayRecorded` appended.
- corpus as of the receipt: `ReadModels.corpus_as_of(tenant, position)`, the indexed
  lookup a `citeledger-bm25` replay's `as_of_original` run starts from.
- naive: rebuild the tenant's corpus by reading the log from position 1 up to the
  receipt (decode every entry, apply ingests, removals and scrubs), then judge the same
  entries. This is a lower bound of the naive replay: the current state needs the whole
  log, not just the prefix.

Everything runs in one invocation on one SQLite store per size. Writes
docs/benchmarks/replay.md (and prints it).

    python scripts/bench_replay.py [--sizes 10000,100000,1000000] [--samples 200] [--naive 10]
"""

from __future__ import annotations

import argparse
import hashlib
import platform
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ledger.application import Ledger
from ledger.config import LedgerConfig
from ledger.entries import EventDraft
from ledger.events import (
    Chunk,
    DocumentIngested,
    DocumentRemoved,
    Locator,
    PolicyBundlePublished,
    PolicySnapshot,
    RetrievalRecorded,
    SelectedEntry,
    TaskEnvelope,
)
from ledger.policy_rules import ChunkFacts, rules_from_bundle
from ledger.usecases.context import Caller, draft
from ledger.usecases.policy import parse_bundle
from ledger.usecases.replay import replay
from projections.lookups import ledger_context
from projections.queries import ReadModels
from projections.receipts import RECEIPTS_TABLE

ROOT = Path(__file__).resolve().parents[1]
TENANTS = [f"t{i}" for i in range(10)]
DOCS_PER_TENANT = 200
CHUNKS_PER_VERSION = 3
BUNDLE = "version: bench\nrules:\n  - id: no-drafts\n    action: deny\n    match: {paths: ['drafts/**']}\n"
BUNDLE_SHA = hashlib.sha256(BUNDLE.encode()).hexdigest()


class Workload:
    """Documents with versions (new chunk ids per version), removals, and `external:`
    receipts citing two chunks live at the time, under a frozen policy snapshot."""

    def __init__(self, ledger: Ledger) -> None:
        self.rng = random.Random(11)
        seal = ledger.sealer.seal
        self.sealed = {t: seal("Audit logs are kept for 180 days. " * 8, tenant_id=t) for t in TENANTS}
        self.query = {t: seal("how long are audit logs kept?", tenant_id=t) for t in TENANTS}
        self.live: dict[tuple[str, int], str] = {}  # (tenant, doc) -> live version id
        self.versions: dict[tuple[str, int], int] = {}
        self.snapshot = PolicySnapshot(
            bundle_hash=BUNDLE_SHA, bundle_yaml=BUNDLE, captured_at="2026-01-01T00:00:00Z"
        )

    def policies(self) -> list[EventDraft]:
        payload = PolicyBundlePublished(policy_version="bench", bundle_sha256=BUNDLE_SHA, bundle_yaml=BUNDLE)
        return [draft(Caller(t, "admin"), payload) for t in TENANTS]

    def ingest(self, tenant: str) -> EventDraft:
        doc = self.rng.randrange(DOCS_PER_TENANT)
        version = self.versions.get((tenant, doc), 0) + 1
        self.versions[(tenant, doc)] = version
        version_id = f"doc-{doc}-v{version}"
        self.live[(tenant, doc)] = version_id
        payload = DocumentIngested(
            document_id=f"doc-{doc}",
            version_id=version_id,
            version=version,
            source="bench",
            path=f"docs/{doc}.md",
            content_sha256=hashlib.sha256(f"{tenant}{doc}{version}".encode()).hexdigest(),
            sensitivity="internal",
            chunks=[
                Chunk(
                    chunk_id=f"{version_id}-c{i}",
                    ordinal=i,
                    locator=Locator(start_line=1 + 10 * i, end_line=9 + 10 * i),
                    text=self.sealed[tenant],
                )
                for i in range(CHUNKS_PER_VERSION)
            ],
        )
        return draft(Caller(tenant, "svc-ingest"), payload)

    def remove(self, tenant: str) -> EventDraft | None:
        live = [doc for (t, doc) in self.live if t == tenant]
        if not live:
            return None
        doc = self.rng.choice(live)
        del self.live[(tenant, doc)]
        return draft(
            Caller(tenant, "svc-ingest"), DocumentRemoved(document_id=f"doc-{doc}", reason="withdrawn")
        )

    def retrieval(self, tenant: str) -> EventDraft | None:
        live = [(doc, version) for (t, doc), version in self.live.items() if t == tenant]
        if not live:
            return None
        entries = []
        for doc, version_id in self.rng.sample(live, min(2, len(live))):
            entries.append(
                SelectedEntry(
                    citation_id=uuid.uuid4().hex,
                    document_id=f"doc-{doc}",
                    version_id=version_id,
                    chunk_id=f"{version_id}-c{self.rng.randrange(CHUNKS_PER_VERSION)}",
                    path=f"docs/{doc}.md",
                    locator=Locator(start_line=1, end_line=9),
                    score="2.5",
                    snapshot=self.sealed[tenant],
                    sensitivity="internal",
                    expires_at="2099-01-01T00:00:00Z",
                )
            )
        payload = RetrievalRecorded(
            receipt_id=uuid.uuid4().hex,
            query=self.query[tenant],
            task=TaskEnvelope(auth_scope=["retrieval.write"]),
            engine="external:bench-rag",
            mode="live",
            policy_snapshot=self.snapshot,
            selected_entries=entries,
            context_hash="c" * 64,
            status="ok",
        )
        return draft(Caller(tenant, "svc-rag"), payload)

    def batch(self, size: int, offset: int) -> list[EventDraft]:
        drafts: list[EventDraft] = []
        for i in range(offset, offset + size):
            tenant = self.rng.choice(TENANTS)
            made = (
                self.ingest(tenant)
                if i % 20 == 0 or len(self.live) < 50
                else self.remove(tenant)
                if i % 499 == 0
                else self.retrieval(tenant)
            )
            drafts.append(made if made is not None else self.ingest(tenant))
        return drafts


def build(ledger: Ledger, events: int) -> float:
    workload = Workload(ledger)
    started = time.perf_counter()
    ledger.append_batch(workload.policies())
    done = ledger.size
    while done < events:
        size = min(1000, events - done)
        ledger.append_batch(workload.batch(size, done))
        done += size
        if done % 100_000 == 0:
            print(f"  built {done:,} entries ({done / (time.perf_counter() - started):,.0f}/s)", flush=True)
    return done / (time.perf_counter() - started)


def naive_replay(ledger: Ledger, tenant: str, receipt_position: int) -> dict[str, str]:
    """The tenant's corpus rebuilt from the log prefix, then each entry's fate."""
    chunks: dict[str, tuple[str, str, bool]] = {}  # chunk_id -> (document_id, path, live)
    receipt = None
    for event in ledger.read(1, receipt_position):
        if event.tenant_id != tenant:
            continue
        payload = event.payload
        if event.type == "DocumentIngested":
            for chunk_id, (doc, path, live) in list(chunks.items()):
                if doc == payload["document_id"] and live:
                    chunks[chunk_id] = (doc, path, False)
            for chunk in payload["chunks"]:
                chunks[chunk["chunk_id"]] = (payload["document_id"], payload["path"], True)
        elif event.type == "DocumentRemoved":
            for chunk_id, (doc, path, live) in list(chunks.items()):
                if doc == payload["document_id"] and live:
                    chunks[chunk_id] = (doc, path, False)
        elif event.type == "RetrievalRecorded" and event.position == receipt_position:
            receipt = payload
    assert receipt is not None
    rules = rules_from_bundle(parse_bundle(receipt["policy_snapshot"]["bundle_yaml"]))
    fates = {}
    for entry in receipt["selected_entries"]:
        doc, path, live = chunks.get(entry["chunk_id"], ("", "", False))
        verdict = rules.judge(ChunkFacts(entry["chunk_id"], doc, path, "internal"), frozenset())
        fates[entry["chunk_id"]] = "unchanged" if live and not verdict.denied else "changed"
    return fates


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, round(q * len(ordered)) - 1)]


def measure(size: int, samples: int, naive_samples: int, root: Path) -> dict[str, float]:
    config = LedgerConfig(data_dir=Path(tempfile.mkdtemp(dir=root)), run_checkpointer=False)
    result: dict[str, float] = {"size": size}
    with Ledger(config) as ledger:
        print(f"[{size:,}] building", flush=True)
        result["build_rate"] = build(ledger, size)
        started = time.perf_counter()
        ctx = ledger_context(ledger)  # projections catch up from position 0
        result["project_s"] = time.perf_counter() - started
        store, reads = ledger.store, ReadModels(ledger.store)
        rows = store.rows(
            f"SELECT tenant_id, receipt_id, position FROM {store.table(RECEIPTS_TABLE)} "
            "WHERE mode='live' ORDER BY position",
            (),
        )
        rng = random.Random(5)
        picked = rng.sample(rows, min(samples, len(rows)))
        replay_ms, as_of_ms = [], []
        for row in picked:
            caller = Caller(row["tenant_id"], "bench", frozenset({"replay.run"}))
            started = time.perf_counter()
            body = replay(ctx, caller, row["receipt_id"]).body
            replay_ms.append((time.perf_counter() - started) * 1000)
            assert body["replay_receipt_id"] and body["entries"]
            started = time.perf_counter()
            reads.corpus_as_of(row["tenant_id"], int(row["position"]))
            as_of_ms.append((time.perf_counter() - started) * 1000)
        naive_ms = []
        for row in rng.sample(picked, min(naive_samples, len(picked))):
            started = time.perf_counter()
            naive_replay(ledger, row["tenant_id"], int(row["position"]))
            naive_ms.append((time.perf_counter() - started) * 1000)
        result.update(
            replay_p50=statistics.median(replay_ms),
            replay_p95=percentile(replay_ms, 0.95),
            as_of_p50=statistics.median(as_of_ms),
            as_of_p95=percentile(as_of_ms, 0.95),
            naive_p50=statistics.median(naive_ms),
            naive_p95=percentile(naive_ms, 0.95),
            samples=len(replay_ms),
            naive_samples=len(naive_ms),
        )
        print(f"[{size:,}] {result}", flush=True)
    return result


def table(results: list[dict[str, float]], args: argparse.Namespace) -> str:
    header = (
        "| events | build (entries/s) | projections from 0 (s) | replay p50 / p95 (ms) "
        "| corpus as of p50 / p95 (ms) | naive p50 / p95 (ms) | naive p50 / replay p50 |"
    )
    lines = [
        "# Replay benchmark",
        "",
        f"Machine: {platform.machine()}, 2 cores (shared with other work), "
        f"Python {platform.python_version()}; generated by `scripts/bench_replay.py --sizes {args.sizes} "
        f"--samples {args.samples} --naive {args.naive}` (SQLite, one run).",
        "Workload: 10 tenants, 200 documents each; per 1000 entries ~50 document versions (3 chunks, "
        "new ids per version), ~2 removals, the rest `external:` receipts citing 2 live chunks under "
        "a policy snapshot.",
        "Receipts are drawn at random positions. *replay* is the whole use case (checks, entry fates "
        "from the corpus read model, a signed replay receipt + `ReplayRecorded` appended and fsynced). "
        "*corpus as of* is the indexed lookup a `citeledger-bm25` replay starts from. *naive* rebuilds "
        "the tenant's corpus from the log prefix up to the receipt and judges the same entries (a lower "
        "bound: no write, no current state).",
        "",
        header,
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        lines.append(
            f"| {int(r['size']):,} | {r['build_rate']:,.0f} | {r['project_s']:.1f} "
            f"| {r['replay_p50']:.1f} / {r['replay_p95']:.1f} ({int(r['samples'])}) "
            f"| {r['as_of_p50']:.1f} / {r['as_of_p95']:.1f} "
            f"| {r['naive_p50']:,.0f} / {r['naive_p95']:,.0f} ({int(r['naive_samples'])}) "
            f"| {r['naive_p50'] / r['replay_p50']:,.0f}x |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--naive", type=int, default=10)
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks" / "replay.md"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp:
        results = [measure(int(size), args.samples, args.naive, Path(tmp)) for size in args.sizes.split(",")]
    text = table(results, args)
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
