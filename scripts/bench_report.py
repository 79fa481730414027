"""Benchmark: the record-keeping report (issue 31) at 100k and 1M events of one tenant.

For each size: a SQLite ledger of that many retrieval receipts of one tenant (one
`AccessDenied` in 201), a signed checkpoint every 10,000 entries, one period covering them
all, written once with the bare signed batch append (`Ledger.append_batch`) under `--dir` and
reused by later runs (`--dir` is kept: delete it when done). Timed for each side, each in its
own process with its own checkout's code, on the same ledger: `issue_report` (figures,
evidence, HTML, the signed entry; no PDF) and `verify_report` (offline), wall and CPU time
(every thread of the process), and the report's size by file. The ratios are what to quote
(the machine is shared). Prints a Markdown table.

    .venv/bin/python scripts/bench_report.py --events 100000 1000000 \
        --base-repo /work/main --base-events 100000
    .venv/bin/python scripts/bench_report.py --json --repo DIR --events 100000   # one side (used for each)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

HERE = Path(__file__).resolve()
T = TypeVar("T")
BATCH = 1000


def build(root: Path, size: int) -> dict[str, str]:
    """The ledger of `size` entries under `root` (made once; its period is kept beside it)."""
    from ledger.config import LedgerConfig
    from ledger.domain.entries import EventDraft
    from ledger.domain.events import AccessDenied
    from ledger.domain.timestamps import format_timestamp
    from ledger.writing.application import Ledger
    from tests.factories import TENANT, retrieval_draft

    meta_path = root / f"ledger-{size}.json"
    if meta_path.exists():
        meta: dict[str, str] = json.loads(meta_path.read_text())
        return meta
    config = LedgerConfig(data_dir=root / f"ledger-{size}", run_checkpointer=False)
    with Ledger(config) as ledger:
        template = [retrieval_draft(ledger, f"question {i}") for i in range(200)]
        template.append(
            EventDraft.of(
                AccessDenied(
                    resource_type="citation", resource_id="c-1", required_scope="x", reason="restricted"
                ),
                tenant_id=TENANT,
                actor="reader",
            )
        )
        ledger.issue_checkpoint()
        time.sleep(0.01)
        start = format_timestamp(datetime.now(UTC))
        while ledger.size < size:
            count = min(BATCH, size - ledger.size)
            # A fresh event id each (the payload class gives the type).
            drafts = [
                EventDraft.of(t.payload, tenant_id=t.tenant_id, actor=t.actor)  # type: ignore[arg-type]
                for t in (template[i % len(template)] for i in range(count))
            ]
            ledger.append_batch(drafts, tenant_id=TENANT)
            if ledger.size % 10_000 < BATCH:
                ledger.issue_checkpoint()  # a checkpoint every 10k entries, as a busy ledger has
        ledger.issue_checkpoint()
        time.sleep(0.01)
        end = format_timestamp(datetime.now(UTC) + timedelta(milliseconds=1))
    meta = {"start": start, "end": end, "ledger": str(config.data_dir)}
    meta_path.write_text(json.dumps(meta))
    return meta


class DescendantsCPU:
    """CPU seconds of this process's descendants (verify-report's worker processes, children of
    multiprocessing's fork server), sampled from /proc every 0.1 s while they live: a pool's
    workers are reaped by the fork server, so `os.times()` never sees them. Misses at most the
    last 0.1 s of each worker's life."""

    def __init__(self) -> None:
        self.seen: dict[int, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        tick, parents = os.sysconf("SC_CLK_TCK"), {}
        stats: dict[int, list[str]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                pid = int(entry.name)
                parents[pid], stats[pid] = int(fields[1]), fields
        for pid, fields in stats.items():
            ancestor = parents.get(pid)
            while ancestor is not None and ancestor != os.getpid():
                ancestor = parents.get(ancestor)
            if ancestor is not None:  # fields 14 and 15 of stat: utime, stime (from index 11 here)
                self.seen[pid] = (int(fields[11]) + int(fields[12])) / tick

    def _run(self) -> None:
        while not self.stop.wait(0.1):
            self._sample()

    def during(self, call: Callable[[], T]) -> T:
        """`call()`, sampled while it runs."""
        self.thread.start()
        try:
            return call()
        finally:
            self.stop.set()
            self.thread.join()

    @property
    def seconds(self) -> float:
        return sum(self.seen.values())


def one_side(root: Path, size: int, name: str) -> dict[str, Any]:
    """Generate and verify the report of the ledger of `size` with the code on sys.path."""
    from bootstrap import ledger_context
    from ledger.config import LedgerConfig
    from ledger.evidence.report_check import verify_report
    from ledger.tlog.signing import KeyDirectory
    from ledger.usecases.context import Caller
    from ledger.usecases.report import issue_report, report_period
    from ledger.writing.application import Ledger
    from tests.factories import TENANT

    meta = json.loads((root / f"ledger-{size}.json").read_text())
    config = LedgerConfig(data_dir=Path(meta["ledger"]), run_checkpointer=False)
    out = root / f"report-{size}-{name}"
    shutil.rmtree(out, ignore_errors=True)
    with Ledger(config) as ledger:
        ctx = ledger_context(ledger)  # (its read models catch up here, before the clock starts)
        period = report_period(meta["start"], meta["end"], now=datetime.now(UTC))
        caller = Caller(TENANT, "bench", frozenset({"audit.read"}))
        wall, cpu = time.perf_counter(), time.process_time()
        outcome = issue_report(ctx, caller, period, out, pdf=False)
        generate, generate_cpu = time.perf_counter() - wall, time.process_time() - cpu
    root_key = KeyDirectory(config.keys_dir).root_public_key()
    load = os.getloadavg()[0]
    workers = DescendantsCPU()
    wall, cpu = time.perf_counter(), time.process_time()
    checked = workers.during(lambda: verify_report(out, root_key, tenant=TENANT))
    verify, verify_cpu = time.perf_counter() - wall, time.process_time() - cpu
    load = max(load, os.getloadavg()[0])
    assert checked.ok, checked.problem
    sizes = {
        path.relative_to(out).as_posix(): path.stat().st_size for path in out.rglob("*") if path.is_file()
    }
    shutil.rmtree(out)
    return {
        "events": size,
        "counted": outcome.entries,
        "generate_s": generate,
        "generate_cpu_s": generate_cpu,
        "verify_s": verify,
        "verify_cpu_s": verify_cpu + workers.seconds,
        "verify_workers_cpu_s": workers.seconds,
        "verify_main_cpu_s": verify_cpu,
        "verify_busiest_worker_cpu_s": max(workers.seen.values(), default=0.0),
        "load": load,
        "report_bytes": sum(sizes.values()),
        "files": sizes,
    }


def _side(repo: Path, root: Path, size: int, name: str) -> dict[str, Any]:
    """One side in its own process, importing `repo`'s code (no bytecode written there)."""
    flags = {"--repo": repo, "--dir": root, "--events": size, "--name": name}
    command = [sys.executable, str(HERE), "--json", *(str(part) for flag in flags.items() for part in flag)]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run(command, check=True, capture_output=True, text=True, timeout=7200, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def table(rows: list[tuple[str, dict[str, Any]]], base: dict[int, dict[str, Any]]) -> str:
    lines = [
        "| events | code | generation (wall) | generation (CPU) | verify-report (wall) "
        "| verify-report (CPU) | of it in workers | load | report size |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, r in rows:
        lines.append(
            f"| {int(r['events']):,} | {name} | {r['generate_s']:.1f} s | {r['generate_cpu_s']:.1f} s | "
            f"{r['verify_s']:.1f} s | {r['verify_cpu_s']:.1f} s | {r['verify_workers_cpu_s']:.1f} s | "
            f"{r['load']:.1f} | {r['report_bytes'] / 1e6:.1f} MB |"
        )
    for size, b in sorted(base.items()):
        new = next((r for name, r in rows if name == "this branch" and r["events"] == size), None)
        if new is None:
            continue
        timed = ("generate_s", "generate_cpu_s", "verify_s", "verify_cpu_s")
        ratios = " | ".join(f"{new[key] / b[key]:.2f}x" for key in timed)
        size_ratio = new["report_bytes"] / b["report_bytes"]
        lines.append(f"| {size:,} | this ÷ main | {ratios} | | | {size_ratio:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, nargs="+", default=[100_000])
    parser.add_argument("--dir", type=Path, default=Path("/work/tmp/report-bench"), help="ledgers (kept)")
    parser.add_argument("--repo", type=Path, default=HERE.parents[1], help="checkout whose code runs")
    parser.add_argument("--base-repo", type=Path, default=None, help="a checkout of the base (main)")
    parser.add_argument("--base-events", type=int, nargs="*", default=None, help="sizes main runs (all)")
    parser.add_argument("--name", default="side")
    parser.add_argument("--json", action="store_true", help="print one JSON line (one side, one size)")
    args = parser.parse_args()
    sys.path.insert(0, str(args.repo.resolve()))
    args.dir.mkdir(parents=True, exist_ok=True)
    if args.json:
        print(json.dumps(one_side(args.dir, args.events[0], args.name)))
        return
    rows: list[tuple[str, dict[str, Any]]] = []
    base: dict[int, dict[str, Any]] = {}
    for size in args.events:
        build(args.dir, size)
        if args.base_repo is not None and (args.base_events is None or size in args.base_events):
            base[size] = _side(args.base_repo, args.dir, size, "main")
            rows.append(("main", base[size]))
            print(rows[-1], flush=True)
        rows.append(("this branch", _side(args.repo, args.dir, size, "branch")))
        print(rows[-1], flush=True)
    print(table(rows, base))
    for name, r in rows:
        print(f"\n{int(r['events']):,} events, {name}, by file:")
        for file, value in sorted(r["files"].items(), key=lambda item: -item[1])[:6]:
            print(f"- `{file}`: {value / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
