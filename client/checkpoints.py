"""A client that remembers: the newest checkpoint it has seen, kept beside its spool
(`checkpoint.json`, 0600), and a newer one trusted only once a consistency proof from
the remembered one verifies. An older checkpoint (the server was rolled back) or one
that does not extend the remembered tree (a fork) raises `CheckpointMismatch`: an
error the service sees, not a log line.

`CheckpointMemory` is shared by the sync and async clients: `proof_range` says which
proof to fetch, `accept` checks it and remembers the checkpoint.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from client.errors import CheckpointMismatch, LedgerError, NotFound
from ledger.tlog.merkle import ProofError, verify_consistency
from ledger.tlog.note import NoteError, open_checkpoint, parse_checkpoint_body, parse_verifier_key

FILE_NAME = "checkpoint.json"


@dataclass(frozen=True)
class Seen:
    origin: str
    size: int
    root: bytes
    note: str


def _body(note: str) -> str:
    split = note.find("\n\n")
    if split < 0:
        raise NoteError("not a signed note")
    return note[: split + 1]


class CheckpointMemory:
    def __init__(self, directory: str | Path | None, log_vkeys: Sequence[str] = ()) -> None:
        """`directory` None: remembered in memory only (for this process's life).
        `log_vkeys`: when given, a checkpoint must be signed by one of these keys."""
        self.path = Path(directory) / FILE_NAME if directory is not None else None
        self.keys = [parse_verifier_key(vkey) for vkey in log_vkeys]
        self.seen: Seen | None = self._load()

    def _load(self) -> Seen | None:
        if self.path is None or not self.path.exists():
            return None
        data = orjson.loads(self.path.read_bytes())
        checkpoint = parse_checkpoint_body(_body(str(data["note"])))
        return Seen(checkpoint.origin, checkpoint.size, checkpoint.root, str(data["note"]))

    def _save(self, seen: Seen) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".checkpoint-")  # 0600
        with os.fdopen(fd, "wb") as handle:
            handle.write(orjson.dumps({"note": seen.note}))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)

    def parse(self, note: str) -> Seen:
        """The checkpoint of `note`, its signature checked when keys are configured."""
        try:
            if self.keys:
                checkpoint = None
                for name, public_raw in self.keys:
                    try:
                        checkpoint = open_checkpoint(
                            note, name, Ed25519PublicKey.from_public_bytes(public_raw)
                        )
                        break
                    except NoteError:
                        continue
                if checkpoint is None:
                    raise NoteError("not signed by a trusted log key")
            else:
                checkpoint = parse_checkpoint_body(_body(note))
        except NoteError as exc:
            raise CheckpointMismatch(
                "checkpoint_invalid", f"the server's checkpoint is invalid: {exc}"
            ) from None
        return Seen(checkpoint.origin, checkpoint.size, checkpoint.root, note)

    def proof_range(self, new: Seen) -> tuple[int, int] | None:
        """The consistency proof needed before trusting `new` (None: none needed);
        raises CheckpointMismatch for another log, an older tree or a same-size fork."""
        seen = self.seen
        if seen is None or (seen.size == new.size and seen.root == new.root):
            return None
        if new.origin != seen.origin:
            raise CheckpointMismatch("checkpoint_other_log", f"checkpoint of {new.origin}, not {seen.origin}")
        if new.size < seen.size:
            raise CheckpointMismatch(
                "checkpoint_rollback",
                f"the server's checkpoint covers {new.size} entries, fewer than the {seen.size} "
                "this client has seen: the log was rolled back",
            )
        if new.size == seen.size:
            raise CheckpointMismatch(
                "checkpoint_fork", f"two different roots for a tree of {new.size} entries: the log was forked"
            )
        return (seen.size, new.size) if seen.size else None

    def no_checkpoint(self, error: NotFound) -> LedgerError:
        """The server answered 404 for its latest checkpoint. Once this client has seen
        one, that is a log that lost its signed history (cut back, its checkpoints with
        it): the rollback error, not "not found"."""
        seen = self.seen
        if seen is None or seen.size == 0:
            return error
        return CheckpointMismatch(
            "checkpoint_rollback",
            f"the server has no checkpoint, but this client has seen one of {seen.size} entries: "
            "the log was rolled back",
        )

    @staticmethod
    def no_tree(new: Seen, error: NotFound) -> CheckpointMismatch:
        """The server signed a checkpoint of `new.size` entries and then had no tree of that
        size to prove it from (404): its log is shorter than its own checkpoint."""
        return CheckpointMismatch(
            "checkpoint_rollback",
            f"the server's log is shorter than its checkpoint of {new.size} entries "
            f"({error.code}): the log was rolled back",
        )

    def accept(self, new: Seen, proof: Sequence[bytes] = ()) -> Seen:
        """Remember `new` once the proof from the remembered checkpoint verifies."""
        seen = self.seen
        needed = self.proof_range(new)
        if needed is not None and seen is not None:
            try:
                verify_consistency(seen.size, new.size, seen.root, new.root, proof)
            except ProofError as exc:
                raise CheckpointMismatch(
                    "checkpoint_inconsistent",
                    f"the checkpoint of {new.size} entries does not extend the one of {seen.size} "
                    f"this client has seen ({exc}): the log was rewritten",
                ) from None
        if seen is None or new.size > seen.size:
            self._save(new)
            self.seen = new
        return new
