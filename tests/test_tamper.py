"""Tampering with the real store (SQLite file, PostgreSQL tables) is detected
by `verify`, which names the first bad position."""

from __future__ import annotations

import base64
import json

import orjson
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.evidence.verify import Finding
from ledger.storage.audit import verify_store
from ledger.storage.store import CHECKPOINT_STREAM_ID, LEDGER_STREAM_ID
from ledger.tlog.checkpoints import CheckpointRecord, make_checkpoint
from ledger.tlog.signing import SigningKey, kid_for, public_raw_of
from ledger.writing.application import Ledger
from tests.conftest import RawStore
from tests.factories import TENANT, retrieval_draft
from tests.server_process import run_cli


def _fill(ledger: Ledger, count: int = 9, checkpoint: bool = True) -> None:
    ledger.append_batch([retrieval_draft(ledger) for _ in range(count)], tenant_id=TENANT)
    if checkpoint:
        ledger.issue_checkpoint()


def _state(raw: RawStore, stream: object, version: int) -> bytes:
    rows = raw.execute(
        "SELECT state FROM stored_events WHERE originator_id=? AND originator_version=?",
        (raw.stream_value(stream), version),  # type: ignore[arg-type]
    )
    return bytes(rows[0][0])


def _set_state(raw: RawStore, stream: object, version: int, state: bytes) -> None:
    raw.execute(
        "UPDATE stored_events SET state=? WHERE originator_id=? AND originator_version=?",
        (state, raw.stream_value(stream), version),  # type: ignore[arg-type]
    )


def _delete(raw: RawStore, stream: object, version: int) -> None:
    raw.execute(
        "DELETE FROM stored_events WHERE originator_id=? AND originator_version=?",
        (raw.stream_value(stream), version),  # type: ignore[arg-type]
    )


def _first_bad(ledger: Ledger) -> Finding:
    report = verify_store(ledger.store, ledger.root_public_key)
    assert not report.ok, "tampering went undetected"
    assert report.first_bad is not None
    return report.first_bad


def test_clean_store_verifies(ledger: Ledger) -> None:
    _fill(ledger)
    report = verify_store(ledger.store, ledger.root_public_key)
    assert report.ok and report.entries == 10 and report.covered == 10


def test_one_changed_byte_is_named(ledger: Ledger, raw_store: RawStore) -> None:
    _fill(ledger)
    state = bytearray(_state(raw_store, LEDGER_STREAM_ID, 4))
    at = state.index(b'"context_hash":"') + len(b'"context_hash":"')
    state[at] = ord("0") if state[at] != ord("0") else ord("1")
    _set_state(raw_store, LEDGER_STREAM_ID, 4, bytes(state))
    assert _first_bad(ledger).position == 4


def test_changed_byte_in_the_newest_covered_entry_is_named(ledger: Ledger, raw_store: RawStore) -> None:
    _fill(ledger)
    state = _state(raw_store, LEDGER_STREAM_ID, 10).replace(b'"status":"ok"', b'"status":"no_hit"')
    _set_state(raw_store, LEDGER_STREAM_ID, 10, state)
    finding = _first_bad(ledger)
    assert finding.position == 10 and "signature" in finding.problem


def test_changed_byte_in_a_pending_entry_is_named(ledger: Ledger, raw_store: RawStore) -> None:
    _fill(ledger)
    ledger.append(retrieval_draft(ledger), tenant_id=TENANT)
    state = _state(raw_store, LEDGER_STREAM_ID, 11).replace(b'"status":"ok"', b'"status":"error"')
    _set_state(raw_store, LEDGER_STREAM_ID, 11, state)
    assert _first_bad(ledger).position == 11


@pytest.mark.parametrize(
    ("deleted", "position", "named"),
    [
        pytest.param((5,), 5, "missing", id="one-row"),
        pytest.param((6, 7), 6, "6..7", id="two-consecutive-rows"),
        pytest.param((10,), 10, "missing", id="newest-row-under-a-checkpoint"),
    ],
)
def test_deleted_rows_are_named(
    ledger: Ledger, raw_store: RawStore, deleted: tuple[int, ...], position: int, named: str
) -> None:
    _fill(ledger)
    for version in deleted:
        _delete(raw_store, LEDGER_STREAM_ID, version)
    finding = _first_bad(ledger)
    assert finding.position == position and named in finding.problem


def test_swapped_rows_are_named(ledger: Ledger, raw_store: RawStore) -> None:
    _fill(ledger)
    three, seven = _state(raw_store, LEDGER_STREAM_ID, 3), _state(raw_store, LEDGER_STREAM_ID, 7)
    _set_state(raw_store, LEDGER_STREAM_ID, 3, seven)
    _set_state(raw_store, LEDGER_STREAM_ID, 7, three)
    finding = _first_bad(ledger)
    assert finding.position == 3 and "position 7" in finding.problem


def test_forged_row_is_named(ledger: Ledger, raw_store: RawStore) -> None:
    _fill(ledger)
    head = orjson.loads(_state(raw_store, LEDGER_STREAM_ID, 10))
    forged = dict(head, position=11, prev_hash=ledger.head_hash, event_id="f" * 32)
    forger = Ed25519PrivateKey.generate()
    forged["signature"] = base64.b64encode(forger.sign(b"anything")).decode()
    raw_store.execute(
        "INSERT INTO stored_events (originator_id, originator_version, topic, state) VALUES (?,?,?,?)",
        (
            raw_store.stream_value(LEDGER_STREAM_ID),
            11,
            "citeledger:event:RetrievalRecorded",
            orjson.dumps(forged, option=orjson.OPT_SORT_KEYS),
        ),  # type: ignore[arg-type]
    )
    finding = _first_bad(ledger)
    assert finding.position == 11 and "signature" in finding.problem


def test_row_outside_the_ledger_streams_is_reported(ledger: Ledger, raw_store: RawStore) -> None:
    _fill(ledger)
    import uuid

    raw_store.execute(
        "INSERT INTO stored_events (originator_id, originator_version, topic, state) VALUES (?,?,?,?)",
        (raw_store.stream_value(uuid.uuid4()), 1, "x", b"{}"),  # type: ignore[arg-type]
    )
    assert "not part of the ledger" in _first_bad(ledger).problem


def _forger_key() -> SigningKey:
    private = Ed25519PrivateKey.generate()
    public_raw = public_raw_of(private)
    return SigningKey(kid=kid_for(public_raw), public_raw=public_raw, private=private)


def _forged(origin: str, like: CheckpointRecord, root: bytes) -> CheckpointRecord:
    """A checkpoint of `like`'s size and time over `root`, signed by a key the log never had."""
    return make_checkpoint(
        seq=1, origin=origin, tree_size=like.tree_size, root=root, issued_at=like.issued_at, key=_forger_key()
    )


def test_replaced_checkpoint_is_named(ledger: Ledger, raw_store: RawStore) -> None:
    _fill(ledger)
    original = CheckpointRecord.from_bytes(_state(raw_store, CHECKPOINT_STREAM_ID, 1))
    forged = _forged(ledger.origin, original, b"\x11" * 32)
    forged = CheckpointRecord(**{**forged.__dict__, "kid": original.kid})
    _set_state(raw_store, CHECKPOINT_STREAM_ID, 1, forged.to_bytes())
    finding = _first_bad(ledger)
    assert finding.checkpoint_seq == 1 and finding.position == 10 and "checkpoint" in finding.problem


def test_deleted_checkpoint_is_named(ledger: Ledger, raw_store: RawStore) -> None:
    _fill(ledger, 4)
    _fill(ledger, 4)
    _fill(ledger, 4)
    _delete(raw_store, CHECKPOINT_STREAM_ID, 2)
    finding = _first_bad(ledger)
    assert finding.checkpoint_seq == 2 and finding.position == 6 and "missing" in finding.problem


def test_swapped_public_key_file_is_detected_by_the_cli(ledger: Ledger) -> None:
    _fill(ledger)
    config = ledger.config
    ledger.close()
    env_args = ["--data-dir", str(config.data_dir)]
    env = {"PATH": "/usr/bin:/bin", "CITELEDGER_DATABASE_URL": config.database_url or ""}
    clean = run_cli(["verify", *env_args], env)
    assert clean.returncode == 0, clean.stderr
    other = base64.b64encode(public_raw_of(Ed25519PrivateKey.generate())).decode()
    (config.keys_dir / "root.pub").write_text(other + "\n")
    swapped = run_cli(["verify", "--json", *env_args], env)
    assert swapped.returncode == 1
    summary = json.loads(swapped.stdout)
    assert summary["first_bad_position"] == 1 and "trusted public key" in summary["problem"]


@pytest.mark.parametrize("backend", ["postgres"], indirect=False)
def test_postgres_sequence_gap_is_not_a_deleted_row(ledger: Ledger, raw_store: RawStore) -> None:
    """A rolled-back insert burns a bigserial id; verify must stay clean."""
    _fill(ledger, 3)
    before = raw_store.execute("SELECT max(notification_id) FROM stored_events")[0][0]
    # Another writer racing for position 5 loses on the unique constraint: its id is burned.
    duplicate = _state(raw_store, LEDGER_STREAM_ID, 4)
    with pytest.raises(Exception, match="duplicate key"):
        raw_store.execute(
            "INSERT INTO stored_events (originator_id, originator_version, topic, state) VALUES (?,?,?,?)",
            (LEDGER_STREAM_ID, 4, "citeledger:event:RetrievalRecorded", duplicate),  # type: ignore[arg-type]
        )
    ledger.append(retrieval_draft(ledger), tenant_id=TENANT)
    ledger.issue_checkpoint()
    ids = [
        row[0]
        for row in raw_store.execute(
            "SELECT notification_id FROM stored_events WHERE originator_id=? ORDER BY notification_id",
            (LEDGER_STREAM_ID,),  # type: ignore[arg-type]
        )
    ]
    assert ids[-1] > before + 1, "expected a gap in the notification ids"
    assert verify_store(ledger.store, ledger.root_public_key, deep=True).ok


def test_truncation_with_its_checkpoint_is_caught_by_a_held_checkpoint(
    ledger: Ledger, raw_store: RawStore
) -> None:
    _fill(ledger, 4)
    _fill(ledger, 4)  # checkpoint #2 covers 9 entries
    held = ledger.latest_checkpoint()
    assert held is not None and held.tree_size == 9
    assert verify_store(ledger.store, ledger.root_public_key, held=[held.note]).ok
    # An attacker with database access drops the newest entries and the checkpoint covering them.
    for position in (6, 7, 8, 9):
        _delete(raw_store, LEDGER_STREAM_ID, position)
    _delete(raw_store, CHECKPOINT_STREAM_ID, 2)
    assert verify_store(ledger.store, ledger.root_public_key).ok  # undetectable from the store alone
    report = verify_store(ledger.store, ledger.root_public_key, held=[held.note])
    assert not report.ok and report.first_bad is not None
    assert report.first_bad.position == 6 and "held checkpoint" in report.first_bad.problem


def test_rewritten_history_is_caught_by_a_held_checkpoint(ledger: Ledger, raw_store: RawStore) -> None:
    _fill(ledger, 4)
    held = ledger.latest_checkpoint()
    assert held is not None
    forged = _forged(ledger.origin, held, b"\x22" * 32)
    report = verify_store(ledger.store, ledger.root_public_key, held=[forged.note])
    assert (
        not report.ok and report.first_bad is not None and "not signed by any key" in report.first_bad.problem
    )
