"""CPU time of the ranking and of the whole search use case, this checkout against a base one
(`--base-repo`, e.g. a worktree of `main`), alternated round by round.

On a shared, loaded machine wall times swing with the load (p95 ratios between 3x and 6x on
the same code in one hour); the CPU time of the searching thread moves much less, so a change
to the ranking's cost shows there first. Each side runs in its own process with its own
checkout's code on the same `bulk_corpus` files (each side ingests its own ledger once, kept
in `--work` for the next rounds), then the golden queries (present and absent, repeated to
`--queries`) twice: `rank` as of the current position, then the search use case (rank +
policy + snippets + the signed receipt write), query by query.

    python scripts/bench_search_cpu.py --base-repo /work/wt/main-base [--size 5000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(repo: Path, work: Path, size: int, queries: int) -> dict[str, float]:
    """One side's figures (ms), with `repo`'s code."""
    sys.path.insert(0, str(repo))
    import numpy as np

    from bootstrap import ledger_context
    from ledger.config import LedgerConfig
    from ledger.domain.events import SearchRequest
    from ledger.policy.policy_rules import PolicyRules
    from ledger.schemas.requests import DocumentIn, SearchIn
    from ledger.storage.claims import DocumentClaims
    from ledger.usecases.context import Caller
    from ledger.usecases.documents import ingest_batch
    from ledger.usecases.ranking import rank
    from ledger.usecases.search import search
    from ledger.writing.application import Ledger
    from scripts.make_corpus import bulk_corpus, write
    from tests.golden_support import load_queries

    caller = Caller("acme", "bench", frozenset({"retrieval.write"}))
    fresh = not (work / "ledger").exists()
    ledger = Ledger(LedgerConfig(data_dir=work / "ledger", run_checkpointer=False))
    try:
        ctx = ledger_context(ledger)
        if fresh:  # as `sources sync` writes: 100 files per signed write
            folder = work / "corpus"
            write(folder, bulk_corpus(size))
            paths = sorted(folder.rglob("*.md"))
            docs = [
                DocumentIn(path=str(p.relative_to(folder)), text=p.read_text(encoding="utf-8"), source="bulk")
                for p in paths
            ]
            claims = DocumentClaims(ledger.store)
            for start in range(0, len(docs), 100):
                ingest_batch(ctx, claims, caller, docs[start : start + 100])
        mixed = [q.query for q in load_queries()]
        asked = [mixed[i % len(mixed)] for i in range(queries)]

        def searched(query: str) -> None:
            search(ctx, caller, SearchIn.model_validate({"input": {"query": query, "top_k": 5}}))

        searched("warm up")
        assert ctx.search_index is not None
        position = ctx.search_index.refresh()
        rank_cpu, search_cpu, search_wall = [], [], []
        for _ in range(2):
            for query in asked:
                started = time.thread_time()
                request = SearchRequest(top_k=5, corpus_position=position)
                rank(ctx, "acme", query, request, PolicyRules(), caller.scopes, None)
                rank_cpu.append(time.thread_time() - started)
                started, wall = time.thread_time(), time.perf_counter()
                searched(query)
                search_cpu.append(time.thread_time() - started)
                search_wall.append(time.perf_counter() - wall)
    finally:
        ledger.close()

    def ms(values: list[float], p: float) -> float:
        return float(np.percentile(np.array(values), p)) * 1000

    return {
        "rank_cpu_mean": statistics.fmean(rank_cpu) * 1000,
        "rank_cpu_p95": ms(rank_cpu, 95),
        "search_cpu_mean": statistics.fmean(search_cpu) * 1000,
        "search_cpu_p95": ms(search_cpu, 95),
        "search_wall_p95": ms(search_wall, 95),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-repo", type=Path, required=True)
    parser.add_argument("--size", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--work", type=Path, default=None, help="kept between runs (default: a temporary one)"
    )
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.work, args.size, args.queries)))
        return
    with tempfile.TemporaryDirectory(prefix="citeledger-bench-cpu-") as directory:
        work = args.work or Path(directory)
        sides = {"base": args.base_repo.resolve(), "this": ROOT}
        results: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
        for round_number in range(args.rounds):
            for name, repo in sides.items():
                command = [sys.executable, str(Path(__file__).resolve()), "--child", str(repo)]
                command += ["--work", str(work / f"{name}-{args.size}"), "--size", str(args.size)]
                command += ["--queries", str(args.queries), "--base-repo", str(repo)]
                output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
                results[name].append(json.loads(output.strip().splitlines()[-1]))
                print(f"round {round_number + 1} {name}: {results[name][-1]}", flush=True)
    keys = list(results["base"][0])
    print(
        f"\n{args.size} files, {args.queries} queries x 2 per round, {args.rounds} rounds"
        " (ms, mean of the rounds)\n"
    )
    print("| measure | base | this | this / base |")
    print("|---|---:|---:|---:|")
    for key in keys:
        base = statistics.fmean(r[key] for r in results["base"])
        this = statistics.fmean(r[key] for r in results["this"])
        print(f"| {key} | {base:.2f} | {this:.2f} | {this / base:.2f}x |")


if __name__ == "__main__":
    main()
