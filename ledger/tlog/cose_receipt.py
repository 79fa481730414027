"""COSE Receipts (RFC 9942) of inclusion for the log's RFC 9162 tree.

A COSE Receipt is a COSE_Sign1 (tag 18) by the key that signed the checkpoint:
protected header {alg (1): EdDSA (-8), kid (4), vds (395): RFC9162_SHA256 (1)},
unprotected header {vdp (396): {inclusion proofs (-1): [bstr .cbor [tree_size,
leaf_index, [path hashes]]]}}, payload detached (nil): it is the tree root the
proof leads to, signed through the COSE Sig_structure. A verifier recomputes the
root from the entry's leaf hash and the proof, then checks the signature over it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cbor2
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ledger.tlog.merkle import HASH_SIZE, ProofError, root_from_inclusion
from ledger.tlog.signing import SigningKey

COSE_SIGN1_TAG = 18
HEADER_ALG, HEADER_KID, HEADER_VDS, HEADER_VDP = 1, 4, 395, 396
ALG_EDDSA = -8
VDS_RFC9162_SHA256 = 1
INCLUSION_PROOFS = -1
MAX_COSE_RECEIPT_BYTES = 8 * 1024
MAX_PATH = 64


class CoseReceiptError(ValueError):
    """The COSE receipt is malformed or does not verify; the message says which part."""


@dataclass(frozen=True)
class CoseReceiptClaim:
    kid: str
    tree_size: int
    leaf_index: int
    root: bytes


def _sig_structure(protected: bytes, payload: bytes) -> bytes:
    return bytes(cbor2.dumps(["Signature1", protected, b"", payload]))


def inclusion_cose_receipt(
    key: SigningKey, *, tree_size: int, leaf_index: int, path: Sequence[bytes], root: bytes
) -> bytes:
    """The COSE Receipt that the leaf at `leaf_index` is in the tree (`tree_size`, `root`)."""
    protected = bytes(
        cbor2.dumps(
            {HEADER_ALG: ALG_EDDSA, HEADER_KID: key.kid.encode("ascii"), HEADER_VDS: VDS_RFC9162_SHA256}
        )
    )
    proof = bytes(cbor2.dumps([tree_size, leaf_index, [bytes(h) for h in path]]))
    signature = key.private.sign(_sig_structure(protected, root))
    unprotected = {HEADER_VDP: {INCLUSION_PROOFS: [proof]}}
    return bytes(cbor2.dumps(cbor2.CBORTag(COSE_SIGN1_TAG, [protected, unprotected, None, signature])))


def _is_map(value: Any) -> bool:
    """cbor2 decodes a map inside a tag as its own immutable frozendict type."""
    return isinstance(value, Mapping) or type(value).__name__ == "frozendict"


def _decode(cose_receipt: bytes) -> tuple[bytes, Mapping[Any, Any], Mapping[Any, Any], bytes]:
    if len(cose_receipt) > MAX_COSE_RECEIPT_BYTES:
        raise CoseReceiptError("COSE Receipt too large")
    try:
        value = cbor2.loads(cose_receipt)
        if not isinstance(value, cbor2.CBORTag) or value.tag != COSE_SIGN1_TAG:
            raise CoseReceiptError("not a tagged COSE_Sign1")
        protected_bytes, unprotected, payload, signature = value.value
        protected = cbor2.loads(protected_bytes)
    except (cbor2.CBORDecodeError, ValueError, TypeError) as exc:
        if isinstance(exc, CoseReceiptError):
            raise
        raise CoseReceiptError(f"not a COSE_Sign1: {exc}") from None
    if not (_is_map(protected) and _is_map(unprotected) and isinstance(signature, bytes)):
        raise CoseReceiptError("malformed COSE_Sign1 headers")
    if payload is not None:
        raise CoseReceiptError("the payload (the tree root) must be detached")
    return protected_bytes, protected, unprotected, signature


def verify_cose_receipt(
    cose_receipt: bytes, leaf_hash: bytes, public_keys: Mapping[str, bytes]
) -> CoseReceiptClaim:
    """Check that `cose_receipt` proves `leaf_hash` in a tree whose root a known key signed."""
    protected_bytes, protected, unprotected, signature = _decode(cose_receipt)
    if protected.get(HEADER_ALG) != ALG_EDDSA or protected.get(HEADER_VDS) != VDS_RFC9162_SHA256:
        raise CoseReceiptError("protected header must carry alg EdDSA and vds RFC9162_SHA256")
    kid_raw = protected.get(HEADER_KID)
    kid = kid_raw.decode("ascii", "replace") if isinstance(kid_raw, bytes) else ""
    public_raw = public_keys.get(kid)
    if public_raw is None:
        raise CoseReceiptError(f"signed by unknown key {kid!r}")
    vdp: Any = unprotected.get(HEADER_VDP)
    proofs = vdp.get(INCLUSION_PROOFS) if _is_map(vdp) else None
    if not isinstance(proofs, list | tuple) or len(proofs) != 1 or not isinstance(proofs[0], bytes):
        raise CoseReceiptError("vdp must hold exactly one inclusion proof")
    try:
        size, index, path = cbor2.loads(proofs[0])
        if not (isinstance(size, int) and isinstance(index, int) and isinstance(path, list | tuple)):
            raise TypeError("inclusion proof must be [tree_size, leaf_index, [hashes]]")
        if len(path) > MAX_PATH or any(not isinstance(h, bytes) or len(h) != HASH_SIZE for h in path):
            raise TypeError("inclusion path must be at most 64 hashes of 32 bytes")
        root = root_from_inclusion(leaf_hash, index, size, path)
    except (cbor2.CBORDecodeError, ValueError, TypeError, ProofError) as exc:
        raise CoseReceiptError(f"inclusion proof: {exc}") from None
    try:
        Ed25519PublicKey.from_public_bytes(public_raw).verify(
            signature, _sig_structure(protected_bytes, root)
        )
    except InvalidSignature:
        raise CoseReceiptError("signature does not verify over the root the proof leads to") from None
    return CoseReceiptClaim(kid=kid, tree_size=size, leaf_index=index, root=root)
