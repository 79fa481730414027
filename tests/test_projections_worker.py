"""Projection workers as real processes, the CLI, and signed projection checkpoints."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from ledger.config import LedgerConfig
from ledger.writing.application import Ledger
from projections.catalog import default_projections
from projections.digest import digests
from projections.digest_sets import DigestSets, rebuild_in_scratch
from projections.queries import ReadModels
from projections.receipt_index import RECEIPTS_TABLE
from projections.runner import ProjectionRunner, embedded
from projections.tracking import read_lag
from tests.conftest import RawStore
from tests.factories import TENANT, document_draft, retrieval_draft

ROOT = Path(__file__).resolve().parents[1]


def _spawn_worker(config: LedgerConfig, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "CITELEDGER_DATA_DIR": str(config.data_dir)}
    if config.database_url:
        env["CITELEDGER_DATABASE_URL"] = config.database_url
    else:
        env.pop("CITELEDGER_DATABASE_URL", None)
    return subprocess.Popen(
        [sys.executable, "-m", "cli.main", "project", "--batch-size", "25", "--poll-interval", "0.1"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log.open("ab"),
    )


def _applied(ledger: Ledger) -> int:
    return min(item.applied_position for item in read_lag(ledger.store))


def _wait_until(
    predicate: Callable[[], bool], timeout: float, worker: subprocess.Popen[bytes], log: Path
) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert worker.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "timed out; worker log:\n" + log.read_text()[-3000:]
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["postgres"])
def test_kill_9_worker_mid_stream_then_restart_loses_and_duplicates_nothing(
    ledger: Ledger, ledger_config: LedgerConfig, tmp_path: Path
) -> None:
    ProjectionRunner(ledger.store)  # tables exist before the worker and the appender race
    log = tmp_path / "worker.log"
    appended: list[int] = []
    stop = threading.Event()

    def append_forever() -> None:
        while not stop.is_set():
            batch = [document_draft(ledger)] + [retrieval_draft(ledger) for _ in range(9)]
            appended.extend(e.position for e in ledger.append_batch(batch))
            time.sleep(0.01)

    appender = threading.Thread(target=append_forever)
    appender.start()
    try:
        worker = _spawn_worker(ledger_config, log)
        _wait_until(lambda: _applied(ledger) >= 300, 120, worker, log)
        os.kill(worker.pid, signal.SIGKILL)  # mid-stream: the appender keeps writing
        worker.wait(timeout=30)
        killed_at = _applied(ledger)
        # The appender keeps writing: the restarted worker must apply entries the killed
        # one never saw (a fast worker may have been caught up at the very instant).
        deadline = time.monotonic() + 30
        while ledger.sync() <= killed_at:
            assert time.monotonic() < deadline, "no entry appended after the kill; the test proves nothing"
            time.sleep(0.05)
        time.sleep(0.3)
        worker = _spawn_worker(ledger_config, log)
        _wait_until(lambda: _applied(ledger) >= killed_at + 200, 120, worker, log)
    finally:
        stop.set()
        appender.join(timeout=60)
    head = ledger.sync()
    _wait_until(lambda: _applied(ledger) == head, 120, worker, log)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0, log.read_text()[-3000:]

    runner = ProjectionRunner(ledger.store)
    assert runner.health()["ok"]
    with ledger.store.transaction(commit=False) as cursor:
        cursor.execute(
            f"SELECT position FROM {ledger.store.table('citeledger_rm_history')} ORDER BY position"
        )
        positions = [row["position"] for row in cursor.fetchall()]
        cursor.execute(f"SELECT COUNT(*) AS n FROM {ledger.store.table(RECEIPTS_TABLE)}")
        receipts = cursor.fetchone()["n"]
    assert positions == list(range(1, head + 1))  # every entry exactly once
    assert receipts == sum(1 for e in ledger.read() if e.type == "RetrievalRecorded")
    # And the state equals a from-scratch rebuild of the same log.
    names = [p.name for p in default_projections()]
    assert digests(runner.projections, ledger.store, as_of=head) == rebuild_in_scratch(
        ledger.store, names, head
    )


def test_cli_rebuild_digest_and_lag(
    ledger: Ledger, ledger_config: LedgerConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = embedded(ledger)
    ledger.append_batch([document_draft(ledger), retrieval_draft(ledger), retrieval_draft(ledger)])
    before = digests(runner.projections, ledger.store)
    if ledger_config.database_url:
        monkeypatch.setenv("CITELEDGER_DATABASE_URL", ledger_config.database_url)
    else:
        monkeypatch.delenv("CITELEDGER_DATABASE_URL", raising=False)
    cli = CliRunner()
    data = ["--data-dir", str(ledger_config.data_dir)]
    result = cli.invoke(app, ["rebuild", *data])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.strip().splitlines()[-1]) == before
    result = cli.invoke(app, ["digest", *data])
    assert result.exit_code == 0, result.output
    assert dict(line.split() for line in result.stdout.strip().splitlines()) == before
    result = cli.invoke(app, ["rebuild", "--projection", "receipts", *data])
    assert result.exit_code == 0 and json.loads(result.stdout.strip().splitlines()[-1]) == {
        "receipts": before["receipts"]
    }
    assert cli.invoke(app, ["rebuild", "--projection", "nope", *data]).exit_code == 2
    result = cli.invoke(app, ["lag", *data])
    assert result.exit_code == 0 and json.loads(result.stdout)["ok"]


def test_signed_projection_checkpoint_verifies_and_catches_tampering(
    ledger: Ledger, ledger_config: LedgerConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = embedded(ledger)
    ledger.append_batch([document_draft(ledger), retrieval_draft(ledger), retrieval_draft(ledger)])
    checkpoints = DigestSets(ledger, runner)
    assert checkpoints.issue() is None  # no signed log checkpoint yet
    log_checkpoint = ledger.issue_checkpoint()
    assert log_checkpoint is not None
    record = checkpoints.issue()
    assert record is not None and record.log_size == log_checkpoint.tree_size
    assert record.log_root == log_checkpoint.root.hex()
    ledger.append(retrieval_draft(ledger))  # moving on does not invalidate the checkpoint
    assert checkpoints.verify().ok, checkpoints.verify().problems

    if ledger_config.database_url:
        monkeypatch.setenv("CITELEDGER_DATABASE_URL", ledger_config.database_url)
    else:
        monkeypatch.delenv("CITELEDGER_DATABASE_URL", raising=False)
    ledger.close()  # the CLI opens the store itself (SQLite: one writer at a time)
    cli = CliRunner()
    data = ["--data-dir", str(ledger_config.data_dir)]
    result = cli.invoke(app, ["verify-projections", *data])
    assert result.exit_code == 0, result.output

    # Someone edits a receipt row that the checkpoint covers.
    raw = RawStore(ledger_config)
    table = RECEIPTS_TABLE
    raw.execute(f"UPDATE {table} SET status='error' WHERE position=?", (3,))
    result = cli.invoke(app, ["verify-projections", *data])
    assert result.exit_code == 1
    problems = json.loads(result.stdout.strip().splitlines()[0])["problems"]
    assert problems == ["receipts: live read model differs from the signed digest"]


def test_read_models_of_another_process_are_visible(open_ledger: Callable[..., Ledger]) -> None:
    writer = open_ledger()
    reader = open_ledger()
    reader_runner = embedded(reader)
    receipt = writer.append(retrieval_draft(writer))
    # The reader's next own commit catches up with the writer's entries too.
    reader.append(document_draft(reader))
    assert ReadModels(reader.store).receipt(TENANT, receipt.payload["receipt_id"]) is not None
    assert reader_runner.applied_position() == reader.size
