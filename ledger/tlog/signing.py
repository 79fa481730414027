"""Ed25519 signing keys: ids, key files (0600) and signatures.

The private key never leaves `<data_dir>/keys`: not into the log, a
response, an exception message or a log line.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey


class KeyFileError(RuntimeError):
    """A key file is missing, unreadable or too widely readable."""


def kid_for(public_raw: bytes) -> str:
    """Key id: first 8 bytes of SHA-256 of the raw public key, hex."""
    return hashlib.sha256(public_raw).digest()[:8].hex()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


@dataclass(frozen=True)
class SigningKey:
    kid: str
    public_raw: bytes
    private: Ed25519PrivateKey = field(repr=False)

    def sign(self, message: bytes) -> str:
        return b64(self.private.sign(message))


def verify_signature(public_raw: bytes, message: bytes, signature_b64: str) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(public_raw).verify(unb64(signature_b64), message)
    except (InvalidSignature, ValueError):
        return False
    return True


def public_raw_of(private: Ed25519PrivateKey) -> bytes:
    return private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def read_public_key_file(path: Path) -> bytes:
    """Accepts base64 of the raw 32-byte key, or a PEM SubjectPublicKeyInfo."""
    try:
        text = path.read_text(encoding="ascii").strip()
    except UnicodeDecodeError:
        raise KeyFileError(f"{path}: not a public key (not ASCII text)") from None
    if text.startswith("-----BEGIN"):
        try:
            key = serialization.load_pem_public_key(text.encode("ascii"))
        except (ValueError, TypeError):  # cryptography's refusal of a broken PEM
            raise KeyFileError(f"{path}: not a PEM public key") from None
        if not isinstance(key, Ed25519PublicKey):
            raise KeyFileError(f"{path}: not an Ed25519 public key")
        return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    try:
        raw = unb64(text)
    except ValueError:
        raise KeyFileError(f"{path}: not base64 or PEM") from None
    if len(raw) != 32:
        raise KeyFileError(f"{path}: an Ed25519 public key is 32 bytes")
    return raw


def write_secret(path: Path, content: bytes) -> None:
    """A new file readable by its owner only, on disk before this returns (keys, seeds)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(content)
        handle.flush()
        os.fsync(handle.fileno())


def _read_secret(path: Path) -> bytes:
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise KeyFileError(f"{path}: key file missing") from None
    if mode & 0o077:
        raise KeyFileError(f"{path}: key file must not be readable by group or others (chmod 600)")
    return path.read_bytes()


class KeyDirectory:
    """`<data_dir>/keys`: signing keys by kid, the trust root (genesis public
    key) and the master key that wraps data keys. Which key signs is decided
    by the log (its latest `SigningKeyRotated` entry); the `active` file marks
    the directory as set up and names that key for the operator (the ledger
    rewrites it after a rotation and when a process first signs with a key)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        with os.fdopen(os.open(self.path / ".lock", os.O_RDWR | os.O_CREAT, 0o600), "a+b") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    @property
    def root_public_key_path(self) -> Path:
        return self.path / "root.pub"

    def ensure(self) -> None:
        """Create the master key and the first signing key if absent (idempotent,
        safe when several processes start at once)."""
        with self._locked():
            os.chmod(self.path, 0o700)
            master = self.path / "master.key"
            active = (self.path / "active").exists()
            fresh = not active and not self.root_public_key_path.exists()
            if not master.exists():
                if not fresh:
                    # A new master key would open none of this ledger's data keys: every
                    # sealed text would fail to read. Refuse instead of replacing it.
                    raise KeyFileError(
                        f"{master}: missing, and this key directory belongs to an existing ledger; "
                        "restore master.key from a backup (signatures still verify without it: "
                        "`citeledger verify`; the sealed text cannot be read)"
                    )
                write_secret(master, os.urandom(32))
            if fresh:
                key = self._generate_unlocked()
                (self.path / "root.pub").write_text(b64(key.public_raw) + "\n", encoding="ascii")
                self._write_active(key.kid)
            elif not active:  # lost `active` beside a trust root: never a new root, name the old
                self._write_active(kid_for(self.root_public_key()))

    def active_kid(self) -> str | None:
        """The key id the `active` file names (None if it is missing or empty)."""
        try:
            return (self.path / "active").read_text(encoding="ascii").strip() or None
        except FileNotFoundError:
            return None

    def set_active(self, kid: str) -> None:
        """Name `kid` in `active` (no-op when it already does)."""
        if self.active_kid() == kid:
            return
        with self._locked():
            self._write_active(kid)

    def _write_active(self, kid: str) -> None:
        # Write beside it, then rename: a reader sees the old name or the new one, never half.
        temp = self.path / f".active.{os.getpid()}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(kid + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, self.path / "active")

    def remove_private_key(self, kid: str) -> bool:
        """Delete `<kid>.key` (its `.pub` stays); False if it was not there."""
        with self._locked():
            try:
                (self.path / f"{kid}.key").unlink()
            except FileNotFoundError:
                return False
            return True

    def master_key(self) -> bytes:
        key = _read_secret(self.path / "master.key")
        if len(key) != 32:
            raise KeyFileError("master.key: must hold 32 bytes")
        return key

    def root_public_key(self) -> bytes:
        return read_public_key_file(self.root_public_key_path)

    def load(self, kid: str) -> SigningKey:
        pem = _read_secret(self.path / f"{kid}.key")
        private = serialization.load_pem_private_key(pem, password=None)
        if not isinstance(private, Ed25519PrivateKey):
            raise KeyFileError(f"{kid}.key: not an Ed25519 private key")
        public_raw = public_raw_of(private)
        if kid_for(public_raw) != kid:
            raise KeyFileError(f"{kid}.key: key id does not match its file name")
        return SigningKey(kid=kid, public_raw=public_raw, private=private)

    def generate(self) -> SigningKey:
        with self._locked():
            return self._generate_unlocked()

    def _generate_unlocked(self) -> SigningKey:
        private = Ed25519PrivateKey.generate()
        public_raw = public_raw_of(private)
        kid = kid_for(public_raw)
        pem = private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        write_secret(self.path / f"{kid}.key", pem)
        (self.path / f"{kid}.pub").write_text(b64(public_raw) + "\n", encoding="ascii")
        return SigningKey(kid=kid, public_raw=public_raw, private=private)
