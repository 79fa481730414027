"""Witness benchmark: checkpoint-to-cosigned latency with one and three local
witnesses (each `citeledger witness serve` in its own process), the write
throughput with witnesses on vs off (cosigning is off the write path: the
checkpointer thread asks the witnesses), and C2SP tile reads per second against
`GET /v1/events/{position}/inclusion-proof` on a real loopback server.

    .venv/bin/python scripts/bench_witness.py [--rounds 40] [--seconds 4] [--out docs/benchmarks/ledger.md]

Writes its own section of the output file (between `<!-- bench_witness -->` markers).
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ledger.config import LedgerConfig  # noqa: E402
from ledger.writing.application import Ledger  # noqa: E402
from tests.api_support import LoopbackServer, api_config, make_tokens  # noqa: E402
from tests.factories import TENANT, retrieval_draft  # noqa: E402
from tests.witness_support import WitnessProcess  # noqa: E402

MARK = "<!-- bench_witness -->"
END = "<!-- /bench_witness -->"


def _config(directory: Path, witnesses: str = "", checkpointer: bool = False) -> LedgerConfig:
    """The default checkpoint interval (0.5 s): a checkpoint, and a round of cosigning, per interval."""
    return LedgerConfig(data_dir=directory, run_checkpointer=checkpointer, witnesses=witnesses)


def _witnesses(root: Path, count: int, log_vkey: str) -> list[WitnessProcess]:
    return [WitnessProcess(root / f"w{i}", f"bench.witness/w{i}", log_vkey).start() for i in range(count)]


def cosign_latency(root: Path, count: int, rounds: int) -> tuple[float, float]:
    """(median, p95) ms from a checkpoint's issue to every witness's cosignature stored."""
    directory = root / f"latency-{count}"
    with Ledger(_config(directory)) as ledger:
        log_vkey = ledger.vkey
    witnesses = _witnesses(root / f"latency-w{count}", count, log_vkey)
    try:
        setting = ";".join(w.setting for w in witnesses)
        with Ledger(_config(directory, setting)) as ledger:
            samples = []
            for _ in range(rounds):
                ledger.append_batch([retrieval_draft(ledger) for _ in range(10)], tenant_id=TENANT)
                record = ledger.issue_checkpoint()
                assert record is not None and ledger.cosigner is not None
                start = time.perf_counter()
                got = ledger.cosigner.cosign(record)
                samples.append((time.perf_counter() - start) * 1000)
                assert len(got) == count, ledger.cosigner.alarms
        samples.sort()
        return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]
    finally:
        for witness in witnesses:
            witness.stop()


def write_throughput(root: Path, seconds: float, rounds: int) -> tuple[float, float, int]:
    """(appends/s without witnesses, with three, checkpoints cosigned meanwhile): one event
    per transaction, the checkpointer running, interleaved, best of `rounds`."""
    with Ledger(_config(root / "tp-keys")) as ledger:
        pass
    off_dir, on_dir = root / "tp-off", root / "tp-on"
    results: dict[bool, list[float]] = {False: [], True: []}
    cosigned = 0
    for directory in (off_dir, on_dir):
        directory.mkdir()
        (directory / "keys").symlink_to(root / "tp-keys" / "keys")  # one log identity
    with Ledger(_config(on_dir)) as ledger:
        log_vkey = ledger.vkey
    witnesses = _witnesses(root / "tp-w", 3, log_vkey)
    try:
        setting = ";".join(w.setting for w in witnesses)
        for _ in range(rounds):
            for on in (False, True):
                config = _config(on_dir if on else off_dir, setting if on else "", checkpointer=True)
                with Ledger(config) as ledger:
                    done, deadline = 0, time.perf_counter() + seconds
                    start = time.perf_counter()
                    while time.perf_counter() < deadline:
                        ledger.append(retrieval_draft(ledger), tenant_id=TENANT)
                        done += 1
                    results[on].append(done / (time.perf_counter() - start))
                    if on:
                        time.sleep(0.3)
                        cosigned = max(cosigned, ledger.witnessed.size_of("bench.witness/w0"))
    finally:
        for witness in witnesses:
            witness.stop()
    return max(results[False]), max(results[True]), cosigned


def reads(root: Path, entries: int, seconds: float) -> tuple[float, float]:
    """(tile reads/s, inclusion-proof reads/s), one client, sequential, random positions."""
    config = api_config(replace(_config(root / "reads"), run_checkpointer=False))
    tokens = make_tokens(config)
    with LoopbackServer(config) as server:
        ledger = server.app.state.services.ledger
        while ledger.size < entries:
            ledger.append_batch([retrieval_draft(ledger) for _ in range(1000)], tenant_id=TENANT)
        ledger.issue_checkpoint()
        size = ledger.size
        rng = random.Random(7)
        from ledger.tlog.tlog_tiles import tile_path

        with httpx.Client(base_url=server.base_url) as http:

            def rate(url: Callable[[], str], headers: dict[str, str]) -> float:
                done, deadline = 0, time.perf_counter() + seconds
                start = time.perf_counter()
                while time.perf_counter() < deadline:
                    response = http.get(url(), headers=headers)
                    assert response.status_code == 200, response.text
                    done += 1
                return done / (time.perf_counter() - start)

            full_tiles = size // 256
            tiles = rate(lambda: "/v1/tlog/" + tile_path(0, rng.randrange(full_tiles)), {})
            reader = {"Authorization": f"Bearer {tokens['reader']}"}
            proofs = rate(
                lambda: f"/v1/events/{rng.randrange(2, size + 1)}/inclusion-proof?tree_size={size}", reader
            )
    return tiles, proofs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--out", type=Path, default=ROOT / "docs/benchmarks/ledger.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        one = cosign_latency(root, 1, args.rounds)
        three = cosign_latency(root, 3, args.rounds)
        off, on, cosigned = write_throughput(root, args.seconds, 3)
        tiles, proofs = reads(root, args.entries, args.seconds)
    machine = f"{platform.machine()}, Python {platform.python_version()}"
    ratio = f"{on / off:.2f}x; witnesses cosigned up to size {cosigned:,}"
    section = f"""{MARK}
## Witnesses and tiles ({dt.date.today().isoformat()})

Machine: {machine}, 2 cores shared with other work; SQLite; witnesses are `citeledger witness serve`
processes on loopback (each its own key and SQLite). `scripts/bench_witness.py --rounds {args.rounds}
--seconds {args.seconds:g} --entries {args.entries}`.

| measurement | result | target |
| --- | --- | --- |
| checkpoint to cosigned, 1 witness (median / p95 of {args.rounds}) | {one[0]:.1f} ms / {one[1]:.1f} ms | - |
| checkpoint to cosigned, 3 witnesses in parallel (median / p95) | {three[0]:.1f} ms / {three[1]:.1f} ms | - |
| appends/s, 1 event per transaction, checkpointer on (0.5 s), no witness (best of 3) | {off:,.0f}/s | - |
| appends/s, same, 3 witnesses cosigning each checkpoint (best of 3) | {on:,.0f}/s ({ratio}) | >= 0.95x |
| `GET /v1/tlog/tile/0/<N>` (full tiles, {args.entries:,} entries; one client) | {tiles:,.0f}/s | - |
| `GET /v1/events/<p>/inclusion-proof` (same store, same client) | {proofs:,.0f}/s | - |
| tile reads per inclusion-proof read | {tiles / proofs:.2f}x | - |
{END}"""
    text = args.out.read_text() if args.out.exists() else ""
    if MARK in text:
        text = text[: text.index(MARK)] + section + text[text.index(END) + len(END) :]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    args.out.write_text(text)
    print(section)


if __name__ == "__main__":
    main()
