"""Real OS processes: concurrent appenders and a writer killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.config import LedgerConfig
from ledger.storage.audit import verify_store
from ledger.writing.application import Ledger
from tests.factories import TENANT, retrieval_draft

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _spawn(config: LedgerConfig, count: int, batch: int, ack: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.append_worker",
            str(config.data_dir),
            config.database_url or "-",
            str(count),
            str(batch),
            str(ack),
        ],
        cwd=ROOT,
        stderr=subprocess.PIPE,
    )


def _acks(path: Path) -> list[tuple[int, str]]:
    if not path.exists():
        return []
    lines = path.read_text(encoding="ascii").splitlines()
    return [(int(p), e) for p, e in (line.split() for line in lines if line.count(" ") == 1)]


def test_two_processes_append_concurrently(ledger_config: LedgerConfig, tmp_path: Path) -> None:
    # Both start on an empty store, so they also race for the genesis entry.
    acks = [tmp_path / "a.txt", tmp_path / "b.txt"]
    workers = [_spawn(ledger_config, 150, 1, acks[0]), _spawn(ledger_config, 150, 7, acks[1])]
    for worker in workers:
        _, stderr = worker.communicate(timeout=300)
        assert worker.returncode == 0, stderr.decode()[-2000:]
    acknowledged = _acks(acks[0]) + _acks(acks[1])
    assert len(acknowledged) == 300
    ledger = Ledger(LedgerConfig(**{**ledger_config.__dict__, "run_checkpointer": False}))
    try:
        stored = {event.event_id: event.position for event in ledger.read()}
        assert ledger.size == 301 and len(stored) == 301  # genesis + every event exactly once
        for position, event_id in acknowledged:
            assert stored[event_id] == position
        ledger.issue_checkpoint()
        report = verify_store(ledger.store, ledger.root_public_key, deep=True)
        assert report.ok, report.first_bad
    finally:
        ledger.close()


def test_sigkill_mid_stream_loses_no_acknowledged_event(ledger_config: LedgerConfig, tmp_path: Path) -> None:
    ack = tmp_path / "ack.txt"
    worker = _spawn(ledger_config, 1_000_000, 3, ack)
    deadline = time.monotonic() + 120
    while len(_acks(ack)) < 60 and time.monotonic() < deadline:
        assert worker.poll() is None, worker.stderr.read().decode() if worker.stderr else ""
        time.sleep(0.05)
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait(timeout=30)
    acknowledged = _acks(ack)
    assert len(acknowledged) >= 60
    ledger = Ledger(LedgerConfig(**{**ledger_config.__dict__, "run_checkpointer": False}))
    try:
        stored = {event.event_id: event.position for event in ledger.read()}
        for position, event_id in acknowledged:
            assert stored.get(event_id) == position
        assert len(stored) == ledger.size
        report = verify_store(ledger.store, ledger.root_public_key, deep=True)
        assert report.ok, report.first_bad
        ledger.append(retrieval_draft(ledger), tenant_id=TENANT)  # the store is writable after restart
        ledger.issue_checkpoint()
        assert verify_store(ledger.store, ledger.root_public_key).ok
    finally:
        ledger.close()
