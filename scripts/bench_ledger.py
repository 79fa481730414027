"""Ledger benchmark: signed appends vs plain eventsourcing saves, verify, proofs.

Everything is measured in one run on the same machine and store kind, so the
ratios are meaningful even on a noisy shared host. Writes a Markdown table to
docs/benchmarks/ledger.md (and prints it).

    python scripts/bench_ledger.py [--verify-size 1000000] [--out docs/benchmarks/ledger.md]
    python scripts/bench_ledger.py --startup-only [--verify-size 1000000]

Startup (`## Startup` section): a small and a big store (the `--verify-size`
one), each first served once so the read models are current (a restart, not a
first start after a bulk load); then the real commands in subprocesses:
`citeledger checkpoint --data-dir D` to exit, and `citeledger serve` to the
first 200 from GET /v1/healthz. `--startup-only` measures just that and
replaces the section in the existing file, keeping the other tables.
"""

from __future__ import annotations

import argparse
import datetime as dt
import multiprocessing
import os
import platform
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event

from ledger.config import LedgerConfig
from ledger.domain.entries import EventDraft
from ledger.storage.audit import verify_store
from ledger.tlog.merkle import MerkleTree
from ledger.writing.application import Ledger
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


def build_store(root: Path, size: int, template: list[EventDraft], name: str = "big") -> Ledger:
    ledger = Ledger(LedgerConfig(data_dir=root / name, run_checkpointer=False))
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


REPO = Path(__file__).resolve().parents[1]
STARTUP_HEADING = "## Startup"


def _cli_env() -> dict[str, str]:
    """The real command line, importing this checkout; SQLite (no database URL)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CITELEDGER_")}
    env["PYTHONPATH"] = str(REPO)
    env["CITELEDGER_BOOTSTRAP_TOKEN"] = "bench-startup-token-0123456789abcdef"
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def time_checkpoint_command(data_dir: Path) -> float:
    """Seconds for `citeledger checkpoint --data-dir D` to exit (open, sign, close)."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "cli.main", "checkpoint", "--data-dir", str(data_dir)],
        cwd=REPO,
        env=_cli_env(),
        check=True,
        capture_output=True,
        timeout=3600,
    )
    return time.perf_counter() - started


def time_serve_to_healthy(data_dir: Path, timeout_s: float = 3600.0) -> float:
    """Seconds from starting `citeledger serve` to its first 200 on GET /v1/healthz."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}/v1/healthz"
    started = time.perf_counter()
    command = [sys.executable, "-m", "cli.main", "serve", "--data-dir", str(data_dir), "--port", str(port)]
    server = subprocess.Popen(
        [*command, "--log-level", "warning"],
        cwd=REPO,
        env=_cli_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        while True:
            if server.poll() is not None:
                err = server.stderr.read().decode() if server.stderr else ""
                raise RuntimeError(f"serve exited with {server.returncode}: {err[-2000:]}")
            try:
                with urllib.request.urlopen(url, timeout=5) as response:  # loopback only
                    if response.status == 200:
                        return time.perf_counter() - started
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.perf_counter() - started > timeout_s:
                raise TimeoutError("serve did not become healthy")
            time.sleep(0.02)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def bench_startup(stores: dict[int, Path], runs: int) -> dict[int, dict[str, float]]:
    """Median startup seconds per store size, after one untimed warm-up serve each.

    The timed runs alternate between the stores, so background load on a shared
    machine skews both sides of the ratio alike.
    """
    first: dict[int, float] = {}
    for size, data_dir in stores.items():
        print(f"startup: warming the {size:,}-entry store (first serve) ...", file=sys.stderr)
        first[size] = time_serve_to_healthy(data_dir)
    samples: dict[int, dict[str, list[float]]] = {size: {"checkpoint": [], "serve": []} for size in stores}
    for _ in range(runs):
        for size, data_dir in stores.items():
            samples[size]["checkpoint"].append(time_checkpoint_command(data_dir))
            samples[size]["serve"].append(time_serve_to_healthy(data_dir))
    results = {
        size: {
            "first_serve": first[size],
            "checkpoint": statistics.median(samples[size]["checkpoint"]),
            "serve": statistics.median(samples[size]["serve"]),
        }
        for size in stores
    }
    print(f"startup: {samples}", file=sys.stderr)
    return results


def startup_section(results: dict[int, dict[str, float]], runs: int) -> list[str]:
    small, big = min(results), max(results)
    today = dt.datetime.now(dt.UTC).date().isoformat()
    lines = [
        f"{STARTUP_HEADING} ({today})",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; SQLite; "
        f"median of {runs} runs of the real commands in subprocesses (`python -m cli.main`), each store "
        "served once before (read models current, as on any restart). The Merkle tree opens from its "
        "persisted tiles (`ledger/storage/tree_store.py`), the key chain from the key-entry index.",
        "",
        f"| command | {small:,} entries | {big:,} entries | ratio {big:,} / {small:,} | target |",
        "| --- | --- | --- | --- | --- |",
    ]
    for key, label in (
        ("checkpoint", "`citeledger checkpoint` (start to exit)"),
        ("serve", "`citeledger serve` to the first 200 from `GET /v1/healthz`"),
    ):
        a, b = results[small][key], results[big][key]
        lines.append(f"| {label} | {a:.2f} s | {b:.2f} s | {b / a:.2f}x | <= 2x |")
    a, b = results[small]["first_serve"], results[big]["first_serve"]
    lines += [
        "",
        f"Untimed warm-up, for reference: the first `serve` after the bulk load took {a:.1f} s "
        f"({small:,}) and {b:.1f} s ({big:,}): it catches up the read models "
        "from position 0, which is proportional to the log by nature and happens once.",
        "",
    ]
    return lines


def replace_startup_section(text: str, section: list[str]) -> str:
    """The file with its startup section (if any) replaced by `section`, other tables kept."""
    kept = text.split(f"\n{STARTUP_HEADING}", 1)[0].rstrip("\n")
    return kept + "\n\n" + "\n".join(section)


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
    parser.add_argument("--startup-small", type=int, default=1_000, help="small store for the startup ratio")
    parser.add_argument("--startup-runs", type=int, default=3)
    parser.add_argument(
        "--startup-only", action="store_true", help="measure startup only; keep the file's other tables"
    )
    args = parser.parse_args()
    if args.startup_only:
        startup_only(args)
        return

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
        build_store(root, args.startup_small, template, name="small").close()
        startup = bench_startup({args.startup_small: root / "small", size: root / "big"}, args.startup_runs)
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
        *startup_section(startup, args.startup_runs),
    ]
    text = "\n".join(lines)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")


def startup_only(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        seed_ledger = Ledger(LedgerConfig(data_dir=root / "seed", run_checkpointer=False))
        template = [retrieval_draft(seed_ledger, f"question {i}") for i in range(200)]
        seed_ledger.close()
        stores: dict[int, Path] = {}
        for size, name in ((args.startup_small, "small"), (args.verify_size, "big")):
            print(f"building a {size:,}-entry SQLite store ...", file=sys.stderr)
            built = build_store(root, size, template, name=name)
            stores[built.size] = root / name
            built.close()
        results = bench_startup(stores, args.startup_runs)
    section = startup_section(results, args.startup_runs)
    print("\n".join(section))
    existing = args.out.read_text(encoding="utf-8") if args.out.exists() else "# Ledger benchmark\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(replace_startup_section(existing, section), encoding="utf-8")


if __name__ == "__main__":
    main()
