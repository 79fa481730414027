"""Ledger benchmark: signed appends vs plain eventsourcing saves, verify, proofs.

Everything is measured in one run on the same machine and store kind, so the
ratios are meaningful even on a noisy shared host. Writes a Markdown table to
docs/benchmarks/ledger.md (and prints it).

    python scripts/bench_ledger.py [--verify-size 1000000] [--out docs/benchmarks/ledger.md]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event

from ledger.application import Ledger
from ledger.audit import verify_store
from ledger.config import LedgerConfig
from ledger.entries import EventDraft
from ledger.merkle import MerkleTree
from tests.factories import TENANT, retrieval_draft


class Receipt(Aggregate):  # type: ignore[misc]
    """The baseline: the same payload saved as a plain, unsigned eventsourcing aggregate."""

    @event("Recorded")
    def __init__(self, payload: dict[str, Any]) -> None:
        self.payload = payload


class Baseline(Application):  # type: ignore[misc]
    pass


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


def timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def bench_appends(root: Path, drafts: list[EventDraft], batch: int) -> tuple[float, float]:
    """(baseline events/s, signed events/s) for the same drafts and batching."""
    payloads = [d.payload.model_dump(mode="json") for d in drafts]  # type: ignore[union-attr]
    base_dir = Path(tempfile.mkdtemp(dir=root))
    baseline = Baseline(
        env={"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(base_dir / "b.sqlite")}
    )

    def run_baseline() -> None:
        for start in range(0, len(payloads), batch):
            baseline.save(*[Receipt(payload=p) for p in payloads[start : start + batch]])

    base_seconds = timed(run_baseline)
    baseline.close()

    ledger = Ledger(LedgerConfig(data_dir=Path(tempfile.mkdtemp(dir=root)), run_checkpointer=False))

    def run_signed() -> None:
        for start in range(0, len(drafts), batch):
            ledger.append_batch(drafts[start : start + batch], tenant_id=TENANT)

    signed_seconds = timed(run_signed)
    ledger.close()
    return rate(len(drafts), base_seconds), rate(len(drafts), signed_seconds)


def _verify_chunk(args: tuple[bytes, int]) -> int:
    public_raw_seed, count = args
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey as Key

    key = Key.from_private_bytes(public_raw_seed)
    public = key.public_key()
    message = b"x" * 700
    signature = key.sign(message)
    for _ in range(count):
        public.verify(signature, message)
    return count


def ed25519_verify_rate(cores: int, count: int) -> float:
    seed = os.urandom(32)
    with multiprocessing.Pool(cores) as pool:
        started = time.perf_counter()
        done = sum(pool.map(_verify_chunk, [(seed, count // cores)] * cores))
        return rate(done, time.perf_counter() - started)


def build_store(root: Path, size: int, template: list[EventDraft]) -> Ledger:
    ledger = Ledger(LedgerConfig(data_dir=root / "big", run_checkpointer=False))
    batch = 1000
    while ledger.size < size:
        count = min(batch, size - ledger.size)
        drafts = [
            EventDraft(type=t.type, tenant_id=t.tenant_id, actor=t.actor, payload=t.payload)
            for t in (template[i % len(template)] for i in range(count))
        ]
        ledger.append_batch(drafts, tenant_id=TENANT)
    ledger.issue_checkpoint()
    return ledger


def proof_latency(leaves: int, samples: int) -> tuple[float, float, float]:
    tree = MerkleTree()
    tree.extend(os.urandom(32) for _ in range(leaves))
    rng = random.Random(7)
    inclusion, consistency = [], []
    for _ in range(samples):
        index = rng.randrange(leaves)
        started = time.perf_counter()
        tree.inclusion_proof(index, leaves)
        inclusion.append(time.perf_counter() - started)
        old = rng.randrange(1, leaves)
        started = time.perf_counter()
        tree.consistency_proof(old, leaves)
        consistency.append(time.perf_counter() - started)
    started = time.perf_counter()
    tree.root(leaves)
    root_ms = (time.perf_counter() - started) * 1000
    return statistics.median(inclusion) * 1000, statistics.median(consistency) * 1000, root_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=20_000, help="events per append measurement")
    parser.add_argument("--single", type=int, default=2_000, help="events for single-event transactions")
    parser.add_argument("--verify-size", type=int, default=1_000_000)
    parser.add_argument("--proof-leaves", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks/ledger.md"))
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        seed_ledger = Ledger(LedgerConfig(data_dir=root / "seed", run_checkpointer=False))
        template = [retrieval_draft(seed_ledger, f"question {i}") for i in range(200)]
        seed_ledger.close()

        def drafts(count: int) -> list[EventDraft]:
            return [
                EventDraft(type=t.type, tenant_id=t.tenant_id, actor=t.actor, payload=t.payload)
                for t in (template[i % len(template)] for i in range(count))
            ]

        rows: list[tuple[str, str, str, str]] = []
        base1, signed1 = bench_appends(root, drafts(args.single), 1)
        rows.append(
            (
                "append, 1 event per transaction",
                f"{base1:,.0f}/s",
                f"{signed1:,.0f}/s",
                f"{signed1 / base1:.2f}x",
            )
        )
        base100, signed100 = bench_appends(root, drafts(args.events), 100)
        rows.append(
            (
                "append, 100 events per transaction",
                f"{base100:,.0f}/s",
                f"{signed100:,.0f}/s",
                f"{signed100 / base100:.2f}x",
            )
        )

        print(f"building a {args.verify_size:,}-entry SQLite store ...", file=sys.stderr)
        started = time.perf_counter()
        big = build_store(root, args.verify_size, template)
        build_seconds = time.perf_counter() - started
        size = big.size
        verify_seconds = timed(lambda: verify_store(big.store, big.root_public_key))
        report = verify_store(big.store, big.root_public_key)
        assert report.ok, report.first_bad
        # `verify --deep` and its reference, interleaved and best of 3 each, so load from
        # other work on a shared host hits both alike.
        deep_runs, ed_runs = [], []
        for _ in range(3):
            ed_runs.append(ed25519_verify_rate(2, 40_000))
            deep_runs.append(timed(lambda: verify_store(big.store, big.root_public_key, deep=True)))
        deep_seconds, ed_two = min(deep_runs), max(ed_runs)
        big.close()
        ed_one = ed25519_verify_rate(1, 20_000)
        inclusion_ms, consistency_ms, root_ms = proof_latency(args.proof_leaves, 1000)

    verify_rate = rate(size, verify_seconds)
    deep_rate = rate(size, deep_seconds)
    lines = [
        "# Ledger benchmark",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"SQLite store (embedded default); generated by `scripts/bench_ledger.py`.",
        "",
        "| measurement | baseline (plain eventsourcing, unsigned) | citeledger (signed, chained) | ratio |",
        "| --- | --- | --- | --- |",
        *[f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows],
        "",
        "| measurement | result | target | ratio to reference |",
        "| --- | --- | --- | --- |",
        f"| build {size:,}-entry store (batches of 1000) "
        f"| {rate(size, build_seconds):,.0f} entries/s | - | - |",
        f"| `verify` ({size:,} entries: Merkle roots, checkpoint signatures, signatures of the tail) "
        f"| {verify_rate:,.0f} entries/s | >= 100,000/s | {verify_rate / 100_000:.2f}x of target |",
        f"| `verify --deep` (every signature; best of 3, interleaved with the reference) "
        f"| {deep_rate:,.0f} entries/s | >= 0.8x two-core Ed25519 verify "
        f"| {deep_rate / ed_two:.2f}x of {ed_two:,.0f}/s (one core: {ed_one:,.0f}/s) |",
        f"| inclusion proof at {args.proof_leaves:,} leaves (median) | {inclusion_ms:.3f} ms | < 1 ms | - |",
        f"| consistency proof at {args.proof_leaves:,} leaves (median) "
        f"| {consistency_ms:.3f} ms | < 1 ms | - |",
        f"| root at {args.proof_leaves:,} leaves | {root_ms:.3f} ms | - | - |",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
