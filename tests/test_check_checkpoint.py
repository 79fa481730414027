"""`citeledger check-checkpoint`: a tenant's auditor, with a token and the root public key
alone, checks that the log kept at the last audit is a prefix of today's (issue 26 item 4).
A real server on loopback, the real command in a subprocess, the real store cut back and
regrown underneath (the witness tests' `_wipe_local_evidence`), a checkpoint row forged."""

from __future__ import annotations

import stat
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from ledger.config import LedgerConfig
from ledger.storage.store import CHECKPOINT_STREAM_ID
from ledger.tlog.checkpoints import make_checkpoint
from tests import loopback_http
from tests.api_support import LoopbackServer, api_config, make_tokens
from tests.conftest import RawStore
from tests.server_process import ROOT, run_cli, without_citeledger_settings
from tests.test_cli_imports import _probe
from tests.test_client_checkpoints import _grow
from tests.test_tamper import _forger_key, _set_state
from tests.test_witness import _open, _wipe_local_evidence
from tests.witness_support import WitnessProcess
from tests.witness_support import cli as witness_cli


def _check(
    base_url: str, token: str, root_key: Path, held: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    args = ["check-checkpoint", "--url", base_url, "--token", token, "--root-key", str(root_key)]
    env = {**without_citeledger_settings(), "PYTHONPATH": str(ROOT)}
    return run_cli([*args, "--held", str(held), *extra], env)


def _keep(base_url: str, token: str, path: Path) -> str:
    """What the auditor does at the end of an audit: keep the latest note."""
    answer = loopback_http.get(
        f"{base_url}/v1/checkpoints/latest", headers={"Authorization": f"Bearer {token}"}
    )
    assert answer.status_code == 200, answer.text
    note: str = answer.json()["checkpoint"]["note"]
    path.write_text(note, encoding="utf-8")
    return note


def test_a_kept_checkpoint_is_checked_with_a_token_and_the_root_key(
    ledger_config: LedgerConfig, raw_store: RawStore, tmp_path: Path
) -> None:
    config = api_config(ledger_config)
    token = make_tokens(config)["reader"]  # a tenant's audit.read token, nothing more
    root_key = tmp_path / "root.pub"
    held = tmp_path / "last-audit.note"
    with LoopbackServer(config) as server:
        root_key.write_bytes((ledger_config.keys_dir / "root.pub").read_bytes())  # out of band
        ledger = server.app.state.services.ledger
        assert _grow(ledger, 10) == 11
        _keep(server.base_url, token, held)
        ledger.rotate_signing_key()  # today's checkpoint is signed by the next key of the chain
        assert _grow(ledger, 4) == 16

        good = _check(server.base_url, token, root_key, held)
        assert good.returncode == 0, good.stdout + good.stderr
        assert (
            good.stdout.startswith("OK: the log you saw on 20")
            and "(size 11) is a prefix of today's (size 16" in good.stdout
        )
        assert (
            "the key chain from the root public key (2 keys)" in good.stdout
            and "the consistency proof (" in good.stdout
        )

        saved = _check(server.base_url, token, root_key, held, "--save")
        assert saved.returncode == 0 and "saved today's checkpoint (size 16)" in saved.stdout
        assert held.read_text().split("\n")[1] == "16" and stat.S_IMODE(held.stat().st_mode) == 0o600

        # The server's newest checkpoint row replaced by one the ledger's keys never signed.
        newest = ledger.latest_checkpoint()
        assert newest is not None
        fake = make_checkpoint(
            seq=newest.seq,
            origin=ledger.origin,
            tree_size=16,
            root=newest.root,
            issued_at=newest.issued_at,
            key=_forger_key(),
        )
        _set_state(raw_store, CHECKPOINT_STREAM_ID, newest.seq, fake.to_bytes())
        refused = _check(server.base_url, token, root_key, held)
        assert refused.returncode == 1 and "FAILED (forged)" in refused.stdout, (
            refused.stdout + refused.stderr
        )

    # Whoever holds the database cuts the log back to 12 entries (the rotation is the 12th)
    # and hides every trace.
    _wipe_local_evidence(raw_store, above=12)
    with LoopbackServer(config) as server:
        ledger = server.app.state.services.ledger
        assert _grow(ledger, 1) == 13
        rolled = _check(server.base_url, token, root_key, held)
        assert rolled.returncode == 1 and "FAILED (rollback)" in rolled.stdout
        assert "(size 16) is longer than today's (size 13)" in rolled.stdout
        assert _grow(ledger, 3, query="a different history") == 16
        forked = _check(server.base_url, token, root_key, held)
        assert forked.returncode == 1 and "FAILED (fork)" in forked.stdout
        assert _grow(ledger, 6, query="and longer") == 22
        rewritten = _check(server.base_url, token, root_key, held, "--save")
        assert rewritten.returncode == 1 and "FAILED (inconsistent)" in rewritten.stdout
        assert "is not a prefix of today's (size 22)" in rewritten.stdout
        assert held.read_text().split("\n")[1] == "16"  # a failed check never replaces the kept one


@pytest.mark.parametrize("backend", ["sqlite"])
def test_forged_kept_copies_witnesses_bad_inputs_and_no_web_package(
    ledger_config: LedgerConfig, tmp_path: Path
) -> None:
    config = api_config(ledger_config)
    tokens = make_tokens(config)
    root_key = ledger_config.keys_dir / "root.pub"  # written when the server opens the ledger
    held, forged = tmp_path / "held.note", tmp_path / "forged.note"
    with LoopbackServer(config) as server:
        _grow(server.app.state.services.ledger, 10)
        note = _keep(server.base_url, tokens["reader"], held)
        # The kept copy altered (another root), or signed by someone else: refused.
        lines = note.split("\n")
        lines[2] = "A" * 43 + "="
        forged.write_text("\n".join(lines), encoding="utf-8")
        altered = _check(server.base_url, tokens["reader"], root_key, forged)
        assert altered.returncode == 1 and "FAILED (kept_invalid)" in altered.stdout, (
            altered.stdout + altered.stderr
        )
        foreign = make_checkpoint(
            seq=1,
            origin=server.app.state.services.ledger.origin,
            tree_size=11,
            root=b"\x22" * 32,
            issued_at="2026-01-01T00:00:00Z",
            key=_forger_key(),
        )
        forged.write_text(foreign.note, encoding="utf-8")
        assert "FAILED (kept_invalid)" in _check(server.base_url, tokens["reader"], root_key, forged).stdout

        # A witness the auditor trusts never cosigned: refused unless --min-witnesses 0.
        made = witness_cli("witness", "init", "--dir", str(tmp_path / "w"), "--name", "w.example")
        assert made.returncode == 0, made.stderr
        (tmp_path / "w.vkey").write_text(made.stdout)
        unwitnessed = _check(
            server.base_url, tokens["reader"], root_key, held, "--witness-key", str(tmp_path / "w.vkey")
        )
        assert unwitnessed.returncode == 1 and "FAILED (witnesses)" in unwitnessed.stdout
        assert "cosigned by 0 of the 1 trusted witnesses" in unwitnessed.stdout

        args = [
            "check-checkpoint",
            "--url",
            server.base_url,
            "--token",
            tokens["reader"],
            "--root-key",
            str(root_key),
            "--held",
            str(held),
        ]
        # The command itself loads no web framework (as the other offline commands).
        assert _probe([args]) == [{"args": args, "exit": 0, "loaded": []}]
        bad_token = _check(server.base_url, "not-a-token", root_key, held)
        assert bad_token.returncode == 2 and "401" in bad_token.stderr
        missing = _check(server.base_url, tokens["reader"], root_key, tmp_path / "absent.note")
        assert missing.returncode == 2 and "absent.note" in missing.stderr
        (tmp_path / "junk.note").write_text("not a note")
        junk = _check(server.base_url, tokens["reader"], root_key, tmp_path / "junk.note")
        assert junk.returncode == 2 and "not a signed checkpoint note" in junk.stderr
    unreachable = _check(server.base_url, tokens["reader"], root_key, held)
    assert unreachable.returncode == 4 and "cannot reach the ledger" in unreachable.stderr


@pytest.mark.parametrize("backend", ["sqlite"])
def test_witness_cosignatures_are_checked_from_their_keys(
    ledger_config: LedgerConfig, tmp_path: Path
) -> None:
    """A real witness cosigns today's checkpoint: its key counts; another key of the same name
    does not, and `--min-witnesses` above what cosigned fails."""
    ledger = _open(ledger_config)
    log_vkey = ledger.vkey
    ledger.close()
    with WitnessProcess(tmp_path / "w1", "witness.test/w1", log_vkey) as witness:
        (tmp_path / "w1.vkey").write_text(witness.vkey + "\n")
        stranger = WitnessProcess(tmp_path / "w2", "witness.test/w1", log_vkey)  # same name, other key
        (tmp_path / "w2.vkey").write_text(stranger.vkey + "\n")
        config = api_config(replace(ledger_config, witnesses=witness.setting))
        token = make_tokens(config)["reader"]
        root_key, held = ledger_config.keys_dir / "root.pub", tmp_path / "held.note"
        with LoopbackServer(config) as server:
            ledger = server.app.state.services.ledger
            _grow(ledger, 5)
            _keep(server.base_url, token, held)
            _grow(ledger, 5)
            latest = ledger.latest_checkpoint()
            assert latest is not None
            ledger.cosign(latest)
            trusted = ["--witness-key", str(tmp_path / "w1.vkey")]
            ok = _check(server.base_url, token, root_key, held, *trusted)
            assert ok.returncode == 0, ok.stdout + ok.stderr
            assert "cosigned by 1 of 1 trusted witnesses: witness.test/w1" in ok.stdout
            other = _check(server.base_url, token, root_key, held, "--witness-key", str(tmp_path / "w2.vkey"))
            assert other.returncode == 1 and "FAILED (witnesses)" in other.stdout
            both = [*trusted, "--witness-key", str(tmp_path / "w2.vkey"), "--min-witnesses", "2"]
            too_many = _check(server.base_url, token, root_key, held, *both)
            assert too_many.returncode == 1 and "cosigned by 1 of the 2 trusted witnesses" in too_many.stdout
