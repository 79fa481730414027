"""Search under the worst policy bundle the limits allow vs no bundle (issue 26, item 2).

One corpus (scripts/make_corpus.py's `bulk_corpus`), ingested as `sources sync` does it
(`scripts/bench_search.py`'s `ledger_ingest`); then, in one process, the same queries:
- no bundle;
- the worst bundle the limits allow (`tests/policy_support.py`: 500 rules, 2,000 patterns,
  4,000 wildcards in all, heavy patterns with no literal segment to rule them out cheaply,
  deny rules first so that a search judges every candidate, not a window), published just
  before (a fresh text: nothing cached);
- `--before`: the worst bundle the limits allowed before (every pattern 16 wildcards, 30,820
  in all; such a bundle recorded earlier still loads), judged in one RE2 pass;
- `--automata`: that bundle judged as before this change, pattern by pattern by the
  automata of `ledger.policy.path_glob` (slow: use a small `--size`).
Each p50/p95 is over every query (the cold ones right after the publish included).

    python scripts/bench_search_policy.py [--size 10000] [--queries 200] [--automata]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ledger.policy.path_glob import SplitPath  # noqa: E402
from ledger.policy.policy_rules import RuleMatcher  # noqa: E402
from ledger.schemas.requests import PolicyBundleIn  # noqa: E402
from ledger.usecases.policy import publish_policy  # noqa: E402
from ledger.writing.application import Ledger  # noqa: E402
from scripts.bench_search import (  # noqa: E402
    ADMIN,
    bench_queries,
    ledger_ingest,
    percentile,
    search_times,
)
from scripts.make_corpus import bulk_corpus, write  # noqa: E402
from tests.policy_support import worst_bundle  # noqa: E402


def _automata(self: RuleMatcher, path: str, split: SplitPath) -> frozenset[int]:
    """Before: every pattern by its own automaton, nothing remembered across paths."""
    rules = self._rules  # type: ignore[attr-defined]
    return frozenset(
        i for i, rule in enumerate(rules) if rule.globs and any(g.matches_split(split) for g in rule.globs)
    )


def _publish_recorded(ledger: Ledger, ctx: object, text: str) -> None:
    """A bundle past today's wildcard limit, as an earlier version recorded it (then loaded
    as any live bundle is); judged ahead like a published one."""
    from ledger.domain.entries import EventDraft
    from ledger.domain.events import PolicyBundlePublished
    from ledger.usecases.policy import bundle_rules
    from ledger.usecases.policy_warm import warm_published

    sha = hashlib.sha256(text.encode()).hexdigest()
    payload = PolicyBundlePublished(policy_version=f"old-{sha[:8]}", bundle_sha256=sha, bundle_yaml=text)
    ledger.append(EventDraft.of(payload, tenant_id="acme", actor="old"), tenant_id="acme")
    ctx.lookups.refresh()  # type: ignore[attr-defined]
    warm_published(ctx, "acme", bundle_rules(text))  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description="search under the worst allowed policy bundle")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--before", action="store_true", help="also the worst bundle allowed before")
    parser.add_argument("--automata", action="store_true", help="also that bundle judged before RE2")
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
            publish_policy(ctx, ADMIN, PolicyBundleIn(bundle_yaml=worst_bundle("re2")))  # type: ignore[arg-type]
            publish_ms = (time.perf_counter() - started) * 1000
            worst = search_times(ctx, queries, 5)
            rows = [("no bundle", none), ("worst allowed bundle (4,000 wildcards)", worst)]
            if args.before:
                _publish_recorded(ledger, ctx, worst_bundle("before", None))
                rows.append(
                    ("worst bundle allowed before (30,820 wildcards), RE2", search_times(ctx, queries, 5))
                )
            if args.automata:
                original = RuleMatcher.rules_matching
                original_init = RuleMatcher.__init__

                def keep(self: RuleMatcher, rules: object) -> None:
                    original_init(self, rules)  # type: ignore[arg-type]
                    self._rules = rules  # type: ignore[attr-defined]

                RuleMatcher.__init__ = keep  # type: ignore[method-assign]
                RuleMatcher.rules_matching = _automata  # type: ignore[method-assign]
                try:
                    _publish_recorded(ledger, ctx, worst_bundle("nfa", None))
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
