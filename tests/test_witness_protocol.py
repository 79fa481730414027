"""tlog-witness add-checkpoint checks and tlog-cosignature lines, as pure functions:
each refusal with the spec's status, cosignatures that verify only under the
witness's key and only over the exact checkpoint."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ledger.tlog.cosignature import (
    Witness,
    cosign,
    cosigner_vkey,
    open_cosignatures,
    parse_cosigner_vkey,
)
from ledger.tlog.merkle import EMPTY_ROOT, MerkleTree
from ledger.tlog.note import NoteError, checkpoint_body, sign_note
from ledger.tlog.witness_protocol import (
    AddCheckpoint,
    LogKey,
    WitnessRefusal,
    check_add_checkpoint,
    format_add_checkpoint,
    parse_add_checkpoint,
)

ORIGIN = "example.test/log"


def _raw(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


LOG_KEY = Ed25519PrivateKey.generate()
LOGS = {ORIGIN: LogKey(ORIGIN, ORIGIN, _raw(LOG_KEY))}
TREE = MerkleTree(bytes([i]) * 32 for i in range(20))


def _note(
    size: int, root: bytes | None = None, key: Ed25519PrivateKey = LOG_KEY, origin: str = ORIGIN
) -> str:
    return sign_note(
        checkpoint_body(origin, size, root if root is not None else TREE.root(size)), origin, key
    )


def _status(request: AddCheckpoint, latest: tuple[int, bytes] | None) -> int:
    with pytest.raises(WitnessRefusal) as refused:
        check_add_checkpoint(request, LOGS, latest)
    return refused.value.status


def test_consistent_checkpoints_pass() -> None:
    assert check_add_checkpoint(AddCheckpoint(0, (), _note(7)), LOGS, None).size == 7
    proof = tuple(TREE.consistency_proof(7, 20))
    assert check_add_checkpoint(AddCheckpoint(7, proof, _note(20)), LOGS, (7, TREE.root(7))).size == 20
    assert check_add_checkpoint(AddCheckpoint(20, (), _note(20)), LOGS, (20, TREE.root(20))).size == 20


def test_each_refusal_has_the_specs_status() -> None:
    latest = (7, TREE.root(7))
    proof = tuple(TREE.consistency_proof(7, 20))
    assert _status(AddCheckpoint(0, (), _note(7, origin="other.test/log")), None) == 404
    assert _status(AddCheckpoint(7, proof, _note(20, key=Ed25519PrivateKey.generate())), latest) == 403
    assert _status(AddCheckpoint(21, (), _note(20)), latest) == 400  # old above the checkpoint
    with pytest.raises(WitnessRefusal) as conflict:
        check_add_checkpoint(AddCheckpoint(3, tuple(TREE.consistency_proof(3, 20)), _note(20)), LOGS, latest)
    assert conflict.value.status == 409 and conflict.value.latest_size == 7
    assert _status(AddCheckpoint(0, (), _note(5)), latest) == 409  # rollback to a fresh start
    assert _status(AddCheckpoint(7, proof[::-1], _note(20)), latest) == 422  # proof does not verify
    forked = bytes(32)
    assert _status(AddCheckpoint(7, (), _note(7, root=forked)), latest) == 422  # same size, other root
    assert _status(AddCheckpoint(0, (), _note(0, root=forked)), None) == 422  # empty tree, wrong root
    assert check_add_checkpoint(AddCheckpoint(0, (), _note(0, root=EMPTY_ROOT)), LOGS, None).size == 0
    assert _status(AddCheckpoint(0, proof, _note(20)), None) == 422  # old 0 takes no proof


def test_request_body_round_trip_and_malformed_bodies() -> None:
    proof = TREE.consistency_proof(7, 20)
    body = format_add_checkpoint(7, proof, _note(20))
    parsed = parse_add_checkpoint(body)
    assert parsed.old_size == 7 and list(parsed.proof) == proof and parsed.note == _note(20)
    for bad in (
        b"old 07\n\n" + _note(1).encode(),
        b"old -1\n\n",
        b"new 1\n\n",
        b"old 1\nnot base64!\n\n",
        b"old 1\n",
    ):
        with pytest.raises(WitnessRefusal) as refused:
            parse_add_checkpoint(bad)
        assert refused.value.status == 400
    with pytest.raises(WitnessRefusal):
        parse_add_checkpoint(
            b"old 1\n" + b"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n" * 64 + b"\n" + _note(1).encode()
        )


def test_cosignatures_verify_only_for_the_witness_and_the_exact_checkpoint() -> None:
    key = Ed25519PrivateKey.generate()
    witness = parse_cosigner_vkey(cosigner_vkey("witness.test/w1", _raw(key)))
    note = _note(20)
    text = note[: note.index("\n\n") + 1]
    line = cosign(text, "witness.test/w1", key, 1_700_000_000)
    [found] = open_cosignatures(note + line, [witness])
    assert found.timestamp == 1_700_000_000 and found.line == line
    stranger = Witness("witness.test/w1", _raw(Ed25519PrivateKey.generate()))
    assert open_cosignatures(note + line, [stranger]) == []  # another key: ignored
    with pytest.raises(NoteError):  # the witness's name and key id, but another checkpoint
        open_cosignatures(_note(19) + line, [witness])
    with pytest.raises(NoteError):  # a log (type 0x01) key is not a witness key
        parse_cosigner_vkey(f"{ORIGIN}+00000000+" + "A" * 44)
