"""What the suite's forked command runs save: the same test modules run with the warm CLI
template (tests/cli_template.py) and with a fresh interpreter per run
(CITELEDGER_TEST_FORK_CLI=0), alternated round by round in one invocation.

CPU is the pytest process and every process it waited for (the forked runs are the template's
children, and the template is waited for at exit), so the two sides count the same work; wall
time is printed too but means little on a shared machine.

    python scripts/bench_suite.py --rounds 3 tests/test_cli_failures.py tests/test_migrations.py
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_once(modules: list[str], fork: bool) -> tuple[float, float]:
    env = {**os.environ, "CITELEDGER_TEST_FORK_CLI": "1" if fork else "0"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", *modules],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"the tests failed (fork={fork}): run them alone to see why")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description="forked command runs against fresh ones")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("modules", nargs="+")
    args = parser.parse_args()
    results: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for round_ in range(args.rounds):
        for fork in (round_ % 2 == 0, round_ % 2 != 0):  # alternate which side goes first
            results[fork].append(run_once(args.modules, fork))
            print(f"round {round_ + 1} fork={fork}: cpu {results[fork][-1][0]:.1f} s", file=sys.stderr)
    print("| runs | CPU s (median) | wall s (median) |")
    print("| --- | ---: | ---: |")
    for fork, label in ((False, "fresh interpreter per run"), (True, "forked from the template")):
        cpu = statistics.median(c for c, _ in results[fork])
        wall = statistics.median(w for _, w in results[fork])
        print(f"| {label} | {cpu:.1f} | {wall:.1f} |")
    ratio = statistics.median(c for c, _ in results[True]) / statistics.median(c for c, _ in results[False])
    print(f"\nforked ÷ fresh, CPU: {ratio:.2f}x ({len(args.modules)} modules, {args.rounds} rounds)")


if __name__ == "__main__":
    main()
