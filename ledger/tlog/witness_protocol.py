"""C2SP `tlog-witness` add-checkpoint: the request body and the witness's checks,
as pure functions shared by the witness (which checks) and the ledger (which asks).

Request body: `old <size>\\n`, up to 63 base64 consistency-proof lines, a blank
line, then the signed checkpoint. The checks run in the spec's order and each
refusal carries the spec's status: 404 unknown origin, 403 no valid signature by
the log's key, 400 old size above the checkpoint's (or a malformed body), 409 old
size is not the size last cosigned (the body then says that size), 422 a proof
that does not verify or a same-size checkpoint with another root.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ledger.tlog.merkle import EMPTY_ROOT, HASH_SIZE, ProofError, verify_consistency
from ledger.tlog.note import MAX_NOTE_BYTES, Checkpoint, NoteError, open_checkpoint

MAX_PROOF_LINES = 63
MAX_REQUEST_BYTES = MAX_NOTE_BYTES + 16 + 32 + MAX_PROOF_LINES * 46
SIZE_CONTENT_TYPE = "text/x.tlog.size"
_OLD_RE = re.compile(rb"old (0|[1-9][0-9]{0,19})\n")


@dataclass(frozen=True)
class AddCheckpoint:
    old_size: int
    proof: tuple[bytes, ...]
    note: str


class WitnessRefusal(Exception):
    """A refusal with its HTTP status; `latest_size` is set for 409 (the body)."""

    def __init__(self, status: int, message: str, *, latest_size: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.latest_size = latest_size


@dataclass(frozen=True)
class LogKey:
    """A log the witness follows: its origin and the (name, key) that signs its checkpoints."""

    origin: str
    key_name: str
    public_raw: bytes


def format_add_checkpoint(old_size: int, proof: Sequence[bytes], note: str) -> bytes:
    if len(proof) > MAX_PROOF_LINES:
        raise ValueError(f"at most {MAX_PROOF_LINES} consistency proof lines")
    lines = [f"old {old_size}", *(base64.b64encode(h).decode("ascii") for h in proof), ""]
    return ("\n".join(lines) + "\n" + note).encode("utf-8")


def parse_add_checkpoint(body: bytes) -> AddCheckpoint:
    """Parse a request body strictly; a WitnessRefusal(400) names what is wrong."""
    if len(body) > MAX_REQUEST_BYTES:
        raise WitnessRefusal(400, "request body too large")
    match = _OLD_RE.match(body)
    if match is None:
        raise WitnessRefusal(400, "the first line must be 'old <size>' without leading zeros")
    old_size = int(match.group(1))
    rest = body[match.end() :]
    proof: list[bytes] = []
    while True:
        end = rest.find(b"\n")
        if end < 0:
            raise WitnessRefusal(400, "missing the blank line before the checkpoint")
        line, rest = rest[:end], rest[end + 1 :]
        if not line:
            break
        if len(proof) == MAX_PROOF_LINES:
            raise WitnessRefusal(400, f"more than {MAX_PROOF_LINES} consistency proof lines")
        try:
            node = base64.b64decode(line, validate=True)
        except binascii.Error:
            raise WitnessRefusal(400, f"proof line {len(proof) + 1} is not base64") from None
        if len(node) != HASH_SIZE:
            raise WitnessRefusal(400, f"proof line {len(proof) + 1} is not a {HASH_SIZE}-byte hash")
        proof.append(node)
    try:
        note = rest.decode("utf-8")
    except UnicodeDecodeError:
        raise WitnessRefusal(400, "checkpoint is not UTF-8") from None
    return AddCheckpoint(old_size, tuple(proof), note)


def check_add_checkpoint(
    request: AddCheckpoint, logs: Mapping[str, LogKey], latest: tuple[int, bytes] | None
) -> Checkpoint:
    """The witness's checks against the (size, root) it last cosigned for this log
    (None: never). Returns the checkpoint to cosign or raises WitnessRefusal."""
    origin = request.note.split("\n", 1)[0]
    log = logs.get(origin)
    if log is None:
        raise WitnessRefusal(404, "unknown log origin")
    try:
        checkpoint = open_checkpoint(
            request.note, log.key_name, Ed25519PublicKey.from_public_bytes(log.public_raw), origin=origin
        )
    except NoteError as exc:
        raise WitnessRefusal(403, f"checkpoint not signed by the log's key: {exc}") from None
    if request.old_size > checkpoint.size:
        raise WitnessRefusal(400, "old size is larger than the checkpoint size")
    latest_size, latest_root = latest if latest is not None else (0, EMPTY_ROOT)
    if request.old_size != latest_size:
        raise WitnessRefusal(409, f"old size is not {latest_size}", latest_size=latest_size)
    if checkpoint.size == 0 and checkpoint.root != EMPTY_ROOT:
        raise WitnessRefusal(422, "a checkpoint of size 0 must have the empty tree's root")
    if request.old_size == 0:
        if request.proof:
            raise WitnessRefusal(422, "old size 0 takes no consistency proof")
        return checkpoint
    if request.old_size == checkpoint.size:
        if checkpoint.root != latest_root or request.proof:
            raise WitnessRefusal(422, "same size as the last cosigned checkpoint but another root")
        return checkpoint
    try:
        verify_consistency(request.old_size, checkpoint.size, latest_root, checkpoint.root, request.proof)
    except ProofError as exc:
        raise WitnessRefusal(422, f"consistency proof does not verify: {exc}") from None
    return checkpoint
