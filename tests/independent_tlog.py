"""An independent reading of the C2SP specs (signed-note, tlog-checkpoint,
tlog-cosignature, tlog-tiles) and RFC 6962/9162, written for the interop test from
the spec texts alone: it imports nothing from this project (only hashlib and
`cryptography`'s Ed25519), so a shared misreading cannot make both sides agree.

No PyPI package implementing these specs was found that we could vet, so this is
the "separate reimplementation" the issue allows."""

from __future__ import annotations

import base64
import hashlib
import struct

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


class Rejected(Exception):
    pass


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


# -- signed-note -------------------------------------------------------------------
def parse_vkey(vkey: str) -> tuple[str, bytes, int, bytes]:
    """name+hash+base64(type||key) -> (name, key id, type, key); the id is recomputed."""
    name, hash_hex, rest = vkey.split("+", 2)
    blob = base64.b64decode(rest)
    kind, key = blob[0], blob[1:]
    key_id = sha256(name.encode() + b"\n" + bytes([kind]) + key)[:4]
    if key_id.hex() != hash_hex:
        raise Rejected("vkey hash does not match")
    return name, key_id, kind, key


def split_note(note: str) -> tuple[str, list[tuple[str, bytes]]]:
    cut = note.rindex("\n\n")
    text, sigs = note[: cut + 1], note[cut + 2 :]
    lines = []
    for line in sigs.split("\n")[:-1]:
        if not line.startswith("\u2014 "):
            raise Rejected("bad signature line")
        name, b64 = line[2:].split(" ")
        lines.append((name, base64.b64decode(b64)))
    return text, lines


def signed_by(note: str, vkey: str, kind: int, wrong_kind: str, unsigned: str) -> tuple[str, bytes, bytes]:
    """(the note's text, the first signature line's blob by vkey's key, the key); refused as
    `wrong_kind` if vkey is not of type `kind`, as `unsigned` if no line is by its key."""
    name, key_id, vkey_kind, key = parse_vkey(vkey)
    if vkey_kind != kind:
        raise Rejected(wrong_kind)
    text, lines = split_note(note)
    for signer, blob in lines:
        if signer == name and blob[:4] == key_id:
            return text, blob, key
    raise Rejected(unsigned)


def verify_note(note: str, vkey: str) -> str:
    """The note's text if the vkey's Ed25519 (type 0x01) key signed it."""
    text, blob, key = signed_by(note, vkey, 0x01, "not an Ed25519 note key", "no signature by the log key")
    try:
        Ed25519PublicKey.from_public_bytes(key).verify(blob[4:], text.encode())
    except InvalidSignature:
        raise Rejected("bad log signature") from None
    return text


def verify_cosignature(note: str, vkey: str) -> int:
    """The timestamp of a valid cosignature/v1 by the witness vkey (type 0x04)."""
    text, blob, key = signed_by(note, vkey, 0x04, "not a cosignature/v1 key", "no cosignature by the witness")
    (timestamp,) = struct.unpack(">Q", blob[4:12])
    message = b"cosignature/v1\ntime " + str(timestamp).encode() + b"\n" + text.encode()
    try:
        Ed25519PublicKey.from_public_bytes(key).verify(blob[12:], message)
    except InvalidSignature:
        raise Rejected("bad cosignature") from None
    return timestamp


def checkpoint(text: str) -> tuple[str, int, bytes]:
    origin, size, root = text.split("\n")[:3]
    return origin, int(size), base64.b64decode(root)


# -- RFC 6962 Merkle tree over leaf hashes ------------------------------------------
def node(left: bytes, right: bytes) -> bytes:
    return sha256(b"\x01" + left + right)


def leaf(entry: bytes) -> bytes:
    return sha256(b"\x00" + entry)


def mth(hashes: list[bytes]) -> bytes:
    if not hashes:
        return sha256(b"")
    if len(hashes) == 1:
        return hashes[0]
    k = 1
    while k * 2 < len(hashes):
        k *= 2
    return node(mth(hashes[:k]), mth(hashes[k:]))


def path(m: int, hashes: list[bytes]) -> list[bytes]:
    """RFC 6962 2.1.1 PATH(m, D[n]) over leaf hashes."""
    if len(hashes) <= 1:
        return []
    k = 1
    while k * 2 < len(hashes):
        k *= 2
    if m < k:
        return [*path(m, hashes[:k]), mth(hashes[k:])]
    return [*path(m - k, hashes[k:]), mth(hashes[:k])]


def root_from_inclusion(index: int, size: int, leaf_hash: bytes, proof: list[bytes]) -> bytes:
    """RFC 9162 2.1.3.2 verification: the root the proof leads to."""
    fn, sn, r = index, size - 1, leaf_hash
    for p in proof:
        if sn == 0:
            raise Rejected("proof too long")
        if fn & 1 or fn == sn:
            r = node(p, r)
            while not fn & 1 and fn:
                fn >>= 1
                sn >>= 1
        else:
            r = node(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise Rejected("proof too short")
    return r


# -- tlog-tiles --------------------------------------------------------------------
def tile_index(n: int) -> str:
    text = f"{n:d}"
    text = "0" * (-len(text) % 3) + text
    groups = [text[i : i + 3] for i in range(0, len(text), 3)]
    return "/".join(["x" + g for g in groups[:-1]] + [groups[-1]])


def tile_url(level: int | str, n: int, width: int) -> str:
    return f"tile/{level}/{tile_index(n)}" + ("" if width == 256 else f".p/{width}")


def split_hashes(data: bytes) -> list[bytes]:
    if len(data) % 32:
        raise Rejected("tile is not a whole number of hashes")
    return [data[i : i + 32] for i in range(0, len(data), 32)]


def entries_of_bundle(data: bytes) -> list[bytes]:
    out, at = [], 0
    while at < len(data):
        (length,) = struct.unpack(">H", data[at : at + 2])
        out.append(data[at + 2 : at + 2 + length])
        at += 2 + length
    return out
