"""The key chain: which keys may sign the log, learned from the log itself.

Position 1 introduces the trusted root key; every later `SigningKeyRotated`
entry introduces the next key, signed by the key in force before it, and
proves possession of the new key with the new key's signature over its own
introduction. The ledger (when it reads the log), `verify` and receipt
bundles all apply this one rule.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from typing import Any

from ledger.domain.entries import entry_signature_ok
from ledger.tlog.canonical import canonical_json
from ledger.tlog.signing import kid_for, unb64, verify_signature


class KeyChainError(ValueError):
    """A key introduction that breaks the chain; `problem` says how."""

    def __init__(self, position: int, problem: str) -> None:
        super().__init__(f"position {position}: {problem}")
        self.position = position
        self.problem = problem


def possession_message(new_kid: str, public_key_b64: str, previous_kid: str | None) -> bytes:
    """What a new key signs to prove it is held by whoever introduces it."""
    return canonical_json({"new_kid": new_kid, "public_key": public_key_b64, "previous_kid": previous_kid})


def kid_in_force(key_positions: Sequence[tuple[int, str]], position: int) -> str | None:
    """The key that signs the entry at `position`: the last one introduced before it.

    `key_positions` is the chain as (position introduced, kid), ascending; None before position 1."""
    introduced_before = bisect_left(key_positions, (position,))
    return key_positions[introduced_before - 1][1] if introduced_before else None


def _introduced_key(payload: Mapping[str, Any]) -> tuple[str, bytes] | None:
    """The new key id and key if the proof of possession holds, else None."""
    new_kid, public_b64 = payload.get("new_kid"), payload.get("public_key")
    previous, signature = payload.get("previous_kid"), payload.get("possession_signature")
    if not isinstance(new_kid, str) or not isinstance(public_b64, str) or not isinstance(signature, str):
        return None
    if previous is not None and not isinstance(previous, str):
        return None
    try:
        public_raw = unb64(public_b64)
    except ValueError:
        return None
    if kid_for(public_raw) != new_kid:
        return None
    if not verify_signature(public_raw, possession_message(new_kid, public_b64, previous), signature):
        return None
    return new_kid, public_raw


def check_key_event(
    envelope: Mapping[str, Any],
    position: int,
    keys: Mapping[str, bytes],
    current_kid: str | None,
    root_key: bytes,
) -> tuple[str, bytes]:
    """Check the key introduction at `position`, given the keys learned so far
    (kid -> raw public key) and the kid in force (None before position 1).

    Returns the new key id and raw public key; raises KeyChainError.
    """
    payload = envelope.get("payload")
    if envelope.get("type") != "SigningKeyRotated" or not isinstance(payload, Mapping):
        raise KeyChainError(position, "not a key introduction")
    introduced = _introduced_key(payload)
    if introduced is None:
        raise KeyChainError(position, "key rotation without a valid proof of possession")
    new_kid, new_key = introduced
    previous = payload.get("previous_kid")
    if position == 1:
        if previous is not None or new_key != root_key or current_kid is not None:
            raise KeyChainError(position, "genesis key is not the trusted public key")
        signer = new_key
    else:
        signer_or_none = keys.get(current_kid) if current_kid is not None else None
        if signer_or_none is None or previous != current_kid or envelope.get("kid") != current_kid:
            raise KeyChainError(position, "key rotation not signed by the key in force")
        signer = signer_or_none
    if envelope.get("kid") != kid_for(signer) or not entry_signature_ok(envelope, signer):
        raise KeyChainError(position, "key rotation signature does not verify")
    return new_kid, new_key


__all__ = ["KeyChainError", "check_key_event", "possession_message"]
