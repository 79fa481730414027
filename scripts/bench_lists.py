"""The lists' cost with totals: a page of 50 receipts / events (the read-model query the HTTP
routes, the CLI, MCP and the console run) on one SQLite ledger, timed with this checkout's code
and with a base checkout's (`--base`, e.g. `git archive main | tar -x -C /tmp/base`), each in
its own process, side by side in one run. This checkout also counts the matches (up to 10,000).

    python scripts/bench_lists.py --base /tmp/base --size 200000 --out docs/benchmarks/lists.md

The ledger is `scripts/bench_replay.py`'s workload (10 tenants, ~95% `external:` receipts),
built once by the base's code in `<ledger-root>/ledger-<size>` and reused; this checkout reads
a copy upgraded as docs/upgrades.md says (`migrate`, `rebuild`), so a base at an older schema
version compares too.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

# Run in a fresh process with one checkout's code on sys.path: the p50/p95 of each query.
PROBE = r"""
import json, statistics, sys, time
from pathlib import Path
from ledger.config import LedgerConfig
from ledger.usecases.ports import ReceiptFilter
from ledger.writing.application import Ledger
from projections.queries import ReadModels
from projections.views import HistoryFilter

directory, rounds = Path(sys.argv[1]), int(sys.argv[2])
with Ledger(LedgerConfig(data_dir=directory, run_checkpointer=False)) as ledger:
    models = ReadModels(ledger.store)
    rows = ledger.store.rows(
        "SELECT tenant_id, COUNT(*) AS n FROM citeledger_rm_receipts GROUP BY tenant_id ORDER BY n DESC")
    tenant, count = rows[0]["tenant_id"], rows[0]["n"]
    some = models.receipts(tenant, ReceiptFilter(), limit=50, order="asc").items
    task = some[0].body.get("task", {}).get("task_id")
    middle = some[-1].recorded_at
    queries = {
        "receipts, no filter": lambda: models.receipts(tenant, ReceiptFilter(), limit=50, order="desc"),
        "receipts, status=ok": lambda: models.receipts(
            tenant, ReceiptFilter(status="ok"), limit=50, order="desc"),
        "receipts, since (most of the log)": lambda: models.receipts(
            tenant, ReceiptFilter(recorded_from=middle), limit=50, order="desc"),
        "receipts, task_id": lambda: models.receipts(
            tenant, ReceiptFilter(task_id=task), limit=50, order="desc"),
        "events, no filter": lambda: models.events(tenant, HistoryFilter(), limit=50, order="desc"),
    }
    out = {"tenant_receipts": count}
    for name, run in queries.items():
        for _ in range(5):
            page = run()
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            page = run()
            times.append((time.perf_counter() - started) * 1000)
        times.sort()
        out[name] = {"p50": statistics.median(times), "p95": times[int(0.95 * len(times)) - 1],
                     "total": getattr(page, "total", None), "exact": getattr(page, "total_exact", None)}
print(json.dumps(out))
"""


# The bench ledger made by one checkout's code (`bench_api_receipts.ensure_ledger`).
BUILD = r"""
import sys
from pathlib import Path
sys.path.insert(0, "scripts")
from bench_api_receipts import ensure_ledger
print(ensure_ledger(Path(sys.argv[1]), int(sys.argv[2])))
"""


def run_with(checkout: Path, code: str, *argv: str) -> str:
    """`python -c code argv...` with `checkout`'s code on the path; its output."""
    done = subprocess.run(
        [sys.executable, "-c", code, *argv],
        cwd=checkout,
        env={"PYTHONPATH": str(checkout), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: {done.stderr[-2000:]}")
    return done.stdout.strip()


def probe(checkout: Path, directory: Path, rounds: int) -> dict:
    return json.loads(run_with(checkout, PROBE, str(directory), str(rounds)).splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", type=Path, required=True, help="a base checkout (same or older schema)")
    parser.add_argument("--size", type=int, default=200_000, help="log entries")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--ledger-root", type=Path, default=Path(tempfile.gettempdir()) / "citeledger-bench")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    directory = args.ledger_root / f"ledger-{args.size}"
    directory.mkdir(parents=True, exist_ok=True)
    # Built by the base's code, so both read the same log: this checkout reads a copy upgraded
    # the documented way (`citeledger migrate`, then its read models rebuilt by `rebuild`).
    print(run_with(args.base, BUILD, str(directory), str(args.size)), flush=True)
    upgraded = args.ledger_root / f"ledger-{args.size}-upgraded"
    shutil.rmtree(upgraded, ignore_errors=True)
    shutil.copytree(directory, upgraded)
    for command in (["migrate"], ["rebuild"]):
        run_with(ROOT, "import runpy; runpy.run_module('cli.main', run_name='__main__')",
                 *command, "--data-dir", str(upgraded))  # fmt: skip
    base = probe(args.base, directory, args.rounds)
    head = probe(ROOT, upgraded, args.rounds)
    lines = [
        f"Log of {args.size:,} entries (SQLite), the largest tenant's {head['tenant_receipts']:,} receipts; "
        f"a page of 50, newest first; {args.rounds} rounds each, base and this checkout in one run.",
        "",
        "| query | base p50 ms | this p50 ms | ratio | base p95 ms | this p95 ms | total |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, mine in head.items():
        if name == "tenant_receipts":
            continue
        was = base[name]
        total = f"{mine['total']:,}" if mine["exact"] else f"more than {mine['total']:,}"
        lines.append(
            f"| {name} | {was['p50']:.2f} | {mine['p50']:.2f} | {mine['p50'] / was['p50']:.2f}x | "
            f"{was['p95']:.2f} | {mine['p95']:.2f} | {total} |"
        )
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.write_text(table + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
