"""Evidence of a rewrite outlives the process that saw it (issue 26, item 1).

A witness that refuses a checkpoint (the log was cut back under what it cosigned,
or forked) and the opening check of tiles and checkpoints both leave a finding in
the store: a real server killed (SIGKILL) or stopped (SIGTERM) and started again
still refuses writes, and /v1/healthz, `lag`, `verify` and `repair` name the
finding (what, when, which witness, sizes) until `citeledger repair --yes`, which a
running server (every worker) honours within `RECHECK_S`. A client shown such a
log raises the rollback error, not "not found"."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from client import CheckpointMismatch, Client
from ledger.config import LedgerConfig
from ledger.storage.store import CHECKPOINT_STREAM_ID, LEDGER_STREAM_ID
from ledger.writing.application import Ledger
from ledger.writing.integrity import IntegrityHold
from ledger.writing.integrity_records import RECHECK_S
from tests import loopback_http
from tests.api_support import DOC, LoopbackServer, api_config, make_tokens
from tests.conftest import RawStore
from tests.server_process import ServerProcess, run_cli, server_env
from tests.test_client_checkpoints import async_checkpoint_verdict
from tests.test_witness import _fill, _open, _vkey, _wipe_local_evidence
from tests.witness_support import WitnessProcess

WITNESS = "witness.test/w1"


def _post(base: str, token: str) -> httpx.Response:
    return loopback_http.post(
        f"{base}/v1/documents",
        json={"path": f"d-{uuid.uuid4().hex[:8]}.md", "text": DOC},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )


def _integrity(base: str) -> dict[str, Any]:
    body: dict[str, Any] = loopback_http.get(f"{base}/v1/healthz", timeout=30).json()["integrity"]
    return body


def _assert_named(finding: dict[str, Any]) -> None:
    """What an operator needs: what, when, by what, which witness and the sizes."""
    assert finding["kind"] == "log_shorter_than_witnessed", finding
    assert finding["evidence"] == f"witness:{WITNESS}:41"
    assert finding["found_at"] and finding["source"] == "witness"
    assert finding["detail"]["witness"] == WITNESS and finding["detail"]["witness_size"] == 41
    assert finding["detail"]["log_size"] < 41


def test_a_witness_refusal_holds_across_restarts_until_repair(
    ledger_config: LedgerConfig, raw_store: RawStore, tmp_path: Path
) -> None:
    with WitnessProcess(tmp_path / "w1", WITNESS, _vkey(ledger_config)) as witness:
        with _open(ledger_config, witness.setting) as ledger:
            _fill(ledger, 40)
            assert ledger.cosign(ledger.issue_checkpoint()).note.count("\u2014 ") == 2  # type: ignore[arg-type]
        _wipe_local_evidence(raw_store, above=20)  # nothing local shows the cut any more

        token = "t-" + uuid.uuid4().hex
        env = server_env(
            ledger_config,
            token,
            CITELEDGER_DATA_DIR=str(ledger_config.data_dir),
            CITELEDGER_WITNESSES=witness.setting,
            CITELEDGER_CHECKPOINT_INTERVAL_S="0.2",
        )
        # Two API workers on PostgreSQL: the one whose checkpointer meets the refusal is
        # not the only one that must hold.
        workers = 2 if ledger_config.database_url else 1
        server = ServerProcess(ledger_config.data_dir, env, workers=workers, log_path=tmp_path / "server.log")
        server.start()
        try:
            # The checkpointer asks the witness at once (the log grew since its last
            # checkpoint): a write may already be refused.
            first = _post(server.base_url, token)
            assert first.status_code == 201 or first.json()["error"]["code"] == "integrity_hold", first.text
            deadline = time.monotonic() + 30
            while _integrity(server.base_url)["ok"] and time.monotonic() < deadline:
                time.sleep(0.1)  # the checkpointer sends the witness the shorter log
            time.sleep(RECHECK_S + 0.2)  # every worker has re-read the hold
            for _ in range(4):
                refused = _post(server.base_url, token)
                assert refused.status_code == 503 and refused.json()["error"]["code"] == "integrity_hold"
            named = refused.json()["findings"]

            # Restarted while the witness is unreachable (down, or the network between them):
            # only what the store kept can hold it now.
            witness.stop()
            # SIGKILL on PostgreSQL, SIGTERM (a graceful stop) on SQLite: one restart each
            # keeps the test short (a two-worker start takes ~15 s on a busy machine).
            if ledger_config.database_url:
                server.kill()
            else:
                server.stop()
            server.start()
            integrity = _integrity(server.base_url)
            assert integrity["ok"] is False, integrity
            assert _post(server.base_url, token).status_code == 503
            [finding] = integrity["findings"]
            _assert_named(finding)
            _assert_named(named[0])  # the 503 names it too

            lag = run_cli(["lag"], env)
            assert lag.returncode == 1, lag.stdout + lag.stderr
            [reported] = json.loads(lag.stdout)["integrity"]["findings"]
            _assert_named(reported)
            verified = run_cli(["verify"], env)
            assert verified.returncode == 1
            assert "integrity: log_shorter_than_witnessed" in verified.stdout
            assert f"witness={WITNESS}" in verified.stdout and "witness_size=41" in verified.stdout
            dry = run_cli(["repair"], env)
            assert dry.returncode == 1 and "log_shorter_than_witnessed" in dry.stdout
            assert "found " in dry.stdout and "by witness" in dry.stdout

            repaired = run_cli(["repair", "--yes", "--actor", "ops-alice"], env)
            assert repaired.returncode == 0, repaired.stdout + repaired.stderr
            done = time.monotonic()
            while (answer := _post(server.base_url, token)).status_code == 503:
                assert time.monotonic() - done < RECHECK_S + 3, answer.text
                time.sleep(0.05)
            assert answer.status_code == 201, answer.text
            for _ in range(4):  # every worker lifts it within the same bound of the repair
                while (answer := _post(server.base_url, token)).status_code == 503:
                    assert time.monotonic() - done < RECHECK_S + 3, answer.text
                    time.sleep(0.05)
                assert answer.status_code == 201, answer.text
            # A POST that succeeded says nothing of the worker a health check lands on: each
            # must drop the finding within the same bound of the repair (kernel-balanced).
            while (findings := _integrity(server.base_url)["findings"]) != []:
                assert time.monotonic() - done < RECHECK_S + 3, findings
                time.sleep(0.05)
            assert run_cli(["lag"], env).returncode == 0
        finally:
            server.stop()


def test_a_fork_found_by_a_witness_is_still_held_when_the_ledger_opens_again(
    ledger_config: LedgerConfig, raw_store: RawStore, tmp_path: Path
) -> None:
    """A log cut back and regrown differently (the witness answers 422): the finding is
    stored, so a ledger opened afterwards, without witnesses, holds as well."""
    with WitnessProcess(tmp_path / "w1", WITNESS, _vkey(ledger_config)) as witness:
        with _open(ledger_config, witness.setting) as ledger:
            _fill(ledger, 15)
            ledger.cosign(ledger.issue_checkpoint())  # type: ignore[arg-type]
        _wipe_local_evidence(raw_store, above=10)
        with _open(ledger_config, witness.setting) as forked:
            _fill(forked, 8, query="something else entirely")
            forked.cosign(forked.issue_checkpoint())  # type: ignore[arg-type]
            assert [f.kind for f in forked.findings] == ["witness_disagrees"]
    with _open(ledger_config) as reopened:
        [finding] = reopened.findings
        assert finding.kind == "witness_disagrees" and finding.source == "witness"
        assert finding.detail["witness"] == WITNESS and finding.detail["witness_size"] == 16
        assert finding.detail["checkpoint_size"] == 18 and len(finding.detail["checkpoint_root"]) == 64
        with pytest.raises(IntegrityHold):
            _fill(reopened, 1)


def test_a_finding_made_by_one_process_holds_every_other(
    ledger_config: LedgerConfig, raw_store: RawStore
) -> None:
    """The opening check goes the same durable way: a ledger opened before the log was
    cut back refuses writes within RECHECK_S of another process finding the cut."""
    with _open(ledger_config) as running:
        _fill(running, 30)
        running.issue_checkpoint()
        running.tree.flush()
        raw_store.execute(
            "DELETE FROM stored_events WHERE originator_id = ? AND originator_version > 20",
            (raw_store.stream_value(LEDGER_STREAM_ID),),
        )
        other = _open(ledger_config)  # another worker starting, or the CLI
        try:
            assert {f.kind for f in other.findings} >= {"log_shorter_than_tiles"}
        finally:
            other.close()
        time.sleep(RECHECK_S + 0.1)
        with pytest.raises(IntegrityHold) as held:
            _fill(running, 1)
        assert "log_shorter_than_tiles" in {f.kind for f in held.value.findings}
        assert all(f.source == "open" and f.found_at for f in held.value.findings)


def _cut_keeping(ledger_config: LedgerConfig, raw_store: RawStore, *, keep_checkpoints: bool) -> None:
    """The newest entries deleted (tiles left, so the server holds), and either every
    checkpoint or none."""
    raw_store.execute(
        "DELETE FROM stored_events WHERE originator_id = ? AND originator_version > 20",
        (raw_store.stream_value(LEDGER_STREAM_ID),),
    )
    if not keep_checkpoints:
        raw_store.execute(
            "DELETE FROM stored_events WHERE originator_id = ?",
            (raw_store.stream_value(CHECKPOINT_STREAM_ID),),
        )


@pytest.mark.parametrize("keep_checkpoints", [False, True])
def test_a_client_shown_a_truncated_held_log_raises_the_rollback_error(
    ledger_config: LedgerConfig, raw_store: RawStore, tmp_path: Path, keep_checkpoints: bool
) -> None:
    """Without checkpoints the server answers 404 for the latest one; with them, 404 for
    a tree of the size it signed. Either way: CheckpointMismatch, not NotFound."""
    config = api_config(ledger_config)
    token = make_tokens(config)["reader"]
    spool = tmp_path / "spool"
    with LoopbackServer(config) as server:
        ledger: Ledger = server.app.state.services.ledger
        _fill(ledger, 20)
        ledger.issue_checkpoint()
        with Client(server.base_url, token, spool_dir=str(spool), drain_interval_s=None) as client:
            assert client.latest_checkpoint().size == 21
        _fill(ledger, 19)
        ledger.issue_checkpoint()
        ledger.tree.flush()
    _cut_keeping(ledger_config, raw_store, keep_checkpoints=keep_checkpoints)
    with LoopbackServer(config) as server:
        assert server.app.state.services.ledger.findings  # held
        with Client(server.base_url, token, spool_dir=str(spool), drain_interval_s=None) as client:
            with pytest.raises(CheckpointMismatch) as rolled_back:
                client.latest_checkpoint()
            assert rolled_back.value.code == "checkpoint_rollback"

        assert async_checkpoint_verdict(server.base_url, token, spool) == "checkpoint_rollback"
