"""The write core against its floor, in one process and one run (issue 28).

The floor is what one recorded retrieval cannot avoid: one Ed25519 signature of a 1 KB
message, two AES-GCM seals, one SHA-256, one small orjson dump, and one 1.5 KB SQLite row in
WAL mode with `synchronous=FULL`, 500 rows per commit. Measured in the same process, right
before and after:

  - the bare signed append: `Ledger.append_batch`, 500 drafts per call (drafts built and
    sealed before the clock starts; no checks, no read models, no idempotency records);
  - the batched use case: `record_retrievals` on the services a server runs (group committer,
    read models, idempotency records), 500 items per call;
  - the single use case: `record_retrieval`, one item per call and per commit, one call after
    another (what one `POST /v1/retrievals` at a time costs the server, without HTTP).

CPU per event is the process's CPU time (every thread: the group committer's too) divided by
the events; rounds alternate floor and paths and the median round is quoted.

    python scripts/bench_floor.py [--backend sqlite|postgres] [--events 5000] [--rounds 3]
    python scripts/bench_floor.py --base-repo /work/wt/speed-base   # also main's code, same run
    python scripts/bench_floor.py --json --repo DIR                   # one side (used for the base)
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import hashlib
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

# _support imports the product inside its functions: the code of `--repo` is what runs.
from _support import drop_schema, retrieval_body, scratch_config, services_with_document

HERE = Path(__file__).resolve()
BATCH = 500


def _floor_ops(root: Path, count: int) -> dict[str, float]:
    """µs of CPU per event of each floor operation, `count` times each."""
    import orjson
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    key = Ed25519PrivateKey.generate()
    message = os.urandom(1024)
    aead = AESGCM(AESGCM.generate_key(bit_length=256))
    plain = b"Audit logs are kept for 180 days. how long are audit logs kept"
    small = {"receipt_id": uuid.uuid4().hex, "status": "ok", "position": 12345, "dedup": False}
    row = os.urandom(1536)

    def sign() -> None:
        for _ in range(count):
            key.sign(message)

    def seal() -> None:
        for _ in range(count):
            aead.encrypt(os.urandom(12), plain, None)
            aead.encrypt(os.urandom(12), plain, None)

    def sha() -> None:
        for _ in range(count):
            hashlib.sha256(message).digest()

    def dump() -> None:
        for _ in range(count):
            orjson.dumps(small)

    database = root / f"floor-{uuid.uuid4().hex[:8]}.sqlite"
    conn = sqlite3.connect(database, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, version INTEGER UNIQUE, state BLOB)")
    version = 0

    def insert() -> None:
        nonlocal version
        for start in range(0, count, BATCH):
            rows = []
            for _ in range(min(BATCH, count - start)):
                version += 1
                rows.append((version, row))
            conn.execute("BEGIN")
            conn.executemany("INSERT INTO rows (version, state) VALUES (?, ?)", rows)
            conn.execute("COMMIT")

    parts: dict[str, Callable[[], None]] = {
        "ed25519_sign_1k": sign,
        "aes_gcm_seal_x2": seal,
        "sha256": sha,
        "orjson_dump": dump,
        "sqlite_row_full_sync": insert,
    }
    figures = {name: _cpu_us(fn, count) for name, fn in parts.items()}
    conn.close()
    figures["floor"] = sum(figures.values())
    return figures


def _cpu_us(fn: Callable[[], Any], count: int) -> float:
    started = time.process_time()
    fn()
    return (time.process_time() - started) * 1e6 / count


def _bare_append(backend: str, root: Path, count: int) -> tuple[float, float]:
    """(µs CPU per event, events/s wall) of `Ledger.append_batch`, 500 per call."""
    from ledger.writing.application import Ledger
    from tests.factories import TENANT, retrieval_draft

    config, schema = scratch_config(backend, root, "bench_floor_")
    ledger = Ledger(config)
    try:
        drafts = [retrieval_draft(ledger, f"how long are audit logs kept {n}") for n in range(count)]
        cpu, wall = time.process_time(), time.perf_counter()
        for start in range(0, count, BATCH):
            ledger.append_batch(drafts[start : start + BATCH], tenant_id=TENANT)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        assert ledger.size >= count
        return cpu * 1e6 / count, count / wall
    finally:
        ledger.close()
        drop_schema(schema)


def _use_case(backend: str, root: Path, count: int) -> tuple[float, float, float]:
    """(µs CPU per event, events/s wall, µs of garbage collection per event) of
    `record_retrievals`, 500 items per call, on the services one server process runs; items
    are validated request bodies, as the route hands them over, built before the clock
    starts, one batch at a time (as a server holds one request's)."""
    from ledger.schemas.requests import RetrievalIn
    from ledger.usecases.retrievals import BatchItem, record_retrievals
    from ledger.writing.idempotency import IdempotencyKey
    from tests.factories import TENANT

    config, schema = scratch_config(backend, root, "bench_floor_")
    services, caller, doc = services_with_document(config, TENANT)
    try:

        def batch(start: int) -> list[Any]:
            items = []
            for n in range(start, min(count, start + BATCH)):
                body = RetrievalIn.model_validate(retrieval_body(doc, n))
                items.append(BatchItem(IdempotencyKey(TENANT, uuid.uuid4().hex, uuid.uuid4().hex), body))
            return items

        cpu_total = wall_total = 0.0
        collecting: list[float] = []
        in_gc = [0.0]
        clocked = [False]  # collections while the items are built are not the use case's

        def timed_gc(phase: str, _info: dict[str, Any]) -> None:
            if phase == "start":
                in_gc[0] = time.perf_counter()
            elif clocked[0]:
                collecting.append(time.perf_counter() - in_gc[0])

        gc.callbacks.append(timed_gc)
        try:
            for start in range(0, count, BATCH):
                items = batch(start)
                clocked[0] = True
                cpu, wall = time.process_time(), time.perf_counter()
                outcomes = record_retrievals(services.context, caller, items)
                clocked[0] = False
                cpu_total += time.process_time() - cpu
                wall_total += time.perf_counter() - wall
                assert all(outcome.error is None for outcome in outcomes), outcomes[0]
        finally:
            gc.callbacks.remove(timed_gc)
        return cpu_total * 1e6 / count, count / wall_total, sum(collecting) * 1e6 / count
    finally:
        services.close()
        drop_schema(schema)


def _single(backend: str, root: Path, count: int) -> tuple[float, float]:
    """(µs CPU per event, events/s wall) of `record_retrieval`, one item per call, one call
    after another, on the services one server process runs (each call its own commit)."""
    from ledger.schemas.requests import RetrievalIn
    from ledger.usecases.retrievals import record_retrieval
    from ledger.writing.idempotency import IdempotencyKey
    from tests.factories import TENANT

    config, schema = scratch_config(backend, root, "bench_floor_")
    services, caller, doc = services_with_document(config, TENANT)
    try:
        bodies = [RetrievalIn.model_validate(retrieval_body(doc, n)) for n in range(count)]
        keys = [IdempotencyKey(TENANT, uuid.uuid4().hex, uuid.uuid4().hex) for _ in range(count)]
        cpu, wall = time.process_time(), time.perf_counter()
        for body, key in zip(bodies, keys, strict=True):
            # The key rides on the caller, as a keyed POST's does (`Caller.idempotency`).
            record_retrieval(services.context, dataclasses.replace(caller, idempotency=key), body)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        return cpu * 1e6 / count, count / wall
    finally:
        services.close()
        drop_schema(schema)


def measure(backend: str, events: int, rounds: int) -> dict[str, float]:
    """Median over `rounds` of floor, bare append and use case, alternated in this process."""
    samples: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _use_case(backend, root, BATCH)  # warm imports and caches
        for _ in range(rounds):
            figures = _floor_ops(root, events)
            figures["append_us"], figures["append_per_s"] = _bare_append(backend, root, events)
            figures["use_case_us"], figures["use_case_per_s"], figures["use_case_gc_us"] = _use_case(
                backend, root, events
            )
            figures["single_us"], figures["single_per_s"] = _single(backend, root, max(1, events // 10))
            for name, value in figures.items():
                samples.setdefault(name, []).append(value)
    result = {name: statistics.median(values) for name, values in samples.items()}
    result["append_x_floor"] = result["append_us"] / result["floor"]
    result["use_case_x_floor"] = result["use_case_us"] / result["floor"]
    result["use_case_x_append"] = result["append_us"] / result["use_case_us"]
    result["single_x_floor"] = result["single_us"] / result["floor"]
    return result


def _other_side(repo: Path, args: argparse.Namespace) -> dict[str, float]:
    """The same measurement with another checkout's code, in its own process."""
    command = [
        sys.executable,
        str(HERE),
        "--json",
        "--repo",
        str(repo),
        "--backend",
        args.backend,
        "--events",
        str(args.events),
        "--rounds",
        "1",
    ]
    done = subprocess.run(command, check=True, capture_output=True, text=True, timeout=3600)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


FLOOR_PARTS = ("ed25519_sign_1k", "aes_gcm_seal_x2", "sha256", "orjson_dump", "sqlite_row_full_sync")


def table(new: dict[str, float], base: dict[str, float] | None) -> str:
    head = "| figure | this branch |" + (" main | this ÷ main |" if base else "")
    lines = [head, "|---|---|" + ("---|---|" if base else "")]

    rows = [(f"floor: {part} (µs CPU/event)", part) for part in FLOOR_PARTS] + TABLE_ROWS
    for label, key in rows:
        # Ratios to two places, rates whole, CPU per event to a tenth.
        fmt = ".2f" if "_x_" in key else ".0f" if key.endswith("_per_s") else ".1f"
        line = f"| {label} | {format(new[key], fmt)} |"
        if base:
            line += f" {format(base[key], fmt)} | {new[key] / base[key]:.2f}× |"
        lines.append(line)
    return "\n".join(lines)


# The table's rows after the floor's parts: (label, figure).
TABLE_ROWS = [
    ("**floor** (µs CPU/event)", "floor"),
    ("bare signed append, 500/call (µs CPU/event)", "append_us"),
    ("`record_retrievals`, 500/call (µs CPU/event)", "use_case_us"),
    ("… of which garbage collection (µs/event, wall)", "use_case_gc_us"),
    ("`record_retrieval`, 1/call, one commit each (µs CPU/event; events ÷ 10)", "single_us"),
    ("bare append ÷ floor", "append_x_floor"),
    ("**use case ÷ floor** (target ≤ 3)", "use_case_x_floor"),
    ("**use case throughput ÷ bare append** (target ≥ 0.7)", "use_case_x_append"),
    ("single use case ÷ floor", "single_x_floor"),
    ("bare append (events/s wall)", "append_per_s"),
    ("use case (events/s wall)", "use_case_per_s"),
    ("single use case (events/s wall)", "single_per_s"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repo", type=Path, default=HERE.parents[1], help="checkout whose code runs")
    parser.add_argument("--base-repo", type=Path, default=None, help="a checkout of the base (main)")
    parser.add_argument("--json", action="store_true", help="print one JSON line (one side only)")
    args = parser.parse_args()
    sys.path.insert(0, str(args.repo.resolve()))
    if args.json:
        print(json.dumps(measure(args.backend, args.events, args.rounds)))
        return
    if args.base_repo is None:
        print(table(measure(args.backend, args.events, args.rounds), None))
        return
    # Alternate this branch and the base, one round each, each in its own process.
    news, bases = [], []
    for _ in range(args.rounds):
        news.append(_other_side(args.repo, args))
        bases.append(_other_side(args.base_repo, args))
    new = {k: statistics.median(r[k] for r in news) for k in news[0]}
    base = {k: statistics.median(r[k] for r in bases) for k in bases[0]}
    print(
        f"backend {args.backend}, {args.events} events per path per round ({args.events // 10} single), "
        f"{args.rounds} rounds, load average {os.getloadavg()[0]:.1f} at the end"
    )
    print(table(new, base))


if __name__ == "__main__":
    main()
