"""Signed checkpoints: C2SP `tlog-checkpoint` notes over the log's Merkle root.

Checkpoints are kept in their own `eventsourcing` stream, whose versions are
the checkpoint sequence numbers: a deleted checkpoint leaves a visible gap,
and two processes issuing at once are serialised by optimistic concurrency.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import orjson

from ledger.tlog.canonical import canonical_json
from ledger.tlog.note import Checkpoint, NoteError, checkpoint_body, open_checkpoint, sign_note
from ledger.tlog.signing import SigningKey


def origin_for(root_public_raw: bytes) -> str:
    """The log's origin line, derived from its trust root so it needs no storage."""
    return "citeledger.local/" + hashlib.sha256(root_public_raw).hexdigest()[:16]


@dataclass(frozen=True)
class CheckpointRecord:
    seq: int
    tree_size: int
    root: bytes
    issued_at: str
    kid: str
    note: str

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "tree_size": self.tree_size,
            "root": self.root.hex(),
            "issued_at": self.issued_at,
            "kid": self.kid,
            "note": self.note,
        }

    def to_bytes(self) -> bytes:
        return canonical_json(self.to_json())

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> CheckpointRecord:
        return cls(
            seq=int(value["seq"]),
            tree_size=int(value["tree_size"]),
            root=bytes.fromhex(str(value["root"])),
            issued_at=str(value["issued_at"]),
            kid=str(value["kid"]),
            note=str(value["note"]),
        )

    @classmethod
    def from_bytes(cls, state: bytes) -> CheckpointRecord:
        return cls.from_json(orjson.loads(state))


def make_checkpoint(
    *, seq: int, origin: str, tree_size: int, root: bytes, issued_at: str, key: SigningKey
) -> CheckpointRecord:
    body = checkpoint_body(origin, tree_size, root, extensions=(f"time {issued_at}",))
    note = sign_note(body, origin, key.private)
    return CheckpointRecord(
        seq=seq, tree_size=tree_size, root=root, issued_at=issued_at, kid=key.kid, note=note
    )


def open_record(record: CheckpointRecord, origin: str, public_keys: dict[str, bytes]) -> Checkpoint:
    """Verify a checkpoint record's note against the known keys.

    The note must be signed by the key the record names, that key must be
    known, and the signed size and root must equal the record's fields.
    Raises NoteError naming what is wrong.
    """
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    public_raw = public_keys.get(record.kid)
    if public_raw is None:
        raise NoteError(f"signed by unknown key {record.kid}")
    checkpoint = open_checkpoint(
        record.note, origin, Ed25519PublicKey.from_public_bytes(public_raw), origin=origin
    )
    if checkpoint.size != record.tree_size or checkpoint.root != record.root:
        raise NoteError("record's size or root differs from the signed note")
    return checkpoint
