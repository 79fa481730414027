"""ledger.tlog.note: C2SP signed notes and tlog checkpoints.

Besides round trips, the format is checked against notes produced by other
implementations: golang.org/x/mod/sumdb/note's own test vectors (the
PeterNeumann and EnochRoot keys) and a real sum.golang.org checkpoint used in
github.com/transparency-dev/formats log/note_test.go.
"""

from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.tlog.note import (
    MAX_NOTE_BYTES,
    MAX_SIGNATURES,
    Checkpoint,
    NoteError,
    checkpoint_body,
    key_hash,
    open_checkpoint,
    open_note,
    parse_checkpoint_body,
    parse_verifier_key,
    sign_note,
    verifier_key,
)

# -- golang.org/x/mod/sumdb/note note_test.go --------------------------------------
PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
ENOCH_VKEY = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
GO_TEXT = (
    "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n"
)
PETER_SIG = (
    "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngot"
    "pRZb6KE6RyyBwJnAM=\n"
)
ENOCH_SIG = (
    "— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox3"
    "3WWd1RvMc+QQ=\n"
)

# -- transparency-dev/formats log/note_test.go: a checkpoint signed by sum.golang.org
SUMDB_VKEY = "sum.golang.org+033de0ae+Ac4zctda0e5eza+HJyk9SxEdh+s3Ux18htTTAD8OuAn8"
SUMDB_NOTE = (
    "go.sum database tree\n"
    "6476701\n"
    "mb8QLQIs0Z0yP5Cstq6guj87oXWeC9gEM8oVikmm9Wk=\n"
    "\n"
    "— sum.golang.org Az3grsLX85Gz+s1SiTbgkuqxgItqFq7gsMUEyVnrsa9LM7Us9S+1xbFIGu95949rj4nPRYfvimW"
    "EPWL+o3GeoWwOoAw=\n"
)


def _public(vkey: str) -> tuple[str, Ed25519PublicKey]:
    name, raw = parse_verifier_key(vkey)
    return name, Ed25519PublicKey.from_public_bytes(raw)


def _raw(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def _go_signer(skey: str) -> tuple[str, Ed25519PrivateKey]:
    """Parse Go's PRIVATE+KEY+name+hash+base64(0x01 || seed) encoding."""
    _, _, name, hash_hex, key_b64 = skey.split("+", 4)
    key = base64.b64decode(key_b64)
    assert key[0] == 1 and len(key) == 33
    private = Ed25519PrivateKey.from_private_bytes(key[1:])
    assert key_hash(name, _raw(private.public_key())).hex() == hash_hex
    return name, private


# -- known vectors ----------------------------------------------------------------
def test_go_verifier_key_round_trips() -> None:
    name, raw = parse_verifier_key(PETER_VKEY)
    assert name == "PeterNeumann"
    assert key_hash(name, raw) == bytes.fromhex("c74f20a3")
    assert verifier_key(name, raw) == PETER_VKEY
    name, raw = parse_verifier_key(ENOCH_VKEY)
    assert (name, key_hash(name, raw).hex()) == ("EnochRoot", "af0cfe78")
    assert verifier_key(name, raw) == ENOCH_VKEY


def test_sign_reproduces_go_note_byte_for_byte() -> None:
    # Ed25519 is deterministic, so the exact bytes Go produced must come out.
    name, private = _go_signer(PETER_SKEY)
    assert sign_note(GO_TEXT, name, private) == GO_TEXT + "\n" + PETER_SIG
    assert verifier_key(name, _raw(private.public_key())) == PETER_VKEY


def test_go_note_opens_and_cosignatures_are_ignored_or_checked() -> None:
    peter, enoch = _public(PETER_VKEY), _public(ENOCH_VKEY)
    both = GO_TEXT + "\n" + PETER_SIG + ENOCH_SIG
    assert open_note(GO_TEXT + "\n" + PETER_SIG, *peter) == GO_TEXT
    assert open_note(both, *peter) == GO_TEXT  # Enoch's line is an unknown key here
    assert open_note(both, *enoch) == GO_TEXT
    with pytest.raises(NoteError, match="no signature by key EnochRoot"):
        open_note(GO_TEXT + "\n" + PETER_SIG, *enoch)
    # A line from the known key that fails to verify rejects the whole note.
    broken = PETER_SIG.encode()
    broken_sig = (broken[:60] + b"ABCD" + broken[60:]).decode()
    with pytest.raises(NoteError, match="invalid signature for key PeterNeumann\\+c74f20a3"):
        open_note(GO_TEXT + "\n" + PETER_SIG + broken_sig, *peter)
    # Other name, or right name with another key ID: unknown keys, so nothing verifies.
    misnamed = PETER_SIG.replace("PeterNeumann", "CarmenSandiego")
    with pytest.raises(NoteError, match="no signature by key PeterNeumann"):
        open_note(GO_TEXT + "\n" + misnamed, *peter)
    wrong_id = PETER_SIG.replace("x08g", "xxxx")
    with pytest.raises(NoteError, match="carry key IDs c71c71a3"):
        open_note(GO_TEXT + "\n" + wrong_id, *peter)


@pytest.mark.parametrize(
    "note",
    [
        GO_TEXT,
        GO_TEXT + "\n",
        GO_TEXT + "\n" + PETER_SIG[:-1],
        "\x01" + GO_TEXT + "\n" + PETER_SIG,
        GO_TEXT + "\n" + "— Bad Name " + PETER_SIG.split(" ")[2],
        GO_TEXT + "\n" + PETER_SIG + "Unexpected line.\n",
        GO_TEXT + "\n" + PETER_SIG * (MAX_SIGNATURES + 1),
    ],
)
def test_go_malformed_notes_are_rejected(note: str) -> None:
    with pytest.raises(NoteError):
        open_note(note, *_public(PETER_VKEY))


def test_go_mangled_verifier_keys_are_rejected() -> None:
    for i in range(len(PETER_VKEY) + 1):
        for j in range(i + 1, len(PETER_VKEY) + 1):
            if (i, j) != (0, len(PETER_VKEY)):
                with pytest.raises(NoteError):
                    parse_verifier_key(PETER_VKEY[i:j])
    for i in range(len(PETER_VKEY)):
        mangled = PETER_VKEY[:i] + chr(ord(PETER_VKEY[i]) + 1) + PETER_VKEY[i + 1 :]
        with pytest.raises(NoteError):
            parse_verifier_key(mangled)
    for vkey in (
        # wrong length key and unknown algorithm, each with an adjusted key hash
        "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==",
        "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        "PeterNeumann+C74F20A3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
    ):
        with pytest.raises(NoteError):
            parse_verifier_key(vkey)


def test_real_sum_golang_org_checkpoint() -> None:
    name, public = _public(SUMDB_VKEY)
    checkpoint = open_checkpoint(SUMDB_NOTE, name, public)
    assert checkpoint == Checkpoint(
        origin="go.sum database tree",
        size=6476701,
        root=base64.b64decode("mb8QLQIs0Z0yP5Cstq6guj87oXWeC9gEM8oVikmm9Wk="),
        extensions=(),
    )
    assert open_checkpoint(SUMDB_NOTE, name, public, origin="go.sum database tree") == checkpoint
    with pytest.raises(NoteError, match="origin"):
        open_checkpoint(SUMDB_NOTE, name, public, origin="sum.golang.org")
    with pytest.raises(NoteError, match="invalid signature"):
        open_checkpoint(SUMDB_NOTE.replace("6476701", "6476702"), name, public)


# -- own keys ---------------------------------------------------------------------
ORIGIN = "citeledger.local/0123456789abcdef"
ROOT = hashlib.sha256(b"root").digest()
KEY = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"test log key").digest())
PUBLIC = KEY.public_key()
WITNESS = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"test witness").digest())


def _note(size: int = 42, root: bytes = ROOT, extensions: tuple[str, ...] = ()) -> str:
    return sign_note(checkpoint_body(ORIGIN, size, root, extensions), ORIGIN, KEY)


def _resign(body: str) -> str:
    """A note whose signature is valid but whose body is whatever we say."""
    return sign_note(body, ORIGIN, KEY)


def _signature_line(note: str) -> str:
    return note[note.rindex("\n\n") + 2 :]


def test_checkpoint_body_format() -> None:
    root = bytes(range(32))
    assert checkpoint_body("example.com/log", 0, root) == (
        "example.com/log\n0\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n"
    )
    assert checkpoint_body("o", 7, root, ("time 1", "x y")).endswith("=\ntime 1\nx y\n")
    for args in (
        ("", 1, root, ()),
        ("a\nb", 1, root, ()),
        ("o", -1, root, ()),
        ("o", 2**64, root, ()),
        ("o", 1, root[:31], ()),
        ("o", 1, root, ("",)),
        ("o", 1, root, ("two\nlines",)),
        ("o", 1, root, ("tab\there",)),
    ):
        with pytest.raises(ValueError):
            checkpoint_body(*args)


def test_round_trip() -> None:
    note = _note(extensions=("time 2024-01-01T00:00:00Z",))
    checkpoint = open_checkpoint(note, ORIGIN, PUBLIC, origin=ORIGIN)
    assert checkpoint == Checkpoint(ORIGIN, 42, ROOT, ("time 2024-01-01T00:00:00Z",))
    name, raw = parse_verifier_key(verifier_key(ORIGIN, _raw(PUBLIC)))
    assert (name, raw) == (ORIGIN, _raw(PUBLIC))
    assert key_hash(ORIGIN, raw) == hashlib.sha256(ORIGIN.encode() + b"\n\x01" + raw).digest()[:4]
    line = _signature_line(note)
    assert line.startswith(f"\u2014 {ORIGIN} ") and line.endswith("\n")
    assert base64.b64decode(line.split(" ")[2])[:4] == key_hash(ORIGIN, raw)
    empty = open_checkpoint(_note(size=0), ORIGIN, PUBLIC)
    assert (empty.size, empty.extensions) == (0, ())


@settings(max_examples=50, deadline=None)
@given(
    size=st.integers(0, 2**64 - 1),
    root=st.binary(min_size=32, max_size=32),
    extensions=st.lists(
        st.text(st.characters(min_codepoint=0x20, max_codepoint=0x2FFF), min_size=1, max_size=20),
        max_size=3,
    ),
)
def test_round_trip_any_checkpoint(size: int, root: bytes, extensions: list[str]) -> None:
    note = _note(size, root, tuple(extensions))
    assert open_checkpoint(note, ORIGIN, PUBLIC) == Checkpoint(ORIGIN, size, root, tuple(extensions))


def test_witness_cosignatures_ride_along() -> None:
    note = _note()
    body = note[: note.rindex("\n\n") + 1]
    witness_line = _signature_line(sign_note(body, "witness.example/w1", WITNESS))
    cosigned = note + witness_line
    assert open_checkpoint(cosigned, ORIGIN, PUBLIC).size == 42
    assert open_checkpoint(cosigned, "witness.example/w1", WITNESS.public_key()).size == 42
    witness_first = body + "\n" + witness_line + _signature_line(note)
    assert open_checkpoint(witness_first, ORIGIN, PUBLIC).size == 42
    # Only the witness signed it: our key has no signature, so it is rejected.
    with pytest.raises(NoteError, match="no signature by key"):
        open_checkpoint(body + "\n" + witness_line, ORIGIN, PUBLIC)
    # A line from another key claiming our name and key ID fails to verify.
    forged = _signature_line(sign_note(body, ORIGIN, WITNESS))
    blob = base64.b64decode(forged.split(" ")[2])
    claimed = blob.replace(blob[:4], key_hash(ORIGIN, _raw(PUBLIC)), 1)
    impostor = f"\u2014 {ORIGIN} {base64.b64encode(claimed).decode()}\n"
    with pytest.raises(NoteError, match="invalid signature"):
        open_checkpoint(note + impostor, ORIGIN, PUBLIC)


def test_tampered_notes_are_rejected() -> None:
    note = _note()
    body, line = note[: note.rindex("\n\n") + 1], _signature_line(note)
    name_field, blob_b64 = line[2:-1].split(" ")
    blob = base64.b64decode(blob_b64)
    bad_sig = blob[:10] + bytes([blob[10] ^ 1]) + blob[11:]
    bad_hash = bytes([blob[0] ^ 1]) + blob[1:]
    root_b64 = base64.b64encode(ROOT).decode()
    other_root = base64.b64encode(hashlib.sha256(b"other").digest()).decode()
    cases = {
        "changed size": (note.replace("\n42\n", "\n43\n"), "invalid signature"),
        "changed root": (note.replace(root_b64, other_root), "invalid signature"),
        "changed origin": (note.replace(ORIGIN + "\n", ORIGIN + "x\n", 1), "invalid signature"),
        "bad signature byte": (
            body + f"\n— {name_field} {base64.b64encode(bad_sig).decode()}\n",
            "invalid signature",
        ),
        "wrong key hash": (
            body + f"\n— {name_field} {base64.b64encode(bad_hash).decode()}\n",
            "no signature by key",
        ),
        "wrong key name": (note.replace(f"— {ORIGIN} ", "— citeledger.local/other "), "no sig"),
        "missing blank line": (body + line, "no blank line"),
        "missing trailing newline": (note[:-1], "does not end with a newline"),
        "body without newline": (body[:-1] + "\n" + line, "no blank line"),
        "no signatures": (body + "\n", "no signature lines"),
        "signature without em dash": (body + "\n" + line.replace("—", "-", 1), "em dash"),
        "control character": (note.replace("\n42\n", "\n42\r\n"), "control characters"),
        "truncated signature": (note.replace(blob_b64, blob_b64[:-4]), "invalid signature"),
        "non-base64 signature": (note.replace(blob_b64, blob_b64[:-2] + "!="), "base64"),
        "too many signatures": (note + line * MAX_SIGNATURES, f"more than {MAX_SIGNATURES}"),
        "oversize": (
            _resign(checkpoint_body(ORIGIN, 1, ROOT, ("x" * MAX_NOTE_BYTES,))),
            f"larger than {MAX_NOTE_BYTES}",
        ),
    }
    for what, (tampered, message) in cases.items():
        assert tampered != note, what
        with pytest.raises(NoteError, match=message):
            open_checkpoint(tampered, ORIGIN, PUBLIC)
    # Opening with the wrong name or key finds no signature of theirs.
    with pytest.raises(NoteError, match="no signature by key"):
        open_checkpoint(note, "citeledger.local/other", PUBLIC)
    with pytest.raises(NoteError, match="no signature by key"):
        open_checkpoint(note, ORIGIN, WITNESS.public_key())


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (f"{ORIGIN}\n012\n{{root}}\n", "canonical decimal"),
        (f"{ORIGIN}\n+12\n{{root}}\n", "canonical decimal"),
        (f"{ORIGIN}\n-1\n{{root}}\n", "canonical decimal"),
        (f"{ORIGIN}\n 12\n{{root}}\n", "canonical decimal"),
        (f"{ORIGIN}\n1_000\n{{root}}\n", "canonical decimal"),
        (f"{ORIGIN}\n\u0661\u0662\n{{root}}\n", "canonical decimal"),
        (f"{ORIGIN}\n00\n{{root}}\n", "canonical decimal"),
        (f"{ORIGIN}\n{2**64}\n{{root}}\n", "too large"),
        (f"{ORIGIN}\n12\n{{short}}\n", "31 bytes, not 32"),
        (f"{ORIGIN}\n12\n{{long}}\n", "33 bytes, not 32"),
        (f"{ORIGIN}\n12\n{{unpadded}}\n", "base64"),
        (f"{ORIGIN}\n12\n{{noncanonical}}\n", "canonical base64"),
        (f"{ORIGIN}\n12\n", "origin, size and root"),
        (f"{ORIGIN}\n12\n{{root}}\n\nextension after empty line\n", "empty line"),
        ("\n12\n{root}\n", "empty line"),
    ],
)
def test_signed_but_malformed_checkpoint_bodies(body: str, message: str) -> None:
    root_b64 = base64.b64encode(ROOT).decode()
    # Flip one of the last character's unused low bits: same bytes, other text.
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    noncanonical = root_b64[:-2] + alphabet[alphabet.index(root_b64[-2]) ^ 1] + "="
    assert base64.b64decode(noncanonical) == ROOT
    text = body.format(
        root=root_b64,
        short=base64.b64encode(ROOT[:31]).decode(),
        long=base64.b64encode(ROOT + b"\x00").decode(),
        unpadded=root_b64.rstrip("="),
        noncanonical=noncanonical,
    )
    if "\n\n" in text:
        # An empty line inside the text would be read as the separator, so
        # check the body parser on its own as well as the signed note.
        with pytest.raises(NoteError, match=message):
            parse_checkpoint_body(text)
        with pytest.raises(NoteError):
            open_checkpoint(_resign(text), ORIGIN, PUBLIC)
        return
    with pytest.raises(NoteError, match=message):
        open_checkpoint(_resign(text), ORIGIN, PUBLIC)


def test_sign_note_and_keys_reject_bad_input() -> None:
    for body in ("no newline", "ctrl\x00\n"):
        with pytest.raises(ValueError):
            sign_note(body, ORIGIN, KEY)
    for name in ("", "has space", "has+plus", "tab\tname"):
        with pytest.raises(ValueError):
            sign_note("text\n", name, KEY)
        with pytest.raises(ValueError):
            verifier_key(name, _raw(PUBLIC))
    with pytest.raises(ValueError):
        key_hash(ORIGIN, b"\x00" * 31)
    for vkey in ("", "name", "name+c74f20a3", "+c74f20a3+AAAA", "a b+c74f20a3+AAAA"):
        with pytest.raises(NoteError):
            parse_verifier_key(vkey)
