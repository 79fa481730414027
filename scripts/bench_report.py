"""Benchmark: the record-keeping report (issue 31) at 100k and 1M events of one tenant.

For each size: a SQLite ledger of that many retrieval receipts of one tenant (and a few other
kinds), one period covering them all. Timed in the same run, side by side: `issue_report`
(figures, evidence, HTML; no PDF), the tenant export of the same ledger (the nearest existing
pass: every entry of the tenant with its inclusion proof), `verify_report` and
`verify_tenant_export`. The ratios are what to quote (the machine is shared); the report's
size by file too. Writes docs/benchmarks/report.md with --write.

    .venv/bin/python scripts/bench_report.py --events 100000 1000000 --write
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bootstrap import ledger_context  # noqa: E402
from ledger.config import LedgerConfig  # noqa: E402
from ledger.domain.entries import EventDraft  # noqa: E402
from ledger.domain.events import AccessDenied  # noqa: E402
from ledger.domain.timestamps import format_timestamp  # noqa: E402
from ledger.evidence.report_check import verify_report  # noqa: E402
from ledger.evidence.tenant_export import iter_tenant_export, verify_tenant_export  # noqa: E402
from ledger.tlog.signing import KeyDirectory  # noqa: E402
from ledger.usecases.context import Caller  # noqa: E402
from ledger.usecases.report import issue_report, report_period  # noqa: E402
from ledger.writing.application import Ledger  # noqa: E402
from tests.factories import TENANT, retrieval_draft  # noqa: E402

BATCH = 1000


def build(root: Path, size: int) -> tuple[LedgerConfig, str, str]:
    config = LedgerConfig(data_dir=root / f"l{size}", run_checkpointer=False)
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
    return config, start, end


def bench(root: Path, size: int) -> dict[str, float]:
    config, start, end = build(root, size)
    root_key = KeyDirectory(config.keys_dir).root_public_key()
    out = root / f"report-{size}"
    export = root / f"export-{size}.jsonl"
    with Ledger(config) as ledger:
        ctx = ledger_context(ledger)
        period = report_period(start, end, now=datetime.now(UTC))
        started = time.perf_counter()
        outcome = issue_report(
            ctx, Caller(TENANT, "bench", frozenset({"audit.read"})), period, out, pdf=False
        )
        generate = time.perf_counter() - started
        started = time.perf_counter()
        with export.open("wb") as handle:
            for line in iter_tenant_export(ledger, TENANT):
                handle.write(line)
        exported = time.perf_counter() - started
    started = time.perf_counter()
    checked = verify_report(out, root_key, tenant=TENANT)
    verify = time.perf_counter() - started
    assert checked.ok, checked.problem
    started = time.perf_counter()
    export_checked = verify_tenant_export(export, root_key)
    verify_export = time.perf_counter() - started
    assert export_checked.ok
    sizes = {
        path.relative_to(out).as_posix(): path.stat().st_size for path in out.rglob("*") if path.is_file()
    }
    return {
        "events": size,
        "counted": outcome.entries,
        "generate_s": generate,
        "export_s": exported,
        "verify_s": verify,
        "verify_export_s": verify_export,
        "report_bytes": sum(sizes.values()),
        "export_bytes": export.stat().st_size,
        **{f"file:{name}": value for name, value in sizes.items()},
    }


def table(results: list[dict[str, float]]) -> str:
    lines = [
        "| events | report generation | tenant export (same run) | ratio | verify-report "
        "| verify tenant export | ratio | report size | export size |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        lines.append(
            f"| {int(r['events']):,} | {r['generate_s']:.1f} s | {r['export_s']:.1f} s | "
            f"{r['generate_s'] / r['export_s']:.2f}x | {r['verify_s']:.1f} s | "
            f"{r['verify_export_s']:.1f} s | "
            f"{r['verify_s'] / r['verify_export_s']:.2f}x | {r['report_bytes'] / 1e6:.1f} MB | "
            f"{r['export_bytes'] / 1e6:.1f} MB |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, nargs="+", default=[100_000])
    parser.add_argument("--dir", type=Path, default=None, help="Where the ledgers go (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        results = []
        for size in args.events:
            result = bench(Path(tmp), size)
            results.append(result)
            print(result, flush=True)
    print(table(results))
    for r in results:
        files = {k.removeprefix("file:"): v for k, v in r.items() if k.startswith("file:")}
        print(f"\n{int(r['events']):,} events, by file:")
        for name, value in sorted(files.items(), key=lambda item: -item[1]):
            print(f"- `{name}`: {value / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
