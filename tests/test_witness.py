"""C2SP tlog-witness end to end: a witness in its own process (own key, own
SQLite) cosigns the ledger's checkpoints, refuses a log cut back or forked after it
saw it (and the ledger then holds writes), and keeps its state across a restart."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ledger.config import LedgerConfig
from ledger.storage.store import CHECKPOINT_STREAM_ID, LEDGER_STREAM_ID
from ledger.tlog.cosignature import open_cosignatures, parse_cosigner_vkey
from ledger.tlog.note import parse_verifier_key, verifier_key
from ledger.tlog.witness_protocol import format_add_checkpoint
from ledger.writing.application import Ledger
from ledger.writing.integrity import IntegrityHold
from tests import loopback_http
from tests.api_support import Api, make_api  # noqa: F401 - fixture
from tests.conftest import RawStore
from tests.factories import TENANT, retrieval_draft
from tests.server_process import run_cli, server_env
from tests.witness_support import WitnessProcess


def _open(config: LedgerConfig, witnesses: str = "") -> Ledger:
    return Ledger(LedgerConfig(**{**config.__dict__, "run_checkpointer": False, "witnesses": witnesses}))


def _fill(ledger: Ledger, count: int, query: str = "how long are logs kept?") -> None:
    ledger.append_batch([retrieval_draft(ledger, query) for _ in range(count)], tenant_id=TENANT)


def _wipe_local_evidence(raw: RawStore, above: int) -> None:
    """What whoever holds the database does to hide a rewrite: entries after `above`,
    every checkpoint, the tiles and the record of what the witnesses cosigned."""
    stream = raw.stream_value(LEDGER_STREAM_ID)
    raw.execute(
        "DELETE FROM stored_events WHERE originator_id = ? AND originator_version > ?", (stream, above)
    )
    raw.execute(
        "DELETE FROM stored_events WHERE originator_id = ?", (raw.stream_value(CHECKPOINT_STREAM_ID),)
    )
    for table in (
        "citeledger_merkle_tiles",
        "citeledger_merkle_state",
        "citeledger_witnessed",
        "citeledger_cosignatures",
    ):
        raw.execute(f"DELETE FROM {table}")


def _vkey(config: LedgerConfig) -> str:
    """The log's note verifier key, read by opening the store once."""
    with _open(config) as ledger:
        return ledger.vkey


@pytest.fixture
def log_vkey(ledger_config: LedgerConfig) -> str:
    return _vkey(ledger_config)


@pytest.fixture
def witness(log_vkey: str, tmp_path: Path) -> Iterator[WitnessProcess]:
    """A witness in its own process that knows the log's key."""
    with WitnessProcess(tmp_path / "w1", "witness.test/w1", log_vkey) as running:
        yield running


def test_witness_cosigns_consistent_checkpoints(witness: WitnessProcess, ledger_config: LedgerConfig) -> None:
    trusted = [parse_cosigner_vkey(witness.vkey)]
    with _open(ledger_config, witness.setting) as ledger:
        _fill(ledger, 30)
        first = ledger.cosign(ledger.issue_checkpoint())  # type: ignore[arg-type]
        [cosignature] = open_cosignatures(first.note, trusted)
        assert cosignature.witness == "witness.test/w1" and cosignature.timestamp > 0
        _fill(ledger, 10)
        second = ledger.cosign(ledger.issue_checkpoint())  # type: ignore[arg-type]
        assert second.tree_size == 41 and len(open_cosignatures(second.note, trusted)) == 1
        assert ledger.witnessed.size_of("witness.test/w1") == 41
        assert ledger.findings == [] and not ledger.cosigner.alarms  # type: ignore[union-attr]
        bundle_checkpoint = ledger.checkpoint_covering(5)
        assert open_cosignatures(bundle_checkpoint.note, trusted)  # bundles carry cosignatures


def test_a_log_cut_back_after_the_witness_saw_it_is_refused_and_held(
    witness: WitnessProcess, ledger_config: LedgerConfig, raw_store: RawStore
) -> None:
    with _open(ledger_config, witness.setting) as ledger:
        _fill(ledger, 40)
        assert ledger.cosign(ledger.issue_checkpoint()).note.count("\u2014 ") == 2  # type: ignore[arg-type]
    _wipe_local_evidence(raw_store, above=20)
    with _open(ledger_config, witness.setting) as restarted:
        assert restarted.size == 20 and restarted.findings == []  # nothing local is left to see
        _fill(restarted, 3)
        shorter = restarted.cosign(restarted.issue_checkpoint())  # type: ignore[arg-type]
        assert shorter.note.count("\u2014 ") == 1  # the witness did not cosign the shorter log
        alarm = restarted.cosigner.alarms[-1]  # type: ignore[union-attr]
        assert alarm["status"] == 409 and "41" in alarm["message"]
        assert [f.kind for f in restarted.findings] == ["log_shorter_than_witnessed"]
        with pytest.raises(IntegrityHold):
            _fill(restarted, 1)
    # The witness's monitoring view still shows the longer tree.
    origin_hash = __import__("hashlib").sha256(ledger.origin.encode()).hexdigest()
    seen = loopback_http.get(f"{witness.url}/{origin_hash}/checkpoint", timeout=5)
    assert seen.status_code == 200 and seen.text.split("\n")[1] == "41"


def test_a_forked_log_of_the_same_size_is_refused(
    witness: WitnessProcess, ledger_config: LedgerConfig, raw_store: RawStore
) -> None:
    with _open(ledger_config, witness.setting) as ledger:
        _fill(ledger, 15)
        original = ledger.cosign(ledger.issue_checkpoint())  # type: ignore[arg-type]
        assert original.tree_size == 16 and original.note.count("\u2014 ") == 2
    _wipe_local_evidence(raw_store, above=10)
    with _open(ledger_config, witness.setting) as forked:
        _fill(forked, 6, query="something else entirely")
        fork = forked.cosign(forked.issue_checkpoint())  # type: ignore[arg-type]
        assert fork.tree_size == 16 and fork.root != original.root
        assert fork.note.count("\u2014 ") == 1
        assert forked.cosigner.alarms[-1]["status"] == 422  # type: ignore[union-attr]
        assert [f.kind for f in forked.findings] == ["witness_disagrees"]
        with pytest.raises(IntegrityHold):
            _fill(forked, 1)


def test_witness_restart_keeps_its_state(ledger_config: LedgerConfig, log_vkey: str, tmp_path: Path) -> None:
    witness = WitnessProcess(tmp_path / "w1", "witness.test/w1", log_vkey).start()
    try:
        with _open(ledger_config, witness.setting) as ledger:
            _fill(ledger, 12)
            record = ledger.cosign(ledger.issue_checkpoint())  # type: ignore[arg-type]
            assert record.note.count("\u2014 ") == 2
        witness.stop()
        witness.start()
        # A fresh client that knows nothing sends old 0: the restarted witness answers with its size.
        answer = loopback_http.post(
            witness.url + "/add-checkpoint", content=format_add_checkpoint(0, [], record.note)
        )
        assert answer.status_code == 409
        assert answer.headers["content-type"].startswith("text/x.tlog.size")
        assert answer.text == "13\n"
    finally:
        witness.stop()


def test_keys_route_and_cli_publish_vkeys(
    ledger_config: LedgerConfig,
    log_vkey: str,
    tmp_path: Path,
    make_api: Callable[..., Api],  # noqa: F811 - the fixture
) -> None:
    """GET /v1/keys and `citeledger vkey` give the log's and each witness's vkey, with
    key ids as signed-note computes them (parsing checks the id against name and key)."""
    witness = WitnessProcess(tmp_path / "w1", "witness.test/w1", log_vkey)  # not started: keys only
    config = LedgerConfig(**{**ledger_config.__dict__, "witnesses": witness.setting})
    api = make_api(ledger=config)
    body = api.client.get("/v1/keys", headers=api.headers("reader")).json()
    assert body["vkey"] == log_vkey == body["keys"][-1]["vkey"]
    name, public_raw = parse_verifier_key(body["vkey"])
    assert name == body["origin"] and base64.b64encode(public_raw).decode() == body["keys"][-1]["public_key"]
    assert body["witnesses"] == [{"name": "witness.test/w1", "vkey": witness.vkey, "url": witness.url}]
    assert parse_cosigner_vkey(witness.vkey).name == "witness.test/w1"
    env = server_env(config, "t-" + uuid.uuid4().hex, CITELEDGER_DATA_DIR=str(config.data_dir))
    printed = run_cli(["vkey"], env)
    assert printed.returncode == 0 and printed.stdout.strip() == log_vkey


def test_auditor_checks_bundles_and_exports_against_witness_keys_alone(
    witness: WitnessProcess, ledger_config: LedgerConfig, log_vkey: str, tmp_path: Path
) -> None:
    """verify-bundle and verify --export take --witness-key/--min-witnesses, say which
    witnesses cosigned, and fail on a checkpoint no trusted witness cosigned."""
    key_file = tmp_path / "w1.vkey"
    key_file.write_text(witness.vkey + "\n")
    stranger = WitnessProcess(tmp_path / "w2", "witness.test/w1", log_vkey)  # same name, other key
    stranger_file = tmp_path / "w2.vkey"
    stranger_file.write_text(stranger.vkey + "\n")
    with _open(ledger_config) as ledger:
        _fill(ledger, 10)
    root_pub = str(ledger_config.data_dir / "keys" / "root.pub")
    plain = server_env(ledger_config, "t", CITELEDGER_DATA_DIR=str(ledger_config.data_dir))
    witnessed = {**plain, "CITELEDGER_WITNESSES": witness.setting}
    check = ["verify-bundle", "--public-key", root_pub, "--witness-key", str(key_file)]

    assert run_cli(["bundle", "5", "--out", str(tmp_path / "alone.json")], plain).returncode == 0
    alone = run_cli([*check, "--min-witnesses", "1", str(tmp_path / "alone.json")], plain)
    assert alone.returncode == 1 and "cosigned by 0 of the 1 trusted witnesses" in alone.stderr + alone.stdout
    assert (
        run_cli(["verify-bundle", "--public-key", root_pub, str(tmp_path / "alone.json")], plain).returncode
        == 0
    )

    assert run_cli(["bundle", "5", "--out", str(tmp_path / "cosigned.json")], witnessed).returncode == 0
    ok = run_cli([*check, "--min-witnesses", "1", str(tmp_path / "cosigned.json")], plain)
    assert ok.returncode == 0, ok.stderr + ok.stdout
    assert "cosigned by 1 of 1 trusted witnesses: witness.test/w1" in ok.stderr + ok.stdout
    other = ["verify-bundle", "--public-key", root_pub, "--witness-key", str(stranger_file)]
    assert run_cli([*other, str(tmp_path / "cosigned.json")], plain).returncode == 1
    too_many = run_cli([*check, "--min-witnesses", "2", str(tmp_path / "cosigned.json")], plain)
    assert too_many.returncode == 2

    for kind in (["--tenant", TENANT], []):
        out = tmp_path / f"export{len(kind)}.jsonl"
        assert run_cli(["export", "--out", str(out), *kind], witnessed).returncode == 0
        verified = run_cli(
            ["verify", "--export", str(out), "--public-key", root_pub, "--witness-key", str(key_file)],
            plain,
        )
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert "cosigned by 1 of 1 trusted witnesses: witness.test/w1" in verified.stdout
        refused = run_cli(
            [
                "verify",
                "--export",
                str(out),
                "--public-key",
                root_pub,
                "--witness-key",
                str(stranger_file),
            ],
            plain,
        )
        assert refused.returncode == 1 and "cosigned by 0 of the 1" in refused.stdout


def test_a_witness_that_does_not_trust_the_key_is_alarmed_in_healthz(
    ledger_config: LedgerConfig,
    tmp_path: Path,
    make_api: Callable[..., Api],  # noqa: F811 - the fixture
) -> None:
    """A refusal that is not evidence against the log (403: the witness follows another key
    for this origin) still never passes silently: logged at ERROR and listed in healthz."""
    impostor = _open(LedgerConfig(data_dir=tmp_path / "other"))  # another log, its own store
    try:
        other_key = impostor.signing_key().public_raw
    finally:
        impostor.close()
    with _open(ledger_config) as ledger:
        wrong_vkey = verifier_key(ledger.origin, other_key)  # our origin, someone else's key
    with WitnessProcess(tmp_path / "w1", "witness.test/w1", wrong_vkey) as witness:
        config = LedgerConfig(
            **{**ledger_config.__dict__, "run_checkpointer": False, "witnesses": witness.setting}
        )
        api = make_api(ledger=config)
        services_ledger = api.services.ledger
        api.document()
        record = services_ledger.cosign(services_ledger.issue_checkpoint())
        assert record.note.count("\u2014 ") == 1  # not cosigned
        integrity = api.client.get("/v1/healthz").json()["integrity"]
        assert integrity["ok"] is True  # a witness that does not know our key proves nothing against us
        [alarm] = integrity["witness_alarms"]
        assert alarm["witness"] == "witness.test/w1" and alarm["status"] == 403


def test_verify_receipt_names_the_witnesses_that_cosigned(
    witness: WitnessProcess, ledger_config: LedgerConfig
) -> None:
    """The live integrity check (MCP `verify_receipt`, the console's badge) says which of the
    configured witnesses cosigned the checkpoint it checked against, each by its own key."""
    from ledger.usecases.receipts import verify_receipt
    from tests.factories import UseCases

    with _open(ledger_config, witness.setting) as ledger:
        cases = UseCases(ledger)
        receipt = cases.retrieve(cases.ingest())
        receipt_id = receipt.payload["receipt_id"]
        before = verify_receipt(cases.ctx, TENANT, receipt_id)
        assert before["intact"] and before["witnesses"]["configured"] == ["witness.test/w1"]
        ledger.cosign(ledger.issue_checkpoint())  # type: ignore[arg-type]
        after = verify_receipt(cases.ctx, TENANT, receipt_id)
        assert after["intact"] and after["witnesses"]["cosigned_by"] == ["witness.test/w1"]
