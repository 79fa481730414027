"""Question text search (`q`) on SQLite: query latency at 10k, 100k and 1M receipts, and what
keeping the question index costs the write path.

    python scripts/bench_find.py [--sizes 10000,100000,1000000] [--queries 200] [--writes 300]
        [--rounds 5] [--batch 100] [--caches default,cache64m,mmap256m]

Queries: a ledger made by this code (tables, keys), then filled in bulk: receipt-index rows
and posting rows inserted directly (building 1M real receipts through the write path takes
hours on this machine), the words hashed with the ledger's own per-tenant key. Questions are
4-10 words drawn from a 20,000-word vocabulary with Zipf-Mandelbrot frequencies (rank r weighs
1/(r+10): the head of a plain Zipf curve is the stopwords, which are never indexed), so the
most common word is in about 6% of the questions; searches take 1, 2
or 3 words of a random stored question (so each finds at least that receipt) and read the
first page (50, newest first) through `ReadModels.receipts`, as `GET /v1/receipts?q=` does.
Each search's wall time and its thread's CPU time are both reported: on a machine shared by
other work, wall-time percentiles measure the scheduler as much as the query. `--caches`: the
SQLite page-cache settings compared (`CACHE_SETTINGS`, set on every connection the store
opens), each in turn on the same ledger with the same searches, in alternating rounds, each
round after a warm-up on a fresh connection.

Write path: thread CPU per recorded retrieval (the use case, the embedded read models applied
in its transaction, the command line's writer: all in this thread) on fresh SQLite ledgers with
and without the question index among their read models, one at a time (`record_retrieval`) and
in batches (`record_retrievals`), the two ledgers interleaved a call at a time (which goes first
alternates); the median of the rounds.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from eventsourcing.sqlite import SQLiteConnection, SQLiteConnectionPool

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ledger.config import LedgerConfig  # noqa: E402
from ledger.retrieval.question_words import question_words  # noqa: E402
from ledger.storage.store import LEDGER_STREAM_ID, Store  # noqa: E402
from ledger.usecases.ports import ReceiptFilter  # noqa: E402
from ledger.writing.application import Ledger  # noqa: E402
from projections import runner as runner_module  # noqa: E402
from projections.catalog import default_projections  # noqa: E402
from projections.queries import ReadModels  # noqa: E402
from projections.question_index import (  # noqa: E402
    QUESTION_WORDS_TABLE,
    QuestionIndexProjection,
    question_keys,
)
from projections.receipt_index import RECEIPTS_TABLE  # noqa: E402

TENANT = "acme"
VOCABULARY = 20_000
MANDELBROT_Q = 10  # Zipf-Mandelbrot: rank r weighs 1/(r+q)
PAGE = 50
WARM_UP = 30  # searches before a round's timed ones, on its fresh connection
# The page-cache settings compared: PRAGMAs run on each new connection of the store.
CACHE_SETTINGS: dict[str, tuple[str, ...]] = {
    "default": (),  # SQLite's: a 2 MB page cache, no memory map
    "cache64m": ("PRAGMA cache_size=-65536",),  # 64 MiB of private page cache per connection
    "mmap256m": ("PRAGMA mmap_size=268435456",),  # the first 256 MiB mapped (the OS's page cache)
    "mmap1g": ("PRAGMA mmap_size=1073741824",),
}
_pragmas: tuple[str, ...] = ()
_create_connection = SQLiteConnectionPool._create_connection


def _tuned_connection(pool: SQLiteConnectionPool) -> SQLiteConnection:
    connection = _create_connection(pool)
    for pragma in _pragmas:
        connection.cursor().execute(pragma)
    return connection


setattr(SQLiteConnectionPool, "_create_connection", _tuned_connection)  # noqa: B010 - the bench's own pragmas


def _vocabulary(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < VOCABULARY:
        word = "".join(rng.choice(letters) for _ in range(rng.randint(5, 9)))
        if question_words(word) == [word]:  # a word the tokenizer keeps as it is (no stem, no stopword)
            words.add(word)
    return sorted(words)


def _questions(n: int, seed: int) -> np.ndarray[Any, Any]:
    """n questions as rows of word ids (-1 pads), 4-10 words each (repeats indexed once)."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / (np.arange(1, VOCABULARY + 1) + MANDELBROT_Q)
    weights /= weights.sum()
    drawn = rng.choice(VOCABULARY, size=(n, 10), p=weights)
    lengths = rng.integers(4, 11, size=n)
    drawn[np.arange(10)[None, :] >= lengths[:, None]] = -1
    return drawn


def _fill(ledger: Ledger, questions: np.ndarray[Any, Any], hashes: list[int]) -> None:
    """Receipt rows and posting rows, inserted directly and sorted by key (a bulk load)."""
    path = ledger.config.sqlite_path
    ledger.close()
    n = len(questions)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA synchronous=OFF")
    with conn:
        conn.executemany(
            f"INSERT INTO {RECEIPTS_TABLE} (tenant_id, receipt_id, position, event_id, recorded_at, actor, "
            "engine, mode, status, context_hash, citation_count, document_ids, parts, kid, signature) "
            "VALUES (?, ?, ?, ?, ?, 'bench', 'external:bench', 'live', 'ok', 'h', 0, ' ', 1, 'k', 's')",
            ((TENANT, f"r{p}", p, f"e{p}", "2026-01-01T00:00:00.000000Z") for p in range(1, n + 1)),
        )
        # The index refers to log entries (a page's payloads are read from the log): unsigned
        # stand-ins at the rows' positions, so this store is read through `Store`, never a
        # `Ledger` (which would check them). The entries `Ledger` made at init stay.
        entry = orjson.dumps({"payload": {"selected_entries": []}, "tenant_id": TENANT, "type": "x"})
        conn.executemany(
            "INSERT OR IGNORE INTO stored_events (originator_id, originator_version, topic, state) "
            "VALUES (?, ?, 'citeledger:event:RetrievalRecorded', ?)",
            ((LEDGER_STREAM_ID.hex, p, entry) for p in range(1, n + 1)),
        )
    positions = np.repeat(np.arange(1, n + 1), questions.shape[1])
    ids = questions.reshape(-1)
    keep = ids >= 0
    pairs = np.unique(np.stack([ids[keep], positions[keep]], axis=1), axis=0)
    word_hash = np.array(hashes, dtype=np.int64)[pairs[:, 0]]
    order = np.lexsort((pairs[:, 1], word_hash))
    with conn:
        conn.executemany(
            f"INSERT INTO {QUESTION_WORDS_TABLE} (word_tenant_id, word_hash, receipt_position) "
            "VALUES (?, ?, ?)",
            ((TENANT, int(word_hash[i]), int(pairs[i, 1])) for i in order),
        )
    conn.execute("ANALYZE")
    conn.close()


Timings = dict[tuple[str, int], tuple[list[float], list[float]]]  # (setting, words) -> wall, CPU


def _query_bench(size: int, queries: int, rounds: int, caches: list[str], work: Path) -> Timings:
    global _pragmas
    rng = random.Random(size)
    words = _vocabulary(rng)
    data = work / f"q{size}"
    filled = data / "bench-filled"  # a ledger kept by `--work` is filled once (same seed, same rows)
    ledger: Ledger | Store = (
        Store(LedgerConfig(data_dir=data)) if filled.exists() else Ledger(LedgerConfig(data_dir=data))
    )
    store = ledger if isinstance(ledger, Store) else ledger.store
    runner_module.ProjectionRunner(store)  # the read models' tables, as the server makes them
    keys = question_keys(store)
    hashes = [keys.word_hash(TENANT, w) for w in words]
    questions = _questions(size, seed=size)
    if isinstance(ledger, Store):
        ledger.close()
    else:
        started = time.perf_counter()
        _fill(ledger, questions, hashes)
        filled.touch()
        print(f"  {size:>9,} receipts filled in {time.perf_counter() - started:.0f} s", flush=True)
    timings: Timings = {(cache, n): ([], []) for cache in caches for n in (1, 2, 3)}
    per_round = max(1, queries // rounds)
    for round_ in range(rounds):
        # The same searches for every setting in a round.
        searches = random.Random(size * 1000 + round_)
        plan = []
        for _ in range(WARM_UP + per_round):
            for count in (1, 2, 3):
                row = [w for w in questions[searches.randrange(size)] if w >= 0]
                plan.append((count, " ".join(words[w] for w in searches.sample(row, count))))
        order = caches if round_ % 2 == 0 else caches[::-1]
        for cache in order:
            _pragmas = CACHE_SETTINGS[cache]
            store = Store(LedgerConfig(data_dir=data))
            models = ReadModels(store)
            for index, (count, q) in enumerate(plan):
                started, cpu = time.perf_counter(), time.thread_time()
                page = models.receipts(TENANT, ReceiptFilter(q=q), limit=PAGE, order="desc")
                wall_ms, cpu_ms = (time.perf_counter() - started) * 1000, (time.thread_time() - cpu) * 1000
                assert page.items, q
                if index >= WARM_UP * 3:
                    timings[(cache, count)][0].append(wall_ms)
                    timings[(cache, count)][1].append(cpu_ms)
            store.close()
    _pragmas = ()
    return timings


# (single | batched, with | without | apply) -> CPU ms per retrieval; "apply": the index's own
# `apply` (thread CPU inside it) on the ledger with the index.
WriteCosts = dict[tuple[str, str], float]


def _write_cpu(writes: int, rounds: int, batch: int, work: Path) -> WriteCosts:
    """Thread CPU ms per recorded retrieval, median of the rounds, for each (path, index)."""
    from tests.factories import UseCases

    def without_index() -> list[Any]:
        return [p for p in default_projections() if p.name != "question_index"]

    setups: dict[tuple[str, str], Any] = {}
    for path in ("single", "batched"):
        for name, catalog in (("with", default_projections), ("without", without_index)):
            setattr(runner_module, "default_projections", catalog)  # noqa: B010 - the runner's catalogue here
            ledger = Ledger(LedgerConfig(data_dir=work / f"w-{path}-{name}"))
            cases = UseCases(ledger)
            text = "Parental leave is twelve weeks. Audit logs are kept 180 days."
            setups[(path, name)] = (cases, cases.ingest(text))
    setattr(runner_module, "default_projections", default_projections)  # noqa: B010
    rng = random.Random(7)
    vocabulary = _vocabulary(rng)
    spent: dict[tuple[str, str], list[float]] = {
        key: [] for key in [*setups, ("single", "apply"), ("batched", "apply")]
    }
    in_apply = [0.0]
    apply = QuestionIndexProjection.apply

    def timed_apply(self: QuestionIndexProjection, cursor: Any, store: Any, events: Any) -> None:
        cpu = time.thread_time()
        try:
            apply(self, cursor, store, events)
        finally:
            in_apply[0] += time.thread_time() - cpu

    setattr(QuestionIndexProjection, "apply", timed_apply)  # noqa: B010 - timed here only
    for round_ in range(rounds):
        # Interleaved a call at a time (a retrieval, or a batch): a change of load on the shared
        # machine falls on both sides of a pair alike.
        used = dict.fromkeys(setups, 0.0)
        for path, size in (("single", 1), ("batched", batch)):
            in_apply[0] = 0.0
            pair = [(path, "with"), (path, "without")]
            for start in range(0, writes, size):
                count = min(size, writes - start)
                questions = ["how " + " ".join(rng.sample(vocabulary, 8)) + "?" for _ in range(count)]
                for key in pair if (round_ + start // size) % 2 == 0 else pair[::-1]:
                    cases, doc = setups[key]
                    cpu = time.thread_time()
                    if path == "single":
                        cases.retrieve(doc, questions[0])
                    else:
                        cases.retrieve_batch(doc, questions)
                    used[key] += time.thread_time() - cpu
            used[(path, "apply")] = in_apply[0]
        for key, seconds in used.items():
            spent[key].append(seconds * 1000 / writes)
    setattr(QuestionIndexProjection, "apply", apply)  # noqa: B010
    return {key: statistics.median(values) for key, values in spent.items()}


def _p(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000,1000000", help="'' for no query bench")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--writes", type=int, default=200, help="per round and path; 0: no write bench")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=100, help="retrievals per record_retrievals call")
    parser.add_argument("--caches", default="default", help=f"of {', '.join(CACHE_SETTINGS)}")
    parser.add_argument("--work", type=Path, help="keep the filled query ledgers here, reuse them")
    args = parser.parse_args()
    caches = args.caches.split(",")
    with tempfile.TemporaryDirectory(prefix="bench-find-") as tmp:
        work = Path(tmp)
        query_work = args.work or work
        sizes = [int(s) for s in args.sizes.split(",") if s]
        if sizes:
            print(
                "| receipts | page cache | words | wall p50 ms | wall p95 ms | CPU p50 ms | CPU p95 ms "
                "| CPU max ms |\n| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
            )
        for size in sizes:
            timings = _query_bench(size, args.queries, args.rounds, caches, query_work)
            for (cache, count), (wall, cpu) in sorted(timings.items(), key=lambda item: item[0][1]):
                print(
                    f"| {size:,} | {cache} | {count} | {_p(wall, 50):.1f} | {_p(wall, 95):.1f} "
                    f"| {_p(cpu, 50):.1f} | {_p(cpu, 95):.1f} | {max(cpu):.1f} |",
                    flush=True,
                )
        if args.writes:
            costs = _write_cpu(args.writes, args.rounds, args.batch, work)
            print(
                "\n| path | CPU ms with the index | without | ratio | in the index's apply µs | share |"
                "\n| --- | ---: | ---: | ---: | ---: | ---: |"
            )
            for path in ("single", "batched"):
                with_index, without = costs[(path, "with")], costs[(path, "without")]
                applied = costs[(path, "apply")]
                print(
                    f"| {path} | {with_index:.3f} | {without:.3f} | x{with_index / without:.3f} "
                    f"| {applied * 1000:.0f} | {applied / with_index:.1%} |"
                )


if __name__ == "__main__":
    main()
