"""Search under the worst policy bundle the limits allow vs no bundle (issue 26, item 2).

One corpus (scripts/make_corpus.py's `bulk_corpus`), ingested as `sources sync` does it
(`scripts/bench_search.py`'s `ledger_ingest`); then, in one process, the same queries:
- no bundle;
- the worst bundle (`worst_policy`: 500 rules, 2,000 patterns of 16 wildcards with no
  literal segment to rule them out cheaply, deny rules first so that a search judges every
  candidate, not a window), published just before (a fresh text: nothing cached);
- optionally (`--automata`), the same bundle judged as before this change: pattern by
  pattern by the automata of `ledger.path_glob` (a fresh text again).
Each p50/p95 is over every query (the cold ones right after the publish included).

    python scripts/bench_search_policy.py [--size 10000] [--queries 200] [--automata]
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

from ledger.path_glob import SplitPath  # noqa: E402
from ledger.policy_rules import RuleMatcher  # noqa: E402
from ledger.usecases.commands import PolicyBundleIn  # noqa: E402
from ledger.usecases.policy import publish_policy  # noqa: E402
from scripts.bench_search import (  # noqa: E402
    ADMIN,
    bench_queries,
    ledger_ingest,
    percentile,
    search_times,
)
from scripts.make_corpus import bulk_corpus, write  # noqa: E402

_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _shapes(c: str, d: str) -> list[str]:
    """Four patterns of 16 wildcards (or 14), none with a literal segment."""
    return [
        "*" + "*".join(c * 15) + "*",  # `*c*c*...*`: 16 stars in one segment
        "/".join(["**", f"*{c}*"] * 5) + "/**",  # 5 x (globstar, starred segment) + globstar
        "/".join(["*"] * 16),  # 16 one-star segments
        f"**/?*/**/*{d}?/**/*?*/**/*?{c}*",  # globstars between question marks
    ]


def worst_policy(tag: str) -> str:
    lines = [f"version: worst-{tag}", "rules:"]
    actions = ["boost\n    factor: '1.1'", "downrank\n    factor: '0.9'", "redact", "allow"]
    for i in range(500):
        c, d = _LETTERS[i % 26], _LETTERS[(i // 26) % 26]
        if i < 5:  # deny first: most candidates are judged (a denied one does not fill the window)
            patterns = [f"**/*{c}*?*?*?*?*?*?*", f"**/*{c}*{d}*", f"*/*{c}*", f"**/?*{c}*"]
            action = "deny"
        else:
            patterns = _shapes(c, d)
            action = actions[i % len(actions)]
        lines += [f"  - id: r{i}-{tag}", f"    action: {action}"]  # new rules: nothing cached
        lines.append(f"    match: {{paths: [{', '.join(repr(p) for p in patterns)}]}}")
    return "\n".join(lines) + "\n"


def _automata(self: RuleMatcher, path: str, split: SplitPath) -> frozenset[int]:
    """Before: every pattern by its own automaton, nothing remembered across paths."""
    rules = self._rules  # type: ignore[attr-defined]
    return frozenset(
        i for i, rule in enumerate(rules) if rule.globs and any(g.matches_split(split) for g in rule.globs)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="search under the worst allowed policy bundle")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--automata", action="store_true", help="also measure the judging before RE2")
    args = parser.parse_args()
    queries = bench_queries(args.queries)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="citeledger-bench-policy-") as directory:
        work = Path(directory)
        folder = work / "corpus"
        write(folder, bulk_corpus(args.size))
        gc.collect()
        ingest_s, ledger, ctx = ledger_ingest(folder, work / "ledger")
        try:
            search_times(ctx, queries[:5], 5)  # warm-up
            none = search_times(ctx, queries, 5)
            started = time.perf_counter()
            publish_policy(ctx, ADMIN, PolicyBundleIn(bundle_yaml=worst_policy("re2")))  # type: ignore[arg-type]
            publish_ms = (time.perf_counter() - started) * 1000
            worst = search_times(ctx, queries, 5)
            rows = [("no bundle", none), ("worst allowed bundle", worst)]
            if args.automata:
                original = RuleMatcher.rules_matching
                original_init = RuleMatcher.__init__

                def keep(self: RuleMatcher, rules: object) -> None:
                    original_init(self, rules)  # type: ignore[arg-type]
                    self._rules = rules  # type: ignore[attr-defined]

                RuleMatcher.__init__ = keep  # type: ignore[method-assign]
                RuleMatcher.rules_matching = _automata  # type: ignore[method-assign]
                try:
                    publish_policy(ctx, ADMIN, PolicyBundleIn(bundle_yaml=worst_policy("nfa")))  # type: ignore[arg-type]
                    rows.append(("worst bundle, judged as before (automata)", search_times(ctx, queries, 5)))
                finally:
                    RuleMatcher.rules_matching = original  # type: ignore[method-assign]
                    RuleMatcher.__init__ = original_init  # type: ignore[method-assign]
        finally:
            ledger.close()
    base = percentile(none, 95)
    print(
        f"{args.size} files (ingest {ingest_s:.1f}s), {len(queries)} queries, top_k 5; "
        f"load {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after; publish worst {publish_ms:.0f} ms"
    )
    print("| bundle | p50 (ms) | p95 (ms) | p95 / no bundle | max (ms) |")
    print("|---|---:|---:|---:|---:|")
    for name, times in rows:
        p95 = percentile(times, 95)
        print(
            f"| {name} | {percentile(times, 50) * 1000:.2f} | {p95 * 1000:.2f} | {p95 / base:.2f}x "
            f"| {max(times) * 1000:.0f} |"
        )


if __name__ == "__main__":
    main()
