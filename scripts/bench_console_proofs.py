"""The console's Proofs check at a large size: the whole-log verification it used to run per
request (`verify_store` with the note held) against the check from the kept size
(`ledger.usecases.held_checkpoint`), for kept checkpoints 1,000, 10,000 and ~all entries back,
and 12 checks at once. SQLite; prints a table.

    python scripts/bench_console_proofs.py --entries 100000 [--dir DIR (reused when it exists)]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ledger.config import LedgerConfig
from ledger.domain.entries import utc_now
from ledger.storage.audit import verify_store
from ledger.tlog.checkpoints import make_checkpoint
from ledger.usecases.held_checkpoint import check_held_checkpoint
from ledger.writing.application import Ledger
from scripts.bench_ledger import build_store
from tests.factories import retrieval_draft


def _note(ledger: Ledger, size: int) -> str:
    """A checkpoint the ledger signed at `size` (as an auditor would have kept it then)."""
    return make_checkpoint(
        seq=1, origin=ledger.origin, tree_size=size, root=ledger.tree.root(size),
        issued_at=utc_now(), key=ledger.signing_key(),
    ).note  # fmt: skip


def _median_s(fn: Any, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench-proofs-"))
    if not (root / "big").exists():
        seed = Ledger(LedgerConfig(data_dir=root / "seed", run_checkpointer=False))
        template = [retrieval_draft(seed, f"question {i}") for i in range(200)]
        seed.close()
        build_store(root, args.entries, template).close()
    ledger = Ledger(LedgerConfig(data_dir=root / "big", run_checkpointer=False))
    ledger.issue_checkpoint()
    size = ledger.size
    ctx = SimpleNamespace(ledger=ledger)
    print(f"entries: {size}")
    print("| kept checkpoint | whole-log verify (before) | from the kept size (after) | entries re-read |")
    print("| --- | --- | --- | --- |")
    for back in (1_000, 10_000, size - 1):
        note = _note(ledger, size - back)
        before = _median_s(lambda n=note: verify_store(ledger.store, ledger.root_public_key, held=[n]), 1)
        verdict: dict[str, Any] = {}

        def after(n: str = note, into: dict[str, Any] = verdict) -> None:
            into.update(check_held_checkpoint(ctx, n))  # type: ignore[arg-type]

        after_s = _median_s(after)
        assert verdict["ok"], verdict
        print(f"| {back:,} entries back | {before:.2f} s | {after_s * 1000:.0f} ms | {verdict['reread']:,} |")
    note = _note(ledger, 1)
    started = time.perf_counter()
    threads = [threading.Thread(target=check_held_checkpoint, args=(ctx, note)) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(f"12 checks at once, kept at size 1 (after): all done in {time.perf_counter() - started:.2f} s")
    ledger.close()


if __name__ == "__main__":
    main()
