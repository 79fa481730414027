"""C2SP `tlog-cosignature` (Ed25519 `cosignature/v1`): a witness's statement that,
as of a time, the checkpoint is the largest consistent tree it has seen of a log.

A cosignature is a signed-note signature line

    — <witness name> base64(key ID || u64 big-endian timestamp || Ed25519 signature)

over the message `cosignature/v1\\ntime <timestamp>\\n<checkpoint note text>`, with
key ID SHA-256(name || 0x0A || 0x04 || public key)[:4]. Witness public keys are
published as vkeys with type 0x04. Pure functions, no storage.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ledger.tlog.note import (
    SIGNATURE_PREFIX,
    NoteError,
    _check_key_name,
    _ed25519_verifies,
    _raw_public_key,
    _split_note,
    key_id,
    parse_typed_vkey,
)

COSIGNATURE_TYPE = b"\x04"
HEADER = "cosignature/v1"
MAX_TIMESTAMP = 2**63 - 1


@dataclass(frozen=True)
class Witness:
    """A witness an auditor or the ledger trusts: its name and Ed25519 public key."""

    name: str
    public_raw: bytes

    @property
    def key_id(self) -> bytes:
        return cosigner_key_id(self.name, self.public_raw)

    @property
    def vkey(self) -> str:
        return cosigner_vkey(self.name, self.public_raw)


@dataclass(frozen=True)
class Cosignature:
    witness: str
    timestamp: int
    line: str


def cosigner_key_id(name: str, public_raw: bytes) -> bytes:
    return key_id(name, COSIGNATURE_TYPE, public_raw)


def cosigner_vkey(name: str, public_raw: bytes) -> str:
    """The witness's verifier key: name+hex(key ID)+base64(0x04 || public key)."""
    _check_key_name(name)
    key_b64 = base64.b64encode(COSIGNATURE_TYPE + public_raw).decode("ascii")
    return f"{name}+{cosigner_key_id(name, public_raw).hex()}+{key_b64}"


def parse_cosigner_vkey(vkey: str) -> Witness:
    """A witness vkey (type 0x04), its key ID checked against its name and key."""
    name, public_raw = parse_typed_vkey(
        vkey.strip(), COSIGNATURE_TYPE, "witness verifier key", "0x04-tagged (cosignature/v1)"
    )
    return Witness(name, public_raw)


def signed_message(note_text: str, timestamp: int) -> bytes:
    """What an Ed25519 cosignature signs: header, time line, the checkpoint's note text."""
    if not 0 < timestamp <= MAX_TIMESTAMP:
        raise ValueError("cosignature timestamp out of range")
    return f"{HEADER}\ntime {timestamp}\n{note_text}".encode()


def cosign(note_text: str, name: str, private_key: Ed25519PrivateKey, timestamp: int) -> str:
    """One cosignature line (with its newline) over a checkpoint's note text."""
    _check_key_name(name)
    signature = private_key.sign(signed_message(note_text, timestamp))
    blob = (
        cosigner_key_id(name, _raw_public_key(private_key.public_key()))
        + struct.pack(">Q", timestamp)
        + signature
    )
    return f"{SIGNATURE_PREFIX}{name} {base64.b64encode(blob).decode('ascii')}\n"


def open_cosignatures(note: str, witnesses: Sequence[Witness]) -> list[Cosignature]:
    """The valid cosignatures in `note` by the trusted `witnesses` (one per witness).

    Lines of other keys are ignored (the log's own signature among them); a line
    that carries a trusted witness's name and key ID but does not verify makes the
    note malformed (NoteError), as signed-note requires.
    """
    text, signatures = _split_note(note)
    by_id = {(w.name, w.key_id): w for w in witnesses}
    found: dict[str, Cosignature] = {}
    for name, blob in signatures:
        witness = by_id.get((name, blob[:4]))
        if witness is None:
            continue
        if len(blob) != 4 + 8 + 64:
            raise NoteError(f"cosignature by {name} has the wrong length")
        (timestamp,) = struct.unpack(">Q", blob[4:12])
        if not 0 < timestamp <= MAX_TIMESTAMP:
            raise NoteError(f"cosignature by {name} has an invalid timestamp")
        public_key = Ed25519PublicKey.from_public_bytes(witness.public_raw)
        if not _ed25519_verifies(public_key, blob[12:], signed_message(text, timestamp)):
            raise NoteError(f"invalid cosignature by {witness.vkey}")
        line = f"{SIGNATURE_PREFIX}{name} {base64.b64encode(blob).decode('ascii')}\n"
        found.setdefault(name, Cosignature(name, timestamp, line))
    return list(found.values())


def with_cosignatures(note: str, lines: Sequence[str]) -> str:
    """The note with extra signature lines appended (each ending in a newline)."""
    return note + "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def require_cosignatures(note: str, witnesses: Sequence[Witness], min_witnesses: int) -> list[Cosignature]:
    """The trusted witnesses' valid cosignatures on `note`; NoteError unless at least
    `min_witnesses` of them cosigned (what an auditor checks instead of trusting the log)."""
    found = open_cosignatures(note, witnesses)
    if len(found) < min_witnesses:
        names = ", ".join(c.witness for c in found) or "none"
        raise NoteError(
            f"checkpoint cosigned by {len(found)} of the {len(witnesses)} trusted witnesses ({names}); "
            f"at least {min_witnesses} required"
        )
    return found
