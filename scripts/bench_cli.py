"""Command-line cold start: `citeledger verify-bundle` (and `verify --export`, `export`).

Wall time of a fresh interpreter running the command, best of N, for: the
current `cli/` package; the old layout (the command line inside `api/`, which
loaded Litestar and uvicorn), exported with `git archive` from the parent of the
commit that removed `api/cli.py` and run from a temporary directory; and
`python -c pass` as the floor. All in one run, interleaved. Writes a section
between markers in docs/benchmarks/ledger.md (and prints it).

    python scripts/bench_cli.py [--repeat 5] [--baseline-ref REF] [--out docs/benchmarks/ledger.md]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- bench_cli -->", "<!-- /bench_cli -->"


def git(*args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, check=True).stdout


def baseline_ref() -> str:
    removed = git("rev-list", "-n", "1", "HEAD", "--", "api/cli.py").decode().strip()
    if not removed:
        raise SystemExit("no commit removed api/cli.py; pass --baseline-ref")
    return f"{removed}^"


def export_tree(ref: str, into: Path) -> None:
    archive = git("archive", "--format=tar", ref)
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")


def clean_env(tree: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("CITELEDGER_")}
    env["PYTHONPATH"] = str(tree)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run(command: list[str], tree: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=tree, env=clean_env(tree), capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{command} failed:\n{done.stderr.decode()[-2000:]}")
    return elapsed


def modules_loaded(module: str, args: list[str], tree: Path) -> int:
    probe = (
        "import runpy, sys\n"
        f"sys.argv = ['citeledger', *{args!r}]\n"
        "try:\n"
        f"    runpy.run_module({module!r}, run_name='__main__', alter_sys=True)\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(len(sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tree, env=clean_env(tree), capture_output=True, check=True
    )
    return int(done.stderr.decode().strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--baseline-ref", default=None)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks" / "ledger.md")
    args = parser.parse_args()
    ref = args.baseline_ref or baseline_ref()
    ref_name = git("rev-parse", "--short", ref).decode().strip()

    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        work = Path(tmp)
        old = work / "old"
        old.mkdir()
        export_tree(ref, old)
        data, bundle, export = work / "data", work / "bundle.json", work / "log.jsonl"
        new_cli = [sys.executable, "-m", "cli.main"]
        old_cli = [sys.executable, "-m", "api.cli"]
        run([*new_cli, "demo", "--events", "5", "--data-dir", str(data)], ROOT)
        run([*new_cli, "bundle", "3", "--out", str(bundle), "--data-dir", str(data)], ROOT)
        run([*new_cli, "export", "--out", str(export), "--data-dir", str(data)], ROOT)
        public_key = str(data / "keys" / "root.pub")
        bundle_bytes = bundle.stat().st_size
        commands = {
            "verify-bundle": ["verify-bundle", str(bundle), "--public-key", public_key],
            "verify --export": ["verify", "--export", str(export), "--public-key", public_key],
            "export": ["export", "--out", str(work / "again.jsonl"), "--data-dir", str(data)],
        }
        floor = [sys.executable, "-c", "pass"]
        # Warm the page cache and write bytecode for both trees before timing.
        for cli_args in commands.values():
            run([*new_cli, *cli_args], ROOT)
            run([*old_cli, *cli_args], old)
        best: dict[tuple[str, str], float] = {}
        for _ in range(args.repeat):
            for name, cli_args in commands.items():
                for layout, command, tree in (("new", new_cli, ROOT), ("old", old_cli, old)):
                    elapsed = run([*command, *cli_args], tree)
                    key = (name, layout)
                    best[key] = min(best.get(key, elapsed), elapsed)
            elapsed = run(floor, ROOT)
            best[("floor", "")] = min(best.get(("floor", ""), elapsed), elapsed)
        counts = {
            (name, layout): modules_loaded(module, cli_args, tree)
            for name, cli_args in commands.items()
            for layout, module, tree in (("new", "cli.main", ROOT), ("old", "api.cli", old))
        }

    floor_ms = best[("floor", "")] * 1000
    rows = [
        "| command | old layout (`api/cli.py`) | `cli/` | speed-up | modules old / new |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in commands:
        old_ms, new_ms = best[(name, "old")] * 1000, best[(name, "new")] * 1000
        rows.append(
            f"| `citeledger {name}` | {old_ms:,.0f} ms | {new_ms:,.0f} ms | {old_ms / new_ms:.2f}x | "
            f"{counts[(name, 'old')]} / {counts[(name, 'new')]} |"
        )
    rows.append(f"| `python -c pass` (floor) | - | {floor_ms:,.0f} ms | - | - |")
    section = "\n".join(
        [
            BEGIN,
            "## Command-line cold start",
            "",
            f"{dt.date.today().isoformat()}; {platform.machine()}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}; one run of `scripts/bench_cli.py`: wall time of a fresh "
            f"`python -m ...` process, best of {args.repeat}, on a `demo --events 5` SQLite store "
            f"({bundle_bytes:,}-byte bundle; warm page cache, bytecode compiled). Old layout: "
            f"`{ref_name}` exported with `git archive`, same interpreter and packages.",
            "",
            *rows,
            END,
        ]
    )
    print(section)
    text = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
