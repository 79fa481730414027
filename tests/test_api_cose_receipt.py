"""COSE Receipts (RFC 9942) for the receipts' inclusion proofs: served at
GET /v1/receipts/{id}/receipt.cose and carried in bundles, decoded here with cbor2,
rfc8785 and Ed25519 only (the root recomputed by the independent spec reading in
tests/independent_tlog.py); verify-bundle rejects an altered one."""

from __future__ import annotations

import base64
import copy

import cbor2
import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from client import BundleError, verify_bundle
from tests import independent_tlog as spec
from tests.api_support import Api, api, make_api  # noqa: F401 - fixtures


def test_cose_receipt_decodes_and_verifies_independently(api: Api) -> None:
    receipt = api.retrieval(api.document())
    receipt_id = receipt["receipt_id"]
    reader = api.headers("reader")
    served = api.client.get(f"/v1/receipts/{receipt_id}/receipt.cose", headers=reader)
    assert served.status_code == 200 and served.headers["content-type"].startswith("application/cose")
    bundle = api.client.get(f"/v1/receipts/{receipt_id}/bundle", headers=reader).json()["bundle"]
    assert base64.b64decode(bundle["cose_receipt"]) == served.content  # the same receipt in both

    sign1 = cbor2.loads(served.content)
    assert isinstance(sign1, cbor2.CBORTag) and sign1.tag == 18
    protected_bytes, unprotected, payload, signature = sign1.value
    protected = cbor2.loads(protected_bytes)
    assert protected[1] == -8 and protected[395] == 1  # EdDSA, RFC9162_SHA256
    assert payload is None  # detached: the root
    [proof_bytes] = unprotected[396][-1]
    tree_size, leaf_index, path = cbor2.loads(proof_bytes)

    envelope = api.client.get(f"/v1/receipts/{receipt_id}", headers=reader).json()["event"]
    assert leaf_index == envelope["position"] - 1
    root = spec.root_from_inclusion(leaf_index, tree_size, spec.leaf(rfc8785.dumps(envelope)), path)
    assert root.hex() == bundle["checkpoint"]["root"] and tree_size == bundle["checkpoint"]["tree_size"]
    keys = api.client.get("/v1/keys", headers=reader).json()["keys"]
    public = {k["kid"]: base64.b64decode(k["public_key"]) for k in keys}[protected[4].decode()]
    Ed25519PublicKey.from_public_bytes(public).verify(
        signature, cbor2.dumps(["Signature1", protected_bytes, b"", root])
    )

    root_pub = (api.config.ledger.keys_dir / "root.pub").read_text()
    assert verify_bundle(bundle, root_pub)["position"] == envelope["position"]
    forged = copy.deepcopy(bundle)
    altered = bytearray(served.content)
    altered[-5] ^= 1  # inside the signature
    forged["cose_receipt"] = base64.b64encode(bytes(altered)).decode()
    with pytest.raises(BundleError, match="cose_receipt"):
        verify_bundle(forged, root_pub)
    other = api.client.get("/v1/receipts/nope/receipt.cose", headers=reader)
    assert other.status_code == 404
