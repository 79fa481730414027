"""Client throughput, one run, SQLite and PostgreSQL, against a real `citeledger serve`
(one worker) on loopback:

  - one request per event (POST /v1/retrievals, 4 threads of one client);
  - batched through the client (POST /v1/retrievals/batch, 500 per request, one thread);
  - the ledger's own in-process batched append (100 per transaction, as bench_ledger.py);
  - the batch use case in-process (`record_retrievals` on the server's own services, 500 per
    call): the same work as a batch request without HTTP, JSON and the client;
  - spool drain after an outage (records spooled while the ledger was unreachable, then
    delivered through the batch endpoint).

Targets: batched >= 5x one-per-request, batched >= 0.5x in-process batched.

    python scripts/bench_client.py [--out docs/benchmarks/client.md]
    python scripts/bench_client.py --base-repo /work/wt/base --rounds 2   # and main's code, alternated

With `--base-repo` each round runs this checkout's side, then the base's (its own `.venv`, its
code on the path through CITELEDGER_BENCH_REPO), each in its own process; the table gains a
"vs previous main" column per figure (this ÷ main, medians over the rounds).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

# The checkout whose code is measured: this one, or the base's in a `--base-repo` run.
sys.path.insert(0, os.environ.get("CITELEDGER_BENCH_REPO") or str(Path(__file__).resolve().parents[1]))

from _support import drop_schema, retrieval_body, scratch_config, services_with_document

from client import Client
from ledger.schemas.requests import RetrievalIn
from ledger.usecases.retrievals import BatchItem, record_retrievals
from ledger.writing.application import Ledger
from ledger.writing.idempotency import IdempotencyKey
from tests.api_support import DOC
from tests.factories import TENANT, retrieval_draft
from tests.server_process import ServerProcess, free_port, server_env

HERE = Path(__file__).resolve()
TOKEN = "bench-client-token"
SINGLE_EVENTS = 800
BATCHED_EVENTS = 6000
INPROCESS_EVENTS = 6000
SPOOL_EVENTS = 3000
BATCH = 500
FAST = {"drain_interval_s": None, "backoff_base_s": 0.01}


def body(doc: dict[str, Any], n: int) -> dict[str, Any]:
    return retrieval_body(doc, n, query="bench query", task="b", score="1.5")


def rate(count: int, seconds: float) -> float:
    return count / seconds


def through_client(backend: str, root: Path) -> dict[str, float]:
    config, schema = scratch_config(backend, root)
    server = ServerProcess(
        config.data_dir, server_env(config, TOKEN), log_path=root / f"{backend}.log"
    ).start()
    try:
        with Client(server.base_url, TOKEN, **FAST) as ledger:
            doc = ledger.ingest_document({"path": "bench.md", "text": DOC}).model_dump()
            for n in range(50):  # warm up connections and caches
                ledger.record_retrieval(body(doc, -n - 1))
            started = time.perf_counter()
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(lambda n: ledger.record_retrieval(body(doc, n)), range(SINGLE_EVENTS)))
            single = rate(SINGLE_EVENTS, time.perf_counter() - started)
            started = time.perf_counter()
            for start in range(0, BATCHED_EVENTS, BATCH):
                results = ledger.record_retrievals(
                    [body(doc, 10**6 + n) for n in range(start, start + BATCH)]
                )
                assert all(getattr(r, "error", None) is None for r in results)
            batched = rate(BATCHED_EVENTS, time.perf_counter() - started)
        spool_dir = root / f"spool-{backend}"
        nowhere = f"http://127.0.0.1:{free_port()}"
        with Client(nowhere, TOKEN, spool_dir=str(spool_dir), max_attempts=1, **FAST) as offline:
            started = time.perf_counter()
            for start in range(0, SPOOL_EVENTS, BATCH):
                offline.record_retrievals([body(doc, 2 * 10**6 + n) for n in range(start, start + BATCH)])
            spooled = rate(SPOOL_EVENTS, time.perf_counter() - started)
        with Client(server.base_url, TOKEN, spool_dir=str(spool_dir), **FAST) as back:
            report = back.flush_spool()
        assert report.pending == 0 and report.delivered == SPOOL_EVENTS, report
        drain = rate(SPOOL_EVENTS, report.seconds)
    finally:
        server.stop()
        drop_schema(schema)
    return {"single": single, "batched": batched, "spool_append": spooled, "drain": drain}


def in_process(backend: str, root: Path) -> float:
    config, schema = scratch_config(backend, root)
    ledger = Ledger(config)
    try:
        drafts = [retrieval_draft(ledger, f"q{n}") for n in range(INPROCESS_EVENTS)]
        started = time.perf_counter()
        for start in range(0, len(drafts), 100):
            ledger.append_batch(drafts[start : start + 100], tenant_id=TENANT)
        return rate(INPROCESS_EVENTS, time.perf_counter() - started)
    finally:
        ledger.close()
        drop_schema(schema)


def use_case(backend: str, root: Path) -> float:
    """`record_retrievals` called in-process on the services a server runs (group committer,
    projections in the write transaction, idempotency records), 500 items per call."""
    config, schema = scratch_config(backend, root)
    services, caller, document = services_with_document(config, TENANT, DOC)
    try:
        started = time.perf_counter()
        for start in range(0, BATCHED_EVENTS, BATCH):
            items = []
            for n in range(start, start + BATCH):
                retrieval = RetrievalIn.model_validate(body(document, n))
                key = IdempotencyKey(TENANT, uuid.uuid4().hex, uuid.uuid4().hex)
                items.append(BatchItem(key, retrieval))
            outcomes = record_retrievals(services.context, caller, items)
            assert all(outcome.error is None for outcome in outcomes)
        return rate(BATCHED_EVENTS, time.perf_counter() - started)
    finally:
        services.close()
        drop_schema(schema)


def measure() -> list[tuple[str, dict[str, float]]]:
    """Every figure, both stores, this process's code."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for backend in ("sqlite", "postgres"):
            figures = through_client(backend, root)
            figures["in_process"] = in_process(backend, root)
            figures["use_case"] = use_case(backend, root)
            rows.append((backend, figures))
            print(backend, {k: round(v) for k, v in figures.items()}, file=sys.stderr, flush=True)
    return rows


def _side(repo: Path | None) -> list[tuple[str, dict[str, float]]]:
    """`measure()` in a process of its own: this checkout's (`repo` None) or the base's."""
    env = dict(os.environ)
    python = sys.executable
    if repo is not None:
        env["CITELEDGER_BENCH_REPO"] = str(repo)
        python = str(repo / ".venv" / "bin" / "python")
    done = subprocess.run(
        [python, str(HERE), "--json"], env=env, check=True, capture_output=True, text=True, timeout=7200
    )
    return [(backend, figures) for backend, figures in json.loads(done.stdout.strip().splitlines()[-1])]


def _median(runs: list[list[tuple[str, dict[str, float]]]]) -> list[tuple[str, dict[str, float]]]:
    return [
        (backend, {key: statistics.median(run[i][1][key] for run in runs) for key in figures})
        for i, (backend, figures) in enumerate(runs[0])
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--json", action="store_true", help="one side only, its figures as one JSON line")
    parser.add_argument("--base-repo", type=Path, default=None, help="a worktree of the previous main")
    parser.add_argument("--rounds", type=int, default=1, help="with --base-repo: rounds, sides alternated")
    args = parser.parse_args()
    if args.json:
        print(json.dumps(measure()))
        return
    previous: dict[str, dict[str, float]] | None = None
    if args.base_repo is None:
        rows = measure()
    else:
        ours: list[list[tuple[str, dict[str, float]]]] = []
        theirs: list[list[tuple[str, dict[str, float]]]] = []
        for _ in range(args.rounds):
            ours.append(_side(None))
            theirs.append(_side(args.base_repo))
        rows = _median(ours)
        previous = dict(_median(theirs))
    lines = [
        "# Client benchmark",
        "",
        "`python scripts/bench_client.py` — one run, both stores, against a real `citeledger serve`",
        "(one worker) on loopback; 2 shared cores. Events are `RetrievalRecorded` with one cited chunk.",
        "",
        f"- one request per event: {SINGLE_EVENTS} x POST /v1/retrievals from 4 threads of one client;",
        f"- batched: {BATCHED_EVENTS} events through `Client.record_retrievals`, {BATCH} per request;",
        f"- in-process: `Ledger.append_batch`, 100 per transaction ({INPROCESS_EVENTS} events, "
        "as bench_ledger.py): drafts built and sealed before timing, no checks, no read models, "
        "no idempotency records;",
        f"- use case in-process: `record_retrievals` on the server's own services, {BATCH} per call "
        "(checks, sealing, read models and idempotency records in the write transaction: the "
        "batch request's work without HTTP, JSON and the client);",
        f"- spool: {SPOOL_EVENTS} events spooled with the ledger unreachable, then drained (batch endpoint).",
        "",
        "| store | one per request | batched | in-process batched | batched / one | target | "
        "batched / in-process | target | use case in-process | batched / use case | spool append | "
        "spool drain | drain / batched |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    if previous is not None:
        lines[2] = (
            f"`python scripts/bench_client.py --base-repo <worktree of main> --rounds {args.rounds}` — "
            "medians of the rounds, each side in its own process, alternated, both stores, "
            "against a real `citeledger serve`"
        )
    for backend, f in rows:
        one = f["batched"] / f["single"]
        inproc = f["batched"] / f["in_process"]
        lines.append(
            f"| {backend} | {f['single']:.0f}/s | {f['batched']:.0f}/s | {f['in_process']:.0f}/s | "
            f"{one:.1f}x | >= 5x {'met' if one >= 5 else 'missed'} | {inproc:.2f}x | "
            f">= 0.5x {'met' if inproc >= 0.5 else 'missed'} | {f['use_case']:.0f}/s | "
            f"{f['batched'] / f['use_case']:.2f}x | {f['spool_append']:.0f}/s | "
            f"{f['drain']:.0f}/s | {f['drain'] / f['batched']:.2f}x |"
        )
    if previous is not None:
        keys = ("single", "batched", "in_process", "use_case", "spool_append", "drain")
        lines += [
            "",
            f"vs previous main (this ÷ main, events/s; load average {os.getloadavg()[0]:.1f} at the end):",
            "",
            "| store | one per request | batched | in-process batched | use case in-process | spool append "
            "| spool drain |",
            "|---|---|---|---|---|---|---|",
        ]
        for backend, f in rows:
            ratios = " | ".join(f"{f[k] / previous[backend][k]:.2f}x" for k in keys)
            lines.append(f"| {backend} | {ratios} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
