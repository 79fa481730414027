"""C2SP signed notes (https://c2sp.org/signed-note) carrying tlog checkpoints.

Only Ed25519 (signature type 0x01) is supported. A checkpoint
(https://c2sp.org/tlog-checkpoint) is the note text

    <origin>\\n<decimal tree size>\\n<base64 root hash>\\n[<extension line>\\n ...]

followed by a blank line and one signature line per signer:

    — <key name> base64(4-byte key ID || 64-byte Ed25519 signature)\\n
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

ED25519_TYPE = b"\x01"
ROOT_SIZE = 32
# The spec asks verifiers to bound notes but accept at least 16 signatures;
# 100 lines is golang.org/x/mod/sumdb/note's limit.
MAX_NOTE_BYTES = 64 * 1024
MAX_SIGNATURES = 100
MAX_TREE_SIZE = 2**64 - 1  # tree sizes are uint64 in every implementation

SIGNATURE_PREFIX = "\u2014 "  # em dash, space
_SIZE_RE = re.compile(r"0|[1-9][0-9]*")  # ASCII digits only, no sign or leading zero
_KEY_HASH_RE = re.compile(r"[0-9a-f]{8}")


class NoteError(ValueError):
    """A note or checkpoint is malformed or not signed by the expected key."""


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    """Strict standard base64: alphabet, padding and canonical trailing bits."""
    try:
        data = base64.b64decode(text.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error):
        raise NoteError(f"{what} is not valid base64") from None
    if _b64(data) != text:
        raise NoteError(f"{what} is not canonical base64")
    return data


def _is_valid_key_name(name: str) -> bool:
    """Non-empty, no Unicode spaces, no '+' (signed-note, "Key names")."""
    return bool(name) and "+" not in name and not any(ch.isspace() for ch in name)


def _has_control_characters(text: str) -> bool:
    return any(ch < " " and ch != "\n" for ch in text)


def _check_key_name(name: str) -> None:
    if not _is_valid_key_name(name):
        raise ValueError(f"invalid key name {name!r}: empty, or contains a space or '+'")


def _check_line(line: str, what: str) -> None:
    if not line or "\n" in line or _has_control_characters(line):
        raise ValueError(f"{what} must be a non-empty line without control characters")


def _raw_public_key(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def checkpoint_body(origin: str, size: int, root: bytes, extensions: Sequence[str] = ()) -> str:
    """The checkpoint note text: origin, size, base64 root, extension lines."""
    _check_line(origin, "origin")
    if not 0 <= size <= MAX_TREE_SIZE:
        raise ValueError(f"tree size {size} out of range")
    if len(root) != ROOT_SIZE:
        raise ValueError(f"root hash must be {ROOT_SIZE} bytes")
    for extension in extensions:
        _check_line(extension, "extension line")
    lines = [origin, str(size), _b64(root), *extensions]
    return "".join(line + "\n" for line in lines)


def key_id(name: str, key_type: bytes, public_key_raw: bytes) -> bytes:
    """A signed-note key ID: SHA-256(name || 0x0A || type || public key)[:4]."""
    if len(public_key_raw) != 32:
        raise ValueError("an Ed25519 public key is 32 bytes")
    return hashlib.sha256(name.encode("utf-8") + b"\n" + key_type + public_key_raw).digest()[:4]


def key_hash(name: str, public_key_raw: bytes) -> bytes:
    """Ed25519 key ID: SHA-256(name || 0x0A || 0x01 || public key)[:4]."""
    return key_id(name, ED25519_TYPE, public_key_raw)


def verifier_key(name: str, public_key_raw: bytes) -> str:
    """The vkey encoding: name+hex(key ID)+base64(0x01 || public key)."""
    _check_key_name(name)
    return f"{name}+{key_hash(name, public_key_raw).hex()}+{_b64(ED25519_TYPE + public_key_raw)}"


def parse_typed_vkey(vkey: str, key_type: bytes, what: str, tagged: str) -> tuple[str, bytes]:
    """Parse a vkey of one key type into (name, raw Ed25519 public key), checking its key
    ID; `what` names the key and `tagged` its type in the errors."""
    # Names cannot contain '+', but base64 can: split at the first two only.
    parts = vkey.split("+", 2)
    if len(parts) != 3:
        raise NoteError(f"{what} must be name+keyhash+key")
    name, hash_hex, key_b64 = parts
    if not _is_valid_key_name(name):
        raise NoteError(f"{what} has an invalid name {name!r}")
    if not _KEY_HASH_RE.fullmatch(hash_hex):
        raise NoteError(f"{what} hash must be 8 lowercase hex digits")
    key = _unb64(key_b64, f"{what} material")
    if len(key) != 33 or key[:1] != key_type:
        raise NoteError(f"{what} is not a {tagged} Ed25519 key")
    public_raw = key[1:]
    if key_id(name, key_type, public_raw).hex() != hash_hex:
        raise NoteError(f"{what} hash does not match its name and key")
    return name, public_raw


def parse_verifier_key(vkey: str) -> tuple[str, bytes]:
    """Parse a vkey into (name, raw Ed25519 public key), checking its key ID."""
    return parse_typed_vkey(vkey, ED25519_TYPE, "verifier key", "0x01-tagged 32-byte")


def sign_note(body: str, name: str, private_key: Ed25519PrivateKey) -> str:
    """Sign `body` (which must end in a newline) as a one-signature note."""
    _check_key_name(name)
    if not body.endswith("\n"):
        raise ValueError("note text must end with a newline")
    if _has_control_characters(body):
        raise ValueError("note text must not contain control characters other than newline")
    public_raw = _raw_public_key(private_key.public_key())
    signature = private_key.sign(body.encode("utf-8"))
    blob = _b64(key_hash(name, public_raw) + signature)
    return f"{body}\n{SIGNATURE_PREFIX}{name} {blob}\n"


def _split_note(note: str) -> tuple[str, list[tuple[str, bytes]]]:
    """Split a signed note into its text and (key name, signature blob) pairs."""
    try:
        encoded = note.encode("utf-8")
    except UnicodeEncodeError:
        raise NoteError("note is not valid UTF-8") from None
    if len(encoded) > MAX_NOTE_BYTES:
        raise NoteError(f"note is larger than {MAX_NOTE_BYTES} bytes")
    if _has_control_characters(note):
        raise NoteError("note contains control characters other than newline")
    if not note.endswith("\n"):
        raise NoteError("note does not end with a newline")
    # The text ends at the last blank line: it keeps its own final newline.
    split = note.rfind("\n\n")
    if split < 0:
        raise NoteError("note has no blank line between text and signatures")
    text, block = note[: split + 1], note[split + 2 :]
    if text == "\n":
        raise NoteError("note text is empty")
    lines = block[:-1].split("\n") if block else []
    if not lines:
        raise NoteError("note has no signature lines")
    if len(lines) > MAX_SIGNATURES:
        raise NoteError(f"note has more than {MAX_SIGNATURES} signature lines")
    signatures: list[tuple[str, bytes]] = []
    for number, line in enumerate(lines, start=1):
        if not line.startswith(SIGNATURE_PREFIX):
            raise NoteError(f"signature line {number} does not start with an em dash and space")
        name, _, blob_b64 = line[len(SIGNATURE_PREFIX) :].partition(" ")
        if not _is_valid_key_name(name):
            raise NoteError(f"signature line {number} has an invalid key name {name!r}")
        blob = _unb64(blob_b64, f"signature line {number}")
        if len(blob) < 5:
            raise NoteError(f"signature line {number} is too short")
        signatures.append((name, blob))
    return text, signatures


def _ed25519_verifies(public_key: Ed25519PublicKey, signature: bytes, message: bytes) -> bool:
    if len(signature) != 64:
        return False
    try:
        public_key.verify(signature, message)
    except InvalidSignature:
        return False
    return True


def open_note(note: str, name: str, public_key: Ed25519PublicKey) -> str:
    """Return the note's text once a signature by (name, public_key) verifies.

    Signatures from other keys (other name or other key ID) are ignored, as
    the spec requires, so witness cosignatures may ride along. A signature
    line that does carry this key's name and ID but fails to verify rejects
    the whole note.
    """
    _check_key_name(name)
    text, signatures = _split_note(note)
    expected_id = key_hash(name, _raw_public_key(public_key))
    message = text.encode("utf-8")
    verified = False
    other_ids: list[str] = []
    for signer, blob in signatures:
        if signer != name:
            continue
        if blob[:4] != expected_id:
            other_ids.append(blob[:4].hex())
            continue
        if not _ed25519_verifies(public_key, blob[4:], message):
            raise NoteError(f"invalid signature for key {name}+{expected_id.hex()}")
        verified = True
    if not verified:
        detail = f" (lines for {name} carry key IDs {', '.join(other_ids)})" if other_ids else ""
        raise NoteError(f"note has no signature by key {name}+{expected_id.hex()}{detail}")
    return text


def parse_checkpoint_body(text: str) -> Checkpoint:
    """Parse checkpoint note text strictly (c2sp.org/tlog-checkpoint)."""
    if not text.endswith("\n"):
        raise NoteError("checkpoint text does not end with a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise NoteError("checkpoint needs origin, size and root lines")
    if any(not line for line in lines):
        raise NoteError("checkpoint has an empty line")
    origin, size_text, root_text, *extensions = lines
    if not _SIZE_RE.fullmatch(size_text):
        raise NoteError(f"tree size {size_text!r} is not a canonical decimal number")
    size = int(size_text)
    if size > MAX_TREE_SIZE:
        raise NoteError(f"tree size {size_text} is too large")
    root = _unb64(root_text, "root hash")
    if len(root) != ROOT_SIZE:
        raise NoteError(f"root hash is {len(root)} bytes, not {ROOT_SIZE}")
    return Checkpoint(origin=origin, size=size, root=root, extensions=tuple(extensions))


def open_checkpoint(
    note: str, name: str, public_key: Ed25519PublicKey, *, origin: str | None = None
) -> Checkpoint:
    """Verify `note` against (name, public_key), then parse its checkpoint.

    The text is only parsed after a signature verifies (signed-note: text
    from an unverified note must be ignored). When `origin` is given the
    checkpoint's origin line must equal it; the key name need not, as with
    sum.golang.org, whose key name differs from its origin.
    """
    checkpoint = parse_checkpoint_body(open_note(note, name, public_key))
    if origin is not None and checkpoint.origin != origin:
        raise NoteError(f"checkpoint origin {checkpoint.origin!r} is not {origin!r}")
    return checkpoint
