"""Question text search (`q`) on SQLite: query latency at 10k, 100k and 1M receipts, and what
keeping the question index costs the write path.

    python scripts/bench_find.py [--sizes 10000,100000,1000000] [--queries 200] [--writes 300]

Queries: a ledger made by this code (tables, keys), then filled in bulk: receipt-index rows
and posting rows inserted directly (building 1M real receipts through the write path takes
hours on this machine), the words hashed with the ledger's own per-tenant key. Questions are
4-10 words drawn from a 20,000-word vocabulary with Zipf-Mandelbrot frequencies (rank r weighs
1/(r+10): the head of a plain Zipf curve is the stopwords, which are never indexed), so the
most common word is in about 6% of the questions; searches take 1, 2
or 3 words of a random stored question (so each finds at least that receipt) and read the
first page (50, newest first) through `ReadModels.receipts`, as `GET /v1/receipts?q=` does.
Each search's wall time and its thread's CPU time are both reported: on a machine shared by
other work, wall-time percentiles measure the scheduler as much as the query.

Write path: process CPU per `record_retrieval` (the use case, the embedded read models
applied in its transaction) on two fresh SQLite ledgers, one with the question index among
its read models and one without, in alternating rounds.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ledger.config import LedgerConfig  # noqa: E402
from ledger.retrieval.question_words import question_words  # noqa: E402
from ledger.usecases.ports import ReceiptFilter  # noqa: E402
from ledger.writing.application import Ledger  # noqa: E402
from projections import runner as runner_module  # noqa: E402
from projections.catalog import default_projections  # noqa: E402
from projections.queries import ReadModels  # noqa: E402
from projections.question_index import QUESTION_WORDS_TABLE, question_keys  # noqa: E402
from projections.receipt_index import RECEIPTS_TABLE  # noqa: E402

TENANT = "acme"
VOCABULARY = 20_000
MANDELBROT_Q = 10  # Zipf-Mandelbrot: rank r weighs 1/(r+q)
PAGE = 50


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
    body = '{"selected_entries":[]}'
    with conn:
        conn.executemany(
            f"INSERT INTO {RECEIPTS_TABLE} (tenant_id, receipt_id, position, event_id, recorded_at, actor, "
            "engine, mode, status, context_hash, citation_count, body, kid, signature) "
            "VALUES (?, ?, ?, ?, ?, 'bench', 'external:bench', 'live', 'ok', 'h', 0, ?, 'k', 's')",
            ((TENANT, f"r{p}", p, f"e{p}", "2026-01-01T00:00:00.000000Z", body) for p in range(1, n + 1)),
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


def _query_bench(size: int, queries: int, work: Path) -> dict[int, tuple[list[float], list[float]]]:
    rng = random.Random(size)
    words = _vocabulary(rng)
    data = work / f"q{size}"
    ledger = Ledger(LedgerConfig(data_dir=data))
    runner_module.ProjectionRunner(ledger.store)  # the read models' tables, as the server makes them
    keys = question_keys(ledger.store)
    hashes = [keys.word_hash(TENANT, w) for w in words]
    questions = _questions(size, seed=size)
    started = time.perf_counter()
    _fill(ledger, questions, hashes)
    print(f"  {size:>9,} receipts filled in {time.perf_counter() - started:.0f} s", flush=True)
    ledger = Ledger(LedgerConfig(data_dir=data))
    models = ReadModels(ledger.store)
    timings: dict[int, tuple[list[float], list[float]]] = {n: ([], []) for n in (1, 2, 3)}
    for _ in range(queries):
        for count in (1, 2, 3):
            row = [w for w in questions[rng.randrange(size)] if w >= 0]
            q = " ".join(words[w] for w in rng.sample(row, count))
            started, cpu = time.perf_counter(), time.thread_time()
            page = models.receipts(TENANT, ReceiptFilter(q=q), limit=PAGE, order="desc")
            timings[count][0].append((time.perf_counter() - started) * 1000)
            timings[count][1].append((time.thread_time() - cpu) * 1000)
            assert page.items, q
    ledger.close()
    return timings


def _write_cpu(writes: int, rounds: int, work: Path) -> tuple[float, float]:
    """CPU ms per recorded retrieval: (with the question index, without)."""
    from tests.factories import UseCases

    def without_index() -> list[Any]:
        return [p for p in default_projections() if p.name != "question_index"]

    setups: dict[str, Any] = {}
    for name, catalog in (("with", default_projections), ("without", without_index)):
        setattr(runner_module, "default_projections", catalog)  # noqa: B010 - the runner's catalogue here
        ledger = Ledger(LedgerConfig(data_dir=work / f"w-{name}"))
        cases = UseCases(ledger)
        setups[name] = (cases, cases.ingest("Parental leave is twelve weeks. Audit logs are kept 180 days."))
    setattr(runner_module, "default_projections", default_projections)  # noqa: B010
    rng = random.Random(7)
    vocabulary = _vocabulary(rng)
    spent: dict[str, list[float]] = {"with": [], "without": []}
    for _ in range(rounds):
        for name in ("with", "without"):
            cases, doc = setups[name]
            started = time.process_time()
            for _ in range(writes):
                cases.retrieve(doc, "how " + " ".join(rng.sample(vocabulary, 8)) + "?")
            spent[name].append((time.process_time() - started) * 1000 / writes)
    return statistics.median(spent["with"]), statistics.median(spent["without"])


def _p(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-find-") as tmp:
        work = Path(tmp)
        print(
            "| receipts | words | wall p50 ms | wall p95 ms | CPU p50 ms | CPU p95 ms | CPU max ms |\n"
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        )
        for size in (int(s) for s in args.sizes.split(",")):
            timings = _query_bench(size, args.queries, work)
            for count, (wall, cpu) in timings.items():
                print(
                    f"| {size:,} | {count} | {_p(wall, 50):.1f} | {_p(wall, 95):.1f} "
                    f"| {_p(cpu, 50):.1f} | {_p(cpu, 95):.1f} | {max(cpu):.1f} |",
                    flush=True,
                )
        with_index, without = _write_cpu(args.writes, args.rounds, work)
        print(
            f"\nwrite path CPU per recorded retrieval: {with_index:.2f} ms with the question index, "
            f"{without:.2f} ms without: x{with_index / without:.3f}"
        )


if __name__ == "__main__":
    main()
