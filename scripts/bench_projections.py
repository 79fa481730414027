"""Projection benchmark: rebuild rate vs the raw notification-log read rate,
worker lag under a steady append rate, and `corpus_as_of` latency.

Everything runs in one invocation on the same machine, on SQLite and on
PostgreSQL, so the ratios are meaningful on a noisy shared host. Writes a
Markdown table to docs/benchmarks/projections.md (and prints it).

    python scripts/bench_projections.py [--events 1000000] [--backends sqlite,postgres]
        [--pg-dsn postgresql://postgres@127.0.0.1:5432/test] [--lag-seconds 20]
        [--base-repo /work/wt/base]

With `--base-repo` (a worktree of the previous main, with its own `.venv`) each store is
measured by this checkout's code and then by the base's, each in a process of its own (the
base's code on the path through CITELEDGER_BENCH_REPO), and the table gains a "vs previous
main" column (this ÷ main; for lag and latency, lower is better).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any

# The checkout whose code is measured: this one, or the base's in a `--base-repo` run.
sys.path.insert(0, os.environ.get("CITELEDGER_BENCH_REPO") or str(Path(__file__).resolve().parents[1]))

import orjson
import psycopg
from _bench_events import DOCS_PER_TENANT, TENANTS, cited, document_version, live_receipt

from ledger.config import LedgerConfig
from ledger.domain.entries import EventDraft
from ledger.domain.events import DocumentRemoved, PolicySnapshot, RetentionScrubbed, TaskEnvelope
from ledger.usecases.context import Caller, draft
from ledger.writing.application import Ledger
from ledger.writing.sealing import document_key_ref
from projections.catalog import default_projections
from projections.queries import ReadModels
from projections.runner import ProjectionRunner
from projections.tracking import read_lag

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]


class Workload:
    """A realistic mix built from a few sealed templates (sealing is not what we measure)."""

    def __init__(self, ledger: Ledger) -> None:
        self.rng = random.Random(7)
        seal = ledger.sealer.seal
        self.sealed = {t: seal("a chunk of text " * 20, tenant_id=t) for t in TENANTS}
        self.query = {t: seal("what is the retention floor?", tenant_id=t) for t in TENANTS}
        self.versions: dict[tuple[str, int], int] = {}
        self.snapshot = PolicySnapshot(
            bundle_hash="b" * 64, bundle_yaml="rules: []\n", captured_at="2026-01-01T00:00:00Z"
        )

    def retrieval(self, tenant: str) -> EventDraft:
        entries = []
        for _ in range(2):
            doc = self.rng.randrange(DOCS_PER_TENANT)
            entries.append(
                cited(
                    uuid.uuid4().hex,
                    doc,
                    f"doc-{doc}-c0",
                    f"docs/{doc}.md",
                    self.sealed[tenant],
                    "2030-01-01T00:00:00Z",
                )
            )
        task = TaskEnvelope(trace_id=f"trace-{self.rng.randrange(1000)}")
        return live_receipt(
            tenant, uuid.uuid4().hex, self.query[tenant], task, "citeledger-bm25@1", self.snapshot, entries
        )

    def ingest(self, tenant: str) -> EventDraft:
        doc = self.rng.randrange(DOCS_PER_TENANT)
        version = self.versions.get((tenant, doc), 0) + 1
        self.versions[(tenant, doc)] = version
        chunk_ids = [f"doc-{doc}-c{i}" for i in range(3)]
        return document_version(tenant, doc, version, f"docs/{doc}.md", chunk_ids, [self.sealed[tenant]] * 3)

    def batch(self, size: int) -> list[EventDraft]:
        drafts = []
        for i in range(size):
            tenant = self.rng.choice(TENANTS)
            if i % 50 == 0:
                drafts.append(self.ingest(tenant))
            elif i % 499 == 0:
                doc = self.rng.randrange(DOCS_PER_TENANT)
                drafts.append(
                    draft(
                        Caller(tenant, "svc-ingest"),
                        DocumentRemoved(document_id=f"doc-{doc}", reason="withdrawn"),
                    )
                )
            elif i % 997 == 0:
                doc = self.rng.randrange(DOCS_PER_TENANT)
                drafts.append(
                    draft(
                        Caller(tenant, "svc-retention"),
                        RetentionScrubbed(
                            reason="retention_expired",
                            key_refs=[document_key_ref(tenant, f"doc-{doc}")],
                            document_ids=[f"doc-{doc}"],
                        ),
                    )
                )
            else:
                drafts.append(self.retrieval(tenant))
        return drafts


def open_config(backend: str, root: Path, dsn: str) -> tuple[LedgerConfig, str | None]:
    data_dir = Path(tempfile.mkdtemp(dir=root))
    if backend == "sqlite":
        return LedgerConfig(data_dir=data_dir, run_checkpointer=False), None
    schema = "bench_" + uuid.uuid4().hex[:12]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return LedgerConfig(
        data_dir=data_dir, database_url=f"{dsn}?schema={schema}", run_checkpointer=False
    ), schema


def build(ledger: Ledger, workload: Workload, events: int) -> float:
    started = time.perf_counter()
    remaining = events - ledger.size
    done = 0
    while remaining > 0:
        size = min(1000, remaining)
        ledger.append_batch(workload.batch(size))
        remaining -= size
        done += size
        if done % 100_000 == 0:
            print(f"  built {done:,} entries ({done / (time.perf_counter() - started):,.0f}/s)", flush=True)
    return done / (time.perf_counter() - started)


def read_rate(ledger: Ledger, parse: bool, cpu: list[float] | None = None) -> float:
    """Reading the whole notification log with eventsourcing's recorder alone (`parse`: and
    parsing every entry's JSON, the floor under any projection); `cpu` gets this process's
    CPU seconds for it."""
    recorder: Any = ledger.store.recorder
    started, cpu_started = time.perf_counter(), time.process_time()
    count, after = 0, 0
    while True:
        rows = recorder.select_notifications(start=after, limit=2000, inclusive_of_start=False)
        if not rows:
            break
        if parse:
            for row in rows:
                orjson.loads(row.state)
        count += len(rows)
        after = rows[-1].id
    if cpu is not None:
        cpu.append(time.process_time() - cpu_started)
    return count / (time.perf_counter() - started)


def rebuild_rate(ledger: Ledger, cpu: list[float]) -> float:
    runner = ProjectionRunner(ledger.store, batch_size=2000)
    started, cpu_started = time.perf_counter(), time.process_time()
    runner.rebuild()
    seconds = time.perf_counter() - started
    cpu.append(time.process_time() - cpu_started)
    assert runner.applied_position() == ledger.size and runner.health()["ok"]
    return ledger.size / seconds


def bytes_on_disk(ledger: Ledger, schema: str | None, dsn: str) -> dict[str, int]:
    """Bytes each table takes with its indexes: SQLite's `dbstat` (the pages of each b-tree,
    free pages not counted), PostgreSQL's `pg_total_relation_size` (heap, TOAST, indexes)."""
    if schema is None:
        import sqlite3

        with sqlite3.connect(ledger.config.sqlite_path) as conn:
            owner = dict(
                conn.execute("SELECT name, tbl_name FROM sqlite_master WHERE type IN ('table', 'index')")
            )
            sizes: dict[str, int] = {}
            for name, size in conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
                table = owner.get(name, name)
                sizes[table] = sizes.get(table, 0) + int(size)
            return sizes
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
            (schema,),
        ).fetchall()
    return {str(name): int(size) for name, size in rows}


def bytes_figures(sizes: dict[str, int], log_table: str, entries: int, receipts: int) -> dict[str, float]:
    """Bytes per entry of the whole store, the log, the read models; the receipts read
    model's bytes per receipt."""
    log = sizes.get(log_table, 0)
    models = sum(size for name, size in sizes.items() if name.startswith("citeledger_rm_"))
    return {
        "bytes_per_entry": sum(sizes.values()) / entries,
        "log_bytes_per_entry": log / entries,
        "models_bytes_per_entry": models / entries,
        "receipts_bytes_per_receipt": sizes.get("citeledger_rm_receipts", 0) / max(receipts, 1),
        "receipts_share_of_models": sizes.get("citeledger_rm_receipts", 0) / max(models, 1),
    }


def as_of_latency(ledger: Ledger, samples: int = 300) -> tuple[float, float, float]:
    reads = ReadModels(ledger.store)
    rng = random.Random(3)
    timings, rows = [], []
    for _ in range(samples):
        tenant, position = rng.choice(TENANTS), rng.randint(1, ledger.size)
        started = time.perf_counter()
        chunks = reads.corpus_as_of(tenant, position)
        timings.append((time.perf_counter() - started) * 1000)
        rows.append(len(chunks))
    timings.sort()
    return statistics.median(timings), timings[int(len(timings) * 0.95) - 1], statistics.mean(rows)


def lag_under_load(
    ledger: Ledger, config: LedgerConfig, workload: Workload, seconds: float
) -> tuple[float, float, int]:
    """A `citeledger project` worker process follows while we append 1,000 events/s
    (20 every 20 ms); latency = commit -> applied by every projection."""
    env = {**os.environ, "CITELEDGER_DATA_DIR": str(config.data_dir)}
    env.pop("CITELEDGER_DATABASE_URL", None)
    if config.database_url:
        env["CITELEDGER_DATABASE_URL"] = config.database_url
    worker = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "project", "--batch-size", "500", "--poll-interval", "0.05"],
        cwd=os.environ.get("CITELEDGER_BENCH_REPO") or ROOT,  # the measured side's code (its schema)
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    committed: deque[tuple[int, float]] = deque()  # (last position of a batch, commit time)
    latencies: list[float] = []
    stop = threading.Event()

    def applied() -> int:
        return min(item.applied_position for item in read_lag(ledger.store))

    def monitor() -> None:
        deadline: float | None = None
        while True:
            position = applied()
            now = time.perf_counter()
            while committed and committed[0][0] <= position:
                latencies.append(now - committed.popleft()[1])
            if stop.is_set():
                deadline = deadline or now + 10
                if not committed or now > deadline:
                    return
            time.sleep(0.02)

    try:
        ready = time.monotonic() + 300
        while applied() < ledger.size:
            assert time.monotonic() < ready, "worker did not catch up"
            time.sleep(0.05)
        watcher = threading.Thread(target=monitor)
        watcher.start()
        tick = time.perf_counter()
        end = tick + seconds
        while tick < end:
            events = ledger.append_batch(workload.batch(20))
            committed.append((events[-1].position, time.perf_counter()))
            tick += 0.02
            time.sleep(max(0.0, tick - time.perf_counter()))
        stop.set()
        watcher.join()
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    latencies.sort()
    return statistics.median(latencies), latencies[int(len(latencies) * 0.95) - 1], len(latencies)


def figures(backend: str, args: argparse.Namespace, root: Path) -> dict[str, float]:
    """Every figure of one store with this process's code."""
    config, schema = open_config(backend, root, args.pg_dsn)
    ledger = Ledger(config)
    try:
        workload = Workload(ledger)
        print(f"[{backend}] building {args.events:,} entries", file=sys.stderr, flush=True)
        built = build(ledger, workload, args.events)
        size = ledger.size
        # The rebuild and its reference (the raw read), interleaved, best of 2 each:
        # load from other work on a shared host hits both alike.
        # CPU seconds of this process too: less moved by other work than wall time (on
        # PostgreSQL only the client's share: the server's is not in it).
        raws: list[float] = []
        parses: list[float] = []
        rebuilds: list[float] = []
        raw_cpu: list[float] = []
        rebuild_cpu: list[float] = []
        for attempt in range(2):
            print(f"[{backend}] reading the log, rebuilding ({attempt + 1}/2)", file=sys.stderr, flush=True)
            raws.append(read_rate(ledger, parse=False, cpu=raw_cpu))
            parses.append(read_rate(ledger, parse=True))
            rebuilds.append(rebuild_rate(ledger, rebuild_cpu))
        counted = ledger.store.rows(
            f"SELECT COUNT(*) AS n FROM {ledger.store.table('citeledger_rm_receipts')}"
        )
        receipts = int(counted[0]["n"])
        on_disk = bytes_figures(
            bytes_on_disk(ledger, schema, args.pg_dsn), ledger.store.events_table, size, receipts
        )
        p50, p95, mean_rows = as_of_latency(ledger)
        print(f"[{backend}] lag under 1,000 appends/s", file=sys.stderr, flush=True)
        lag50, lag95, samples = lag_under_load(ledger, config, workload, args.lag_seconds)
    finally:
        ledger.close()
        if schema:
            with psycopg.connect(args.pg_dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    raw = max(raws)
    return {
        "size": size, "built": built, "raw": raw, "parsed": max(parses), "rebuilt": max(rebuilds),
        "rebuilt_x_raw": max(rebuilds) / raw, "as_of_p50": p50, "as_of_p95": p95, "as_of_rows": mean_rows,
        "lag50": lag50, "lag95": lag95, "lag_samples": samples,
        "raw_cpu_us": min(raw_cpu) / size * 1e6, "rebuild_cpu_us": min(rebuild_cpu) / size * 1e6,
        "rebuild_cpu_x_raw": min(raw_cpu) / min(rebuild_cpu), **on_disk,
    }  # fmt: skip


def _base_figures(backend: str, args: argparse.Namespace) -> dict[str, float]:
    """`figures` with the base checkout's code, in its own process."""
    command = [
        str(args.base_repo / ".venv" / "bin" / "python"), str(HERE), "--json", "--backends", backend,
        "--events", str(args.events), "--pg-dsn", args.pg_dsn, "--lag-seconds", str(args.lag_seconds),
    ]  # fmt: skip
    env = {**os.environ, "CITELEDGER_BENCH_REPO": str(args.base_repo)}
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True, timeout=7200)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def table_rows(label: str, f: dict[str, float], previous: dict[str, float] | None) -> list[str]:
    """The store's rows; with `previous` (main's figures) a "vs previous main" cell each."""
    lag_verdict = "met" if f["lag95"] < 1 else "missed"
    as_of_verdict = "met" if f["as_of_p95"] < 20 else "missed"
    size = int(f["size"])

    def versus(key: str) -> str:
        return (
            f" {f[key] / previous[key]:.2f}x |"
            if previous and previous.get(key)
            else (" - |" if previous else "")
        )

    table = [
        (
            f"build store ({size:,} entries, signed, batches of 1000)",
            f"{f['built']:,.0f} entries/s", "-", "-", "built",
        ),
        (
            "raw notification-log read (`select_notifications`, pages of 2000; best of 2)",
            f"{f['raw']:,.0f} events/s", "-", "-", "raw",
        ),
        (
            "reference: notification-log read + `orjson.loads` of every entry",
            f"{f['parsed']:,.0f} events/s", "-", f"{f['parsed'] / f['raw']:.2f}x raw", "parsed",
        ),
        (
            f"rebuild all {len(default_projections())} read models from position 0 (best of 2, "
            "interleaved with the raw read)",
            f"{f['rebuilt']:,.0f} events/s", ">= 0.3x raw", f"{f['rebuilt_x_raw']:.2f}x raw", "rebuilt_x_raw",
        ),
        (
            "rebuild, CPU of this process per entry (least of 2; PostgreSQL: the client's share), "
            "and raw read's CPU per entry ÷ it",
            f"{f.get('rebuild_cpu_us', 0):,.0f} µs (raw read {f.get('raw_cpu_us', 0):,.1f} µs)", "-",
            f"{f.get('rebuild_cpu_x_raw', 0):.2f}x raw", "rebuild_cpu_us",
        ),
        (
            "bytes on disk per entry after the rebuild, whole store (log; read models): tables with "
            "their indexes (SQLite `dbstat`, PostgreSQL `pg_total_relation_size`)",
            f"{f.get('bytes_per_entry', 0):,.0f} B ({f.get('log_bytes_per_entry', 0):,.0f}; "
            f"{f.get('models_bytes_per_entry', 0):,.0f})", "<= 4 KB per retrieval", "-", "bytes_per_entry",
        ),
        (
            "receipts read model: bytes per receipt, and its share of the read models' bytes",
            f"{f.get('receipts_bytes_per_receipt', 0):,.0f} B ({f.get('receipts_share_of_models', 0):.0%})",
            "-", "-", "receipts_bytes_per_receipt",
        ),
        (
            f"`citeledger project` worker lag at 1,000 appends/s, p50 / p95 ({f['lag_samples']:.0f} batches)",
            f"{f['lag50'] * 1000:,.0f} / {f['lag95'] * 1000:,.0f} ms", "p95 < 1 s", lag_verdict, "lag95",
        ),
        (
            f"`corpus_as_of` at {size:,} entries, p50 / p95 (~{f['as_of_rows']:,.0f} chunks returned)",
            f"{f['as_of_p50']:.1f} / {f['as_of_p95']:.1f} ms", "p95 < 20 ms", as_of_verdict, "as_of_p95",
        ),
    ]  # fmt: skip
    return [f"| {label} | {' | '.join(cells[:4])} |" + versus(cells[4]) for cells in table]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--pg-dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--lag-seconds", type=float, default=20.0)
    # No default file: the benchmark docs hold every run's account, which a run must not overwrite.
    parser.add_argument("--out", type=Path, default=None, help="write the report here too")
    parser.add_argument("--base-repo", type=Path, default=None, help="a worktree of the previous main")
    parser.add_argument("--json", action="store_true", help="one side, one store: its figures as JSON")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="citeledger-bench-proj-"))
    if args.json:
        print(json.dumps(figures(args.backends, args, root)))
        return
    rows: list[str] = []
    for backend in args.backends.split(","):
        ours = figures(backend, args, root)
        previous = _base_figures(backend, args) if args.base_repo else None
        label = "SQLite" if backend == "sqlite" else "PostgreSQL"
        rows += table_rows(label, ours, previous)
        write_report(args.out, args.events, rows, previous is not None)
        print("\n".join(rows[-7:]), flush=True)
    print(write_report(args.out, args.events, rows, args.base_repo is not None))


def write_report(out: Path | None, events: int, rows: list[str], against_main: bool = False) -> str:
    scale = "" if events >= 1_000_000 else f" **Run at {events:,} entries, not the 1,000,000 target size.**"
    text = "\n".join(
        [
            "# Projection benchmark",
            "",
            f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared with other work), "
            f"Python {platform.python_version()}; generated by "
            f"`scripts/bench_projections.py --events {events}`.{scale}",
            "Workload: 10 tenants; per 1000 entries ~20 document versions (3 chunks each), ~2 removals, "
            "~1 scrub, the rest retrievals citing 2 chunks each (entries ~3 KB: sealed query and snapshots).",
            "",
            *(
                [
                    "Each store: this code, then the previous main's (a worktree of it, its own process); "
                    f'load average {os.getloadavg()[0]:.1f} at the end. "vs previous main": this ÷ main.',
                    "",
                    "| store | measurement | result | target | ratio / verdict | vs previous main |",
                    "| --- | --- | --- | --- | --- | --- |",
                ]
                if against_main
                else [
                    "| store | measurement | result | target | ratio / verdict |",
                    "| --- | --- | --- | --- | --- |",
                ]
            ),
            *rows,
            "",
        ]
    )
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    return text


if __name__ == "__main__":
    main()
