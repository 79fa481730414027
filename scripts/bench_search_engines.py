"""Search latency of the ledger's engines against bare bm25s over the same chunks, side by side.

For each corpus size (`scripts/make_corpus.py`'s `bulk_corpus`, ingested as `sources sync`
does): the same queries (`bench_search.bench_queries`: the golden ones, present and absent),
each timed in turn, query by query, so a burst of load on a shared machine hits all of them
(the two engines in alternating order):
bare bm25s `retrieve` over the same heading chunks, `rank` under the live engine (`LIVE`) and
the one before it (`PREVIOUS`; as of the current position, no receipt), and the search use case
(the live engine + policy + snippets + the signed receipt write). Prints a markdown table;
p95 ratios against bare bm25s.

    python scripts/bench_search_engines.py [--sizes 1000,5000,10000] [--queries 200] [--change-logs]

`--change-logs` puts every file under a `history/` folder: every chunk a change log, so `@9`
discounts every candidate of a question that does not ask about changes and decides the page
over `@8`'s order too (its worst case; the plain corpus has no change log).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ledger.domain.events import SearchRequest  # noqa: E402
from ledger.policy.policy_rules import PolicyRules  # noqa: E402
from ledger.schemas.requests import SearchIn  # noqa: E402
from ledger.usecases.ranking import rank  # noqa: E402
from ledger.usecases.search import search  # noqa: E402
from ledger.usecases.search_run import ENGINE, ENGINES  # noqa: E402
from scripts.bench_search import CALLER, bare_ingest, bench_queries, ledger_ingest, percentile  # noqa: E402
from scripts.make_corpus import bulk_corpus, write  # noqa: E402

K = 10
LIVE = ENGINE  # what a live search runs
PREVIOUS = ENGINES[ENGINES.index(ENGINE) - 1]  # the live engine before it


def run_size(size: int, queries: list[str], work: Path, change_logs: bool = False) -> dict[str, float]:
    folder = work / f"corpus-{size}"
    files = bulk_corpus(size)
    write(folder, {f"history/{path}": text for path, text in files.items()} if change_logs else files)
    gc.collect()
    _, tokenizer, model, texts = bare_ingest(folder)
    _, ledger, ctx = ledger_ingest(folder, work / f"ledger-{size}")
    times: dict[str, list[float]] = {"bare": [], "live": [], "previous": [], "search": []}
    try:
        search(ctx, CALLER, SearchIn.model_validate({"input": {"query": "warm up", "top_k": K}}))  # type: ignore[arg-type]
        position = ctx.search_index.refresh()  # type: ignore[attr-defined]
        request = SearchRequest(top_k=K, corpus_position=position)
        for number, query in enumerate(queries):
            started = time.perf_counter()
            ids = tokenizer.tokenize([query], return_as="ids", update_vocab=False, show_progress=False)  # type: ignore[attr-defined]
            if ids[0]:
                model.retrieve(ids, k=min(K, len(texts)), show_progress=False, n_threads=1)  # type: ignore[attr-defined]
            times["bare"].append(time.perf_counter() - started)
            # Alternated: the first engine to ask for a query reads its cited chunks into the
            # index's cache, the second finds them there.
            pair = (("live", LIVE), ("previous", PREVIOUS))
            for name, engine in pair if number % 2 == 0 else pair[::-1]:
                started = time.perf_counter()
                rank(ctx, "acme", query, request, PolicyRules(), CALLER.scopes, None, engine=engine)  # type: ignore[arg-type]
                times[name].append(time.perf_counter() - started)
            started = time.perf_counter()
            search(ctx, CALLER, SearchIn.model_validate({"input": {"query": query, "top_k": K}}))  # type: ignore[arg-type]
            times["search"].append(time.perf_counter() - started)
    finally:
        ledger.close()
    row: dict[str, float] = {"files": size, "chunks": len(texts)}
    for name, values in times.items():
        row[f"{name}_p50"] = percentile(values, 50) * 1000
        row[f"{name}_p95"] = percentile(values, 95) * 1000
    return row


def _id(engine: str) -> str:
    return "@" + engine.rsplit("@", 1)[-1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,5000,10000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--change-logs", action="store_true", help="every file under history/")
    args = parser.parse_args()
    queries = bench_queries(args.queries)
    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory(prefix="citeledger-bench-engines-") as directory:
        for size in [int(s) for s in args.sizes.split(",")]:
            rows.append(run_size(size, queries, Path(directory), args.change_logs))
            print(f"{size} files done", file=sys.stderr, flush=True)
    print(
        f"{len(queries)} queries per size, top_k {K}, one thread; load average {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after ({os.cpu_count()} cores, shared)"
        f"{'; every file under history/ (a change log)' if args.change_logs else ''}\n"
    )
    print(
        f"| files | chunks | bare bm25s p50 / p95 (ms) | rank `{_id(LIVE)}` p50 / p95 (ms) "
        f"| rank `{_id(PREVIOUS)}` p50 / p95 (ms) | search use case `{_id(LIVE)}` p50 / p95 (ms) "
        f"| `{_id(LIVE)}` rank p95 / bare p95 | search p95 / bare p95 |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['files']:.0f} | {r['chunks']:.0f} | {r['bare_p50']:.2f} / {r['bare_p95']:.2f} | "
            f"{r['live_p50']:.2f} / {r['live_p95']:.2f} | "
            f"{r['previous_p50']:.2f} / {r['previous_p95']:.2f} | "
            f"{r['search_p50']:.2f} / {r['search_p95']:.2f} | {r['live_p95'] / r['bare_p95']:.1f}x | "
            f"{r['search_p95'] / r['bare_p95']:.1f}x |"
        )


if __name__ == "__main__":
    main()
