"""PostgreSQL scale-out: the sequencer's critical section, and one worker against two (issue 28).

Each worker is a process with the services one API worker runs (`api.services.Services`: group
committer, write-side lookups, read models) on one shared PostgreSQL schema:

  - batched: `record_retrievals`, 500 items per call, one caller per worker;
  - single: `record_retrieval`, one item per call, 8 caller threads per worker (what concurrent
    single POSTs become: the group committer puts what arrives together in one commit).

The hold of the sequencer's advisory lock is measured per commit by the adapter
(`PostgresAdapter.sequencer_holds`): from the moment the server granted the lock (its
`clock_timestamp()`, selected with the lock) to the end of the sequencer's last statement (the
server's clock again, pipelined with it), plus, on the client's clock, everything from that
statement's results to the COMMIT's return. A transaction rolled back under the lock (another
worker moved the head; it signs again before the lock) is a hold too: counted apart
(`sequencer_rollbacks`; "rollbacks" per commit) and in the lock's busy share. A checkout
whose adapter selects no grant time (`--repo` of an older main) takes the lock at the start of
its append transaction: its hold is that transaction's duration.

    python scripts/bench_sequencer.py [--events 6000] [--repo DIR]
    python scripts/bench_sequencer.py --base-repo /work/wt/speed-base   # both, same run
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
BATCH = 500
SINGLE_THREADS = 8
SNIPPET = "Audit logs are kept for 180 days."
DOC = "# Retention\n\nAudit logs are kept for 180 days.\n\n## Backups\n\nBackups are kept for 35 days.\n"


def _body(doc: dict[str, Any], n: int) -> dict[str, Any]:
    chunk = doc["chunks"][0]["chunk_id"]
    entry = {"document_id": doc["document_id"], "chunk_id": chunk, "score": "2.5", "snippet": SNIPPET}
    return {
        "query": f"audit logs kept {n}",
        "engine": "external:bench",
        "task": {"task_id": f"t-{n}"},
        "selected_entries": [entry],
    }


def _timed_holds(adapter: Any) -> tuple[list[float], list[float]]:
    """Each commit's sequencer hold and each rolled-back one's, in seconds, recorded into the
    returned lists."""
    holds: list[float] = []
    rollbacks: list[float] = []
    if hasattr(adapter, "take_sequencer"):
        adapter.sequencer_holds = holds
        adapter.sequencer_rollbacks = rollbacks  # an older adapter ignores it: none counted
        return holds, rollbacks
    plain = adapter.append_transaction  # older code: the lock is the transaction's first statement

    @contextmanager
    def timed() -> Iterator[Any]:
        with plain() as cursor:
            started = time.perf_counter()
            yield cursor
        holds.append(time.perf_counter() - started)

    adapter.append_transaction = timed
    return holds, rollbacks


def _worker(*args: Any) -> None:
    """`_work`, its failure reported to the parent (which would otherwise wait for ever)."""
    barrier, out = args[-2], args[-1]
    try:
        _work(*args)
    except BaseException as exc:
        barrier.abort()
        out.put({"error": repr(exc)})
        raise


def _work(
    repo: str,
    url: str,
    data_dir: str,
    doc: dict[str, Any],
    mode: str,
    events: int,
    seed: int,
    barrier: Any,
    out: Any,
) -> None:
    """One worker process (the data directory, and with it the keys, is shared as API workers share it)."""
    sys.path.insert(0, repo)
    from api.config import ApiConfig
    from api.metrics import Metrics
    from api.services import Services
    from ledger.config import LedgerConfig
    from ledger.schemas.requests import RetrievalIn
    from ledger.usecases.context import Caller
    from ledger.usecases.retrievals import BatchItem, record_retrieval, record_retrievals
    from ledger.writing.idempotency import IdempotencyKey

    config = LedgerConfig(data_dir=Path(data_dir), database_url=url, run_checkpointer=False)
    services = Services(ApiConfig(ledger=config), Metrics())
    caller = Caller("t-acme", "bench", frozenset({"retrieval.write"}))
    bodies = [RetrievalIn.model_validate(_body(doc, seed + n)) for n in range(events)]
    holds, rollbacks = _timed_holds(services.ledger.store.adapter)
    barrier.wait()
    started = time.time()
    if mode == "batched":
        for start in range(0, events, BATCH):
            items = [
                BatchItem(IdempotencyKey("t-acme", uuid.uuid4().hex, uuid.uuid4().hex), b)
                for b in bodies[start : start + BATCH]
            ]
            outcomes = record_retrievals(services.context, caller, items)
            assert all(o.error is None for o in outcomes), outcomes[0].error
    else:
        # The request's key rides on its caller; an older checkout (`--repo`) took it as an argument.
        keyed_caller = "idempotency" in Caller.__dataclass_fields__

        def run(part: list[Any]) -> None:
            for b in part:
                key = IdempotencyKey("t-acme", uuid.uuid4().hex, uuid.uuid4().hex)
                if keyed_caller:
                    record_retrieval(services.context, replace(caller, idempotency=key), b)
                else:
                    record_retrieval(services.context, caller, b, key)  # type: ignore[call-arg]

        threads = [
            threading.Thread(target=run, args=(bodies[i::SINGLE_THREADS],)) for i in range(SINGLE_THREADS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finished = time.time()
    commits = services.committer.batches
    services.close()
    out.put(
        {
            "started": started,
            "finished": finished,
            "events": events,
            "holds": holds,
            "rollbacks": rollbacks,
            "commits": commits,
        }
    )


def _pg() -> tuple[str, str]:
    from tests.conftest import PG_DSN, pg_connect

    schema = "bench_seq_" + uuid.uuid4().hex[:10]
    with pg_connect() as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return schema, f"{PG_DSN}?schema={schema}"


def _drop(schema: str) -> None:
    from tests.conftest import pg_connect

    with pg_connect() as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def run(repo: str, mode: str, workers: int, events: int) -> dict[str, float]:
    """`workers` processes, `events` in all, on a fresh schema; events/s and hold figures."""
    from api.config import ApiConfig
    from api.metrics import Metrics
    from api.services import Services
    from ledger.config import LedgerConfig
    from ledger.schemas.requests import DocumentIn
    from ledger.usecases.context import Caller
    from ledger.usecases.documents import ingest_document

    schema, url = _pg()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            config = LedgerConfig(data_dir=Path(tmp) / "setup", database_url=url, run_checkpointer=False)
            services = Services(ApiConfig(ledger=config), Metrics())
            caller = Caller("t-acme", "bench", frozenset({"ingest.write"}))
            doc = ingest_document(
                services.context, services.claims, caller, DocumentIn(path="b.md", text=DOC)
            ).body
            services.close()
            context = mp.get_context("spawn")
            barrier, out = context.Barrier(workers), context.Queue()
            share = events // workers
            procs = [
                context.Process(
                    target=_worker,
                    args=(repo, url, str(config.data_dir), doc, mode, share, i * 10**7, barrier, out),
                )
                for i in range(workers)
            ]
            for proc in procs:
                proc.start()
            results = [out.get(timeout=1800) for _ in procs]
            failed = [r["error"] for r in results if "error" in r]
            if failed:
                raise RuntimeError(f"a worker failed: {failed[0]}")
            for proc in procs:
                proc.join()
    finally:
        _drop(schema)
    holds = [h for r in results for h in r["holds"]]
    rollbacks = [h for r in results for h in r["rollbacks"]]
    commits = sum(r["commits"] for r in results)
    wall = max(r["finished"] for r in results) - min(r["started"] for r in results)
    return {
        "per_s": sum(r["events"] for r in results) / wall,
        "hold_ms_median": statistics.median(holds) * 1e3,
        "hold_ms_p95": (statistics.quantiles(holds, n=20)[-1] if len(holds) > 1 else holds[0]) * 1e3,
        "entries_per_commit": sum(r["events"] for r in results) / max(commits, 1),
        "rolled_back": len(rollbacks) / max(commits, 1),
        "busy": (sum(holds) + sum(rollbacks)) / wall,
    }


def measure(repo: str, events: int) -> dict[str, dict[str, float]]:
    figures = {}
    for mode in ("batched", "single"):
        count = events if mode == "batched" else events // 4
        for workers in (1, 2):
            figures[f"{mode}/{workers}"] = run(repo, mode, workers, count)
    return figures


def _side(repo: Path, events: int) -> dict[str, dict[str, float]]:
    command = [sys.executable, str(HERE), "--json", "--repo", str(repo), "--events", str(events)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=7200, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{repo}: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def table(sides: dict[str, dict[str, dict[str, float]]]) -> str:
    names = list(sides)
    lines = [
        "| path | workers | "
        + " | ".join(
            f"{n}: events/s | {n}: hold median (p95) ms | {n}: entries/commit | {n}: rollbacks"
            f" | {n}: lock busy"
            for n in names
        )
        + " |",
        "|---|---|" + "---|---|---|---|---|" * len(names),
    ]
    for key in sides[names[0]]:
        mode, workers = key.split("/")
        cells = []
        for n in names:
            f = sides[n][key]
            cells.append(
                f"{f['per_s']:.0f} | {f['hold_ms_median']:.2f} ({f['hold_ms_p95']:.2f}) | "
                f"{f['entries_per_commit']:.1f} | {f.get('rolled_back', 0):.2f} | {f['busy']:.0%}"
            )
        lines.append(f"| {mode} | {workers} | " + " | ".join(cells) + " |")
    for mode in ("batched", "single"):
        ratios = ", ".join(
            f"{n} {sides[n][f'{mode}/2']['per_s'] / sides[n][f'{mode}/1']['per_s']:.2f}×" for n in names
        )
        lines.append(f"\n{mode}: two workers ÷ one: {ratios}")
    return "\n".join(lines)


INSERT_FORMS = {
    "multi-row VALUES, binary parameters": "values",
    "binary COPY": "copy_binary",
    "text COPY": "copy_text",
}
TOAST_SETTINGS = {
    "default (pglz)": "",
    "lz4 (SET LOCAL default_toast_compression)": "SET LOCAL default_toast_compression = lz4",
    "toast_tuple_target = 8160 (a storage change)": "ALTER TABLE {t} SET (toast_tuple_target = 8160)",
}


def _insert_once(conn: Any, table: str, form: str, rows: list[tuple[Any, ...]], setting: str) -> float:
    """One insert of `rows` into `table` as `form`, in a transaction rolled back; seconds."""
    columns = "originator_id, originator_version, topic, state"
    with conn.transaction(force_rollback=True), conn.cursor() as cur:
        if setting:
            cur.execute(setting.format(t=table))
        started = time.perf_counter()
        if form == "values":
            cur.execute(
                f"INSERT INTO {table} ({columns}) VALUES {', '.join(['(%s, %s, %s, %s)'] * len(rows))} "
                "RETURNING notification_id",
                [value for row in rows for value in row],
                binary=True,
            )
            cur.fetchall()
        else:
            binary = form == "copy_binary"
            with cur.copy(
                f"COPY {table} ({columns}) FROM STDIN{' (FORMAT BINARY)' if binary else ''}"
            ) as copy:
                if binary:
                    copy.set_types(["uuid", "int8", "text", "bytea"])
                for row in rows:
                    copy.write_row(row)
        return time.perf_counter() - started


def insert_forms(repo: str, repeats: int = 10) -> str:
    """The insert under the sequencer alone: 500 real log rows into a copy of the events table
    (its indexes included), each form under each TOAST setting; median ms of `repeats`."""
    import psycopg

    schema, url = _pg()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            from api.config import ApiConfig
            from api.metrics import Metrics
            from api.services import Services
            from ledger.config import LedgerConfig
            from ledger.schemas.requests import DocumentIn, RetrievalIn
            from ledger.usecases.context import Caller
            from ledger.usecases.documents import ingest_document
            from ledger.usecases.retrievals import BatchItem, record_retrievals
            from ledger.writing.idempotency import IdempotencyKey

            config = LedgerConfig(data_dir=Path(tmp), database_url=url, run_checkpointer=False)
            services = Services(ApiConfig(ledger=config), Metrics())
            ingest = Caller("t-acme", "bench", frozenset({"ingest.write"}))
            doc = ingest_document(
                services.context, services.claims, ingest, DocumentIn(path="b.md", text=DOC)
            ).body
            items = [
                BatchItem(
                    IdempotencyKey("t-acme", uuid.uuid4().hex, uuid.uuid4().hex),
                    RetrievalIn.model_validate(_body(doc, n)),
                )
                for n in range(BATCH)
            ]
            record_retrievals(
                services.context, Caller("t-acme", "bench", frozenset({"retrieval.write"})), items
            )
            events = services.ledger.store.adapter.table(services.ledger.store.adapter.events_table)
            services.close()
        from tests.conftest import PG_DSN

        with psycopg.connect(PG_DSN) as conn:
            conn.autocommit = True
            last = f"ORDER BY notification_id DESC LIMIT {BATCH}"
            source = conn.execute(f"SELECT originator_version, topic, state FROM {events} {last}").fetchall()
            table = f'"{schema}".scratch_events'
            conn.execute(f"CREATE TABLE {table} (LIKE {events} INCLUDING ALL)")
            lines = [
                "| insert form | " + " | ".join(TOAST_SETTINGS) + " |",
                "|---|" + "---|" * len(TOAST_SETTINGS),
            ]
            for label, form in INSERT_FORMS.items():
                cells = []
                for setting in TOAST_SETTINGS.values():
                    times = []
                    for _ in range(repeats):
                        rows = [
                            (uuid.uuid4(), version, topic, bytes(state)) for version, topic, state in source
                        ]
                        times.append(_insert_once(conn, table, form, rows, setting))
                    cells.append(f"{statistics.median(times) * 1e3:.2f}")
                lines.append(f"| {label} | " + " | ".join(cells) + " |")
    finally:
        _drop(schema)
    mean = statistics.mean(len(state) for _, _, state in source)
    return "\n".join(lines) + f"\n\n{len(source)} rows, {mean:.0f} B of entry each; median ms of {repeats}."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--events", type=int, default=6000, help="batched events per run (single: a quarter)")
    parser.add_argument("--repo", type=Path, default=HERE.parents[1])
    parser.add_argument("--base-repo", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--insert-forms", action="store_true", help="time the log insert's forms alone")
    args = parser.parse_args()
    sys.path.insert(0, str(args.repo.resolve()))
    if args.insert_forms:
        print(insert_forms(str(args.repo.resolve())))
        return
    if args.json:
        print(json.dumps(measure(str(args.repo.resolve()), args.events)))
        return
    sides = {"this branch": _side(args.repo, args.events)}
    if args.base_repo is not None:
        sides["main"] = _side(args.base_repo, args.events)
    print(table(sides))


if __name__ == "__main__":
    main()
