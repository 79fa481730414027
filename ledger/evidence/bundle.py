"""Portable receipt bundles: one JSON document an auditor checks offline.

A bundle holds an entry, the signed checkpoint that covers it, the entry's
inclusion proof, and the key chain (every SigningKeyRotated entry up to the
checkpoint, each with its own inclusion proof) so that the only thing the
auditor must already trust is the ledger's root public key.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

from ledger.domain.entries import RecordedEvent, entry_signature_ok, with_continuations
from ledger.domain.events import CONTINUATION_OF
from ledger.domain.keychain import KeyChainError, check_key_event
from ledger.tlog.canonical import canonical_json
from ledger.tlog.checkpoints import CheckpointRecord, open_record, origin_for
from ledger.tlog.cose_receipt import CoseReceiptError, inclusion_cose_receipt, verify_cose_receipt
from ledger.tlog.cosignature import Witness, require_cosignatures
from ledger.tlog.merkle import ProofError, leaf_hash, verify_inclusion
from ledger.tlog.note import NoteError

BUNDLE_FORMAT = "citeledger-bundle/1"
MAX_PROOF_HASHES = 64


class BundleError(ValueError):
    """The bundle does not prove what it claims; the message says which part failed."""


def proof_json(position: int, tree_size: int, hashes: list[bytes]) -> dict[str, Any]:
    return {"leaf_index": position - 1, "tree_size": tree_size, "hashes": [h.hex() for h in hashes]}


def build_bundle(
    ledger: Any,
    position: int,
    *,
    extra: dict[str, Any] | None = None,
    checkpoint: CheckpointRecord | None = None,
) -> dict[str, Any]:
    """The bundle for the entry at `position` against `checkpoint` (by default the first that
    covers it; one is issued if none does yet); with the entries continuing it (`continued`)
    when it was written as several."""
    event: RecordedEvent | None = ledger.get(position)
    if event is None:
        raise LookupError(f"no entry at position {position}")
    event = with_continuations(event, ledger.read)
    if checkpoint is None:
        checkpoint = ledger.checkpoint_covering(position + len(event.continuations))
    size = checkpoint.tree_size

    def proven(item: RecordedEvent) -> dict[str, Any]:
        return {
            "entry": item.envelope,
            "inclusion_proof": proof_json(item.position, size, ledger.inclusion_proof(item.position, size)),
        }

    bundle: dict[str, Any] = {
        "format": BUNDLE_FORMAT,
        "origin": ledger.origin,
        **proven(event),
        "checkpoint": checkpoint.to_json(),
        "key_chain": [proven(item) for item in ledger.key_events(up_to=size)],
        # The same inclusion proof as a standard COSE Receipt (RFC 9942), base64.
        "cose_receipt": base64.b64encode(cose_receipt(ledger, position, checkpoint)).decode("ascii"),
    }
    if event.continuations:
        bundle["continued"] = [proven(item) for item in event.continuations]
    if extra:
        bundle.update(extra)
    return bundle


def cose_receipt(ledger: Any, position: int, checkpoint: CheckpointRecord) -> bytes:
    """The COSE Receipt of the entry at `position` in `checkpoint`'s tree, signed by the
    key that signed the checkpoint."""
    size = checkpoint.tree_size
    return inclusion_cose_receipt(
        ledger.keydir.load(checkpoint.kid),
        tree_size=size,
        leaf_index=position - 1,
        path=ledger.inclusion_proof(position, size),
        root=checkpoint.root,
    )


def _check_cose_receipt(
    bundle: dict[str, Any], entry: dict[str, Any], record: CheckpointRecord, keys: dict[str, bytes]
) -> None:
    """The bundle's COSE Receipt, when it has one, must prove the same entry in the same tree."""
    encoded = bundle.get("cose_receipt")
    if encoded is None:
        return  # bundles written before COSE receipts
    try:
        cose_bytes = base64.b64decode(str(encoded), validate=True)
        claim = verify_cose_receipt(cose_bytes, leaf_hash(canonical_json(entry)), keys)
    except (binascii.Error, CoseReceiptError) as exc:
        raise BundleError(f"cose_receipt: {exc}") from None
    if (claim.tree_size, claim.leaf_index, claim.root) != (
        record.tree_size,
        entry["position"] - 1,
        record.root,
    ):
        raise BundleError("cose_receipt: proves another entry or another tree than the checkpoint")


def check_inclusion(entry: bytes, position: Any, proof: Any, root: bytes, size: int, what: str) -> None:
    """Raise BundleError unless `proof` puts these exact bytes at `position` of the tree
    (`size`, `root`). The one inclusion check of bundles and tenant exports."""
    try:
        hashes = [bytes.fromhex(h) for h in proof["hashes"][: MAX_PROOF_HASHES + 1]]
        if len(hashes) > MAX_PROOF_HASHES:
            raise BundleError(f"{what}: inclusion proof too long")
        if proof["tree_size"] != size or proof["leaf_index"] != position - 1:
            raise BundleError(f"{what}: proof is for another position or tree size")
        verify_inclusion(leaf_hash(entry), int(proof["leaf_index"]), size, hashes, root)
    except (ProofError, KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, BundleError):
            raise
        raise BundleError(f"{what}: inclusion proof does not verify ({exc})") from None


def _check_inclusion(item: dict[str, Any], root: bytes, size: int, what: str) -> dict[str, Any]:
    entry = item.get("entry")
    if not isinstance(entry, dict):
        raise BundleError(f"{what}: entry missing")
    try:
        entry_bytes = canonical_json(entry)
    except (TypeError, ValueError):
        raise BundleError(f"{what}: entry is not canonical JSON") from None
    check_inclusion(
        entry_bytes, entry.get("position", 0), item.get("inclusion_proof") or {}, root, size, what
    )
    return entry


def verify_bundle(
    bundle: dict[str, Any],
    trusted_root_key: bytes,
    *,
    witnesses: Sequence[Witness] = (),
    min_witnesses: int = 0,
) -> dict[str, Any]:
    """Check a bundle with nothing but the root public key (and, to trust no single
    party, the keys of witnesses of which `min_witnesses` must have cosigned its
    checkpoint). Returns the verified entry."""
    if bundle.get("format") != BUNDLE_FORMAT:
        raise BundleError(f"format: expected {BUNDLE_FORMAT}")
    origin = origin_for(trusted_root_key)
    try:
        record = CheckpointRecord.from_json(bundle["checkpoint"])
    except (KeyError, TypeError, ValueError):
        raise BundleError("checkpoint: missing or malformed") from None
    # The key chain: genesis must be the trusted key; each later key is introduced by its predecessor.
    keys: dict[str, bytes] = {}
    current: str | None = None
    for index, item in enumerate(bundle.get("key_chain") or []):
        entry = _check_inclusion(item, record.root, record.tree_size, f"key_chain[{index}]")
        try:
            kid, public_raw = check_key_event(entry, entry["position"], keys, current, trusted_root_key)
        except KeyChainError as exc:
            raise BundleError(f"key_chain[{index}]: {exc.problem}") from None
        keys[kid], current = public_raw, kid
    if not keys:
        raise BundleError("key_chain: empty; the genesis entry is required")
    # Note: checkpoint root verified before any inclusion is trusted.
    try:
        open_record(record, origin, keys)
        require_cosignatures(record.note, witnesses, min_witnesses)
    except (NoteError, ValueError) as exc:
        raise BundleError(f"checkpoint: {exc}") from None
    entry = _check_inclusion(bundle, record.root, record.tree_size, "entry")
    signer_key = keys.get(str(entry.get("kid")))
    if signer_key is None or not entry_signature_ok(entry, signer_key):
        raise BundleError("entry: signature does not verify")
    _check_cose_receipt(bundle, entry, record, keys)
    _check_continued(bundle, entry, record, keys)
    return entry


def _check_continued(
    bundle: dict[str, Any], entry: dict[str, Any], record: CheckpointRecord, keys: dict[str, bytes]
) -> None:
    """A head written as several entries (`parts`) is proven with every part: each at the
    position after the one before, naming the head's receipt or version, signed."""
    payload = entry.get("payload") or {}
    parts = payload.get("parts") or 1
    continued = bundle.get("continued") or []
    if not isinstance(continued, list) or len(continued) != parts - 1:
        raise BundleError(f"continued: the entry takes {parts} parts; the bundle proves {len(continued) + 1}")
    key = "receipt_id" if entry.get("type") == "RetrievalRecorded" else "version_id"
    for offset, item in enumerate(continued, start=1):
        what = f"continued[{offset - 1}]"
        part = _check_inclusion(item, record.root, record.tree_size, what)
        signer = keys.get(str(part.get("kid")))
        if signer is None or not entry_signature_ok(part, signer):
            raise BundleError(f"{what}: signature does not verify")
        body = part.get("payload") or {}
        if (
            CONTINUATION_OF.get(str(part.get("type"))) != entry.get("type")
            or part.get("position") != entry["position"] + offset
            or body.get("part") != offset + 1
            or body.get(key) != payload.get(key)
        ):
            raise BundleError(f"{what}: not part {offset + 1} of the entry")
