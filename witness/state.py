"""The witness's key and state in its own directory: `witness.key` (the Ed25519
seed, 0600), `witness.name`, and `witness.sqlite` (the logs it follows and the
checkpoint it last cosigned for each). The check and the update of a log's
checkpoint happen in one IMMEDIATE transaction, so two concurrent requests
cannot roll the stored size back (the race tlog-witness warns about), and the
new state is on disk before the cosignature is returned."""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import time
from contextlib import closing
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

from ledger.tlog.cosignature import Witness, cosign
from ledger.tlog.note import _check_key_name, checkpoint_body, parse_verifier_key
from ledger.tlog.signing import write_secret
from ledger.tlog.witness_protocol import AddCheckpoint, LogKey, WitnessRefusal, check_add_checkpoint

log = logging.getLogger("citeledger.witness")

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS logs (origin TEXT PRIMARY KEY, vkey TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS checkpoints (origin TEXT PRIMARY KEY, origin_hash TEXT NOT NULL UNIQUE, "
    "tree_size INTEGER NOT NULL, root BLOB NOT NULL, note TEXT NOT NULL, cosigned_at INTEGER NOT NULL)",
)


class WitnessSetupError(RuntimeError):
    """The witness directory is missing, unreadable or not private."""


class WitnessState:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        key_path = directory / "witness.key"
        try:
            if key_path.stat().st_mode & 0o077:
                raise WitnessSetupError(f"{key_path}: must not be readable by group or others (chmod 600)")
            seed = key_path.read_bytes()
            self.name = (directory / "witness.name").read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise WitnessSetupError(
                f"{directory}: not a witness directory ({exc.strerror}); run `init`"
            ) from None
        if len(seed) != 32:
            raise WitnessSetupError(f"{key_path}: an Ed25519 seed is 32 bytes")
        self.private_key = Ed25519PrivateKey.from_private_bytes(seed)
        self.witness = Witness(
            self.name, self.private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        )
        self.db_path = directory / "witness.sqlite"
        with closing(self._connect()) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            for statement in _SCHEMA:
                conn.execute(statement)
        os.chmod(self.db_path, 0o600)

    @classmethod
    def init(cls, directory: Path, name: str) -> WitnessState:
        """Create the directory (0700) with a new key; refuses to overwrite one."""
        _check_key_name(name)
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(directory, 0o700)
        seed = Ed25519PrivateKey.generate().private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        write_secret(directory / "witness.key", seed)
        write_secret(directory / "witness.name", name.encode("utf-8") + b"\n")
        return cls(directory)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.db_path, isolation_level=None, timeout=30)
        conn.execute("PRAGMA synchronous=FULL")
        return conn

    def add_log(self, vkey: str) -> str:
        """Follow the log whose checkpoints `vkey` signs (its key name is the origin)."""
        name, _ = parse_verifier_key(vkey.strip())
        with closing(self._connect()) as conn:
            conn.execute(
                "INSERT INTO logs (origin, vkey) VALUES (?, ?) "
                "ON CONFLICT (origin) DO UPDATE SET vkey = excluded.vkey",
                (name, vkey.strip()),
            )
        return name

    def logs(self) -> dict[str, LogKey]:
        with closing(self._connect()) as conn:
            rows = conn.execute("SELECT origin, vkey FROM logs").fetchall()
        keys = {}
        for origin, vkey in rows:
            name, public_raw = parse_verifier_key(vkey)
            keys[origin] = LogKey(origin, name, public_raw)
        return keys

    def add_checkpoint(self, request: AddCheckpoint, now: int | None = None) -> str:
        """Check `request` against the stored checkpoint, store the new one and
        return the cosignature line; raises WitnessRefusal (nothing stored)."""
        logs = self.logs()
        with closing(self._connect()) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                origin = request.note.split("\n", 1)[0]
                row = conn.execute(
                    "SELECT tree_size, root FROM checkpoints WHERE origin = ?", (origin,)
                ).fetchone()
                latest = (int(row[0]), bytes(row[1])) if row is not None else None
                checkpoint = check_add_checkpoint(request, logs, latest)
                text = checkpoint_body(
                    checkpoint.origin, checkpoint.size, checkpoint.root, checkpoint.extensions
                )
                timestamp = now if now is not None else int(time.time())
                line = cosign(text, self.name, self.private_key, timestamp)
                conn.execute(
                    "INSERT INTO checkpoints (origin, origin_hash, tree_size, root, note, cosigned_at) "
                    "VALUES (?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (origin) DO UPDATE SET tree_size = excluded.tree_size, "
                    "root = excluded.root, note = excluded.note, cosigned_at = excluded.cosigned_at",
                    (
                        origin,
                        hashlib.sha256(origin.encode("utf-8")).hexdigest(),
                        checkpoint.size,
                        checkpoint.root,
                        request.note + line,
                        timestamp,
                    ),
                )
                conn.execute("COMMIT")
            except WitnessRefusal as refusal:
                conn.execute("ROLLBACK")
                if refusal.status in (409, 422):  # possible evidence of log misbehaviour: keep a trace
                    log.warning(
                        "refused a checkpoint of %s (%d): %s", origin, refusal.status, refusal.message
                    )
                raise
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return line

    def latest_note(self, origin_hash: str) -> str | None:
        """The last cosigned checkpoint (log and witness signatures) by SHA-256 of the origin."""
        with closing(self._connect()) as conn:
            row = conn.execute(
                "SELECT note FROM checkpoints WHERE origin_hash = ?", (origin_hash,)
            ).fetchone()
        return None if row is None else str(row[0])
