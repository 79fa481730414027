"""An auditor's check, offline, that the log seen at a past audit is a prefix of today's.

Inputs are what any tenant token can fetch (today's signed checkpoint, the key chain with
inclusion proofs in today's tree, the RFC 9162 consistency proof from the kept size) and
what the auditor holds (the root public key, the kept checkpoint note, witnesses' keys).
Nothing the server says is believed unless a signature or a proof makes it so:

- the key chain starts at the root key and each rotation is signed by the key before it
  (`check_key_event`), each entry proven in today's tree;
- today's checkpoint is signed by a key of that chain, and (when witnesses are given)
  cosigned by at least `min_witnesses` of them;
- the kept checkpoint is signed by a key of the chain (an altered or foreign copy fails);
- its tree is a prefix of today's: the same root at the same size, or a consistency proof
  between the kept root and today's signed root.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ledger.domain.keychain import KeyChainError, check_key_event
from ledger.evidence.bundle import BundleError, check_inclusion
from ledger.tlog.canonical import canonical_json
from ledger.tlog.checkpoints import CheckpointRecord, open_record, origin_for
from ledger.tlog.cosignature import Cosignature, Witness, require_cosignatures
from ledger.tlog.merkle import ProofError, verify_consistency
from ledger.tlog.note import Checkpoint, NoteError, open_checkpoint, parse_checkpoint_body

MAX_PROOF_HASHES = 64
MAX_KEY_CHAIN = 10_000


class CheckFailed(ValueError):
    """The evidence does not show a prefix; `kind` names the failure (`rollback`, `fork`,
    `inconsistent`, `forged`, `kept_invalid`, `key_chain`, `witnesses`, `other_log`,
    `malformed`), the message says it in words."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Kept:
    """The kept checkpoint as read from its file (signature not yet checked)."""

    note: str
    checkpoint: Checkpoint

    @property
    def time(self) -> str | None:
        return time_of(self.checkpoint)


@dataclass(frozen=True)
class CheckResult:
    kept_size: int
    kept_time: str | None
    today_size: int
    today_time: str | None
    today_note: str
    proof_hashes: int
    keys: int
    cosignatures: tuple[Cosignature, ...]


def time_of(checkpoint: Checkpoint) -> str | None:
    """The `time` extension line this ledger writes into its checkpoints."""
    for line in checkpoint.extensions:
        if line.startswith("time "):
            return line[5:]
    return None


def read_kept(text: str) -> Kept:
    """The kept note (as `GET /v1/checkpoints/latest` gave its `note`, or as saved by this
    check); raises CheckFailed('kept_invalid') when it is no checkpoint note at all."""
    note = text.replace("\r\n", "\n")
    split = note.find("\n\n")
    if split < 0:
        raise CheckFailed("kept_invalid", "the kept file is not a signed checkpoint note")
    try:
        checkpoint = parse_checkpoint_body(note[: split + 1])
    except NoteError as exc:
        raise CheckFailed("kept_invalid", f"the kept file is not a checkpoint note: {exc}") from None
    return Kept(note if note.endswith("\n") else note + "\n", checkpoint)


def _key_chain(items: Sequence[Any], root_key: bytes, record: CheckpointRecord) -> dict[str, bytes]:
    """kid -> public key, each introduction proven in today's tree and chained from the root."""
    if not isinstance(items, Sequence) or not items or len(items) > MAX_KEY_CHAIN:
        raise CheckFailed("key_chain", "the key chain is missing (the genesis entry is required)")
    keys: dict[str, bytes] = {}
    current: str | None = None
    last_position = 0
    for index, item in enumerate(items):
        entry = item.get("entry") if isinstance(item, Mapping) else None
        if not isinstance(entry, dict) or not isinstance(entry.get("position"), int):
            raise CheckFailed("key_chain", f"key_chain[{index}]: entry missing or without a position")
        position = int(entry["position"])
        if position <= last_position:
            raise CheckFailed("key_chain", f"key_chain[{index}]: positions out of order")
        try:
            check_inclusion(
                canonical_json(entry),
                position,
                item.get("inclusion_proof") or {},
                record.root,
                record.tree_size,
                f"key_chain[{index}]",
            )
            kid, public_raw = check_key_event(entry, position, keys, current, root_key)
        except BundleError as exc:
            raise CheckFailed("key_chain", str(exc)) from None
        except KeyChainError as exc:
            raise CheckFailed("key_chain", f"key_chain[{index}]: {exc.problem}") from None
        except (TypeError, ValueError) as exc:
            raise CheckFailed("key_chain", f"key_chain[{index}]: not canonical JSON ({exc})") from None
        keys[kid], current, last_position = public_raw, kid, position
    return keys


def open_kept(kept: Kept, origin: str, keys: Mapping[str, bytes]) -> Checkpoint:
    for public_raw in keys.values():
        try:
            return open_checkpoint(
                kept.note, origin, Ed25519PublicKey.from_public_bytes(public_raw), origin=origin
            )
        except NoteError:
            continue
    if kept.checkpoint.origin != origin:
        raise CheckFailed(
            "other_log", f"the kept checkpoint is of {kept.checkpoint.origin}, not of this log ({origin})"
        )
    raise CheckFailed(
        "kept_invalid",
        "the kept checkpoint is not signed by any key of this log (key chain from the root "
        "public key): it was altered, or never signed by this ledger",
    )


def _seen(kept: Kept) -> str:
    when = f" on {kept.time}" if kept.time else ""
    return f"the log you saw{when} (size {kept.checkpoint.size})"


def check_prefix(
    root_key: bytes,
    kept: Kept,
    today: Mapping[str, Any],
    key_chain: Sequence[Any],
    consistency: Mapping[str, Any] | None,
    *,
    witnesses: Sequence[Witness] = (),
    min_witnesses: int = 0,
) -> CheckResult:
    """Raise CheckFailed unless `kept` is a prefix of `today` (a checkpoint record's JSON
    with its cosigned note), all signatures checked from `root_key` alone."""
    origin = origin_for(root_key)
    try:
        record = CheckpointRecord.from_json(dict(today))
    except (KeyError, TypeError, ValueError):
        raise CheckFailed("malformed", "today's checkpoint is missing or malformed") from None
    keys = _key_chain(key_chain, root_key, record)
    try:
        signed = open_record(record, origin, keys)
    except NoteError as exc:
        raise CheckFailed(
            "forged", f"today's checkpoint is not signed by a key of this log ({exc}): refused"
        ) from None
    try:
        cosigned = require_cosignatures(record.note, witnesses, min_witnesses) if witnesses else []
    except NoteError as exc:
        raise CheckFailed("witnesses", f"today's checkpoint: {exc}") from None
    held = open_kept(kept, origin, keys)
    seen = _seen(kept)
    proof: list[bytes] = []
    if held.size > signed.size:
        raise CheckFailed(
            "rollback",
            f"{seen} is longer than today's (size {signed.size}): the log was cut back (rolled back)",
        )
    if held.size == signed.size:
        if held.root != signed.root:
            raise CheckFailed(
                "fork",
                f"{seen} and today's have the same size but different roots: the log was forked "
                "(two histories signed under this log's keys)",
            )
    else:
        proof = _proof(consistency, held.size, signed.size)
        try:
            verify_consistency(held.size, signed.size, held.root, signed.root, proof)
        except ProofError as exc:
            raise CheckFailed(
                "inconsistent",
                f"{seen} is not a prefix of today's (size {signed.size}): the consistency proof "
                f"does not verify ({exc}); history was rewritten",
            ) from None
    return CheckResult(
        kept_size=held.size,
        kept_time=kept.time,
        today_size=signed.size,
        today_time=time_of(signed),
        today_note=record.note,
        proof_hashes=len(proof),
        keys=len(keys),
        cosignatures=tuple(cosigned),
    )


def _proof(answer: Mapping[str, Any] | None, old: int, new: int) -> list[bytes]:
    if not isinstance(answer, Mapping):
        raise CheckFailed("malformed", "no consistency proof was given")
    hashes = answer.get("hashes")
    if answer.get("from") != old or answer.get("to") != new or not isinstance(hashes, list):
        raise CheckFailed("malformed", f"the consistency proof is not from size {old} to {new}")
    if len(hashes) > MAX_PROOF_HASHES:
        raise CheckFailed("malformed", "the consistency proof is too long")
    try:
        return [bytes.fromhex(str(h)) for h in hashes]
    except ValueError:
        raise CheckFailed("malformed", "the consistency proof holds a hash that is not hex") from None


__all__ = ["CheckFailed", "CheckResult", "Kept", "check_prefix", "open_kept", "read_kept", "time_of"]
