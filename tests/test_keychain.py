"""The one key-chain rule (ledger.keychain), as the ledger, verify and bundles apply it."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.domain.keychain import KeyChainError, check_key_event, possession_message
from ledger.evidence.bundle import BundleError, build_bundle, verify_bundle
from ledger.tlog.signing import b64, kid_for
from ledger.writing.application import Ledger
from tests.factories import TENANT, retrieval_draft


def _chain(ledger: Ledger) -> list[tuple[int, dict[str, Any]]]:
    ledger.rotate_signing_key()
    ledger.rotate_signing_key()
    return [(event.position, event.envelope) for event in ledger.key_events()]


def test_the_ledger_chain_follows_the_rule(ledger: Ledger) -> None:
    keys: dict[str, bytes] = {}
    current = None
    for position, envelope in _chain(ledger):
        current, public_raw = check_key_event(envelope, position, keys, current, ledger.root_public_key)
        keys[current] = public_raw
    assert keys == ledger.public_keys and current == ledger.signing_key().kid


def test_broken_links_are_named(ledger: Ledger) -> None:
    (p1, genesis), (p2, second), (p3, third) = _chain(ledger)
    root = ledger.root_public_key
    root_kid = kid_for(root)
    after_genesis = {root_kid: root}
    after_second = {
        **after_genesis,
        second["payload"]["new_kid"]: ledger.public_keys[second["payload"]["new_kid"]],
    }

    def problem(envelope: dict[str, Any], position: int, keys: dict[str, bytes], current: str | None) -> str:
        with pytest.raises(KeyChainError) as caught:
            check_key_event(envelope, position, keys, current, root)
        assert caught.value.position == position
        return caught.value.problem

    other_root = ledger.keydir.generate().public_raw
    check_key_event(genesis, 1, {}, None, root)
    with pytest.raises(KeyChainError, match="genesis key is not the trusted public key"):
        check_key_event(genesis, 1, {}, None, other_root)
    assert (
        problem(genesis, 1, after_genesis, root_kid) == "genesis key is not the trusted public key"
    )  # twice
    # skipping a link: the third key introduced while the first is still in force
    assert problem(third, p3, after_genesis, root_kid) == "key rotation not signed by the key in force"
    assert problem(second, p2, {}, None) == "key rotation not signed by the key in force"
    bad_possession = {
        **second,
        "payload": {**second["payload"], "possession_signature": genesis["signature"]},
    }
    assert (
        problem(bad_possession, p2, after_genesis, root_kid)
        == "key rotation without a valid proof of possession"
    )
    altered = {**third, "actor": "someone-else"}
    assert (
        problem(altered, p3, after_second, second["payload"]["new_kid"])
        == "key rotation signature does not verify"
    )
    assert problem({**third, "type": "DocumentRemoved"}, p3, after_second, None) == "not a key introduction"
    assert p1 == 1


def test_possession_message_is_the_canonical_triple() -> None:
    assert possession_message("00" * 8, b64(b"k" * 32), None) == (
        b'{"new_kid":"0000000000000000","previous_kid":null,"public_key":"' + b64(b"k" * 32).encode() + b'"}'
    )


def test_bundle_key_chain_uses_the_rule(ledger: Ledger) -> None:
    ledger.rotate_signing_key()
    event = ledger.append(retrieval_draft(ledger), tenant_id=TENANT)
    ledger.rotate_signing_key()
    bundle = build_bundle(ledger, event.position)
    assert verify_bundle(bundle, ledger.root_public_key)["position"] == event.position
    assert len(bundle["key_chain"]) == 3
    swapped = {**bundle, "key_chain": bundle["key_chain"][1:]}
    with pytest.raises(BundleError, match=r"key_chain\[0\]: key rotation not signed by the key in force"):
        verify_bundle(swapped, ledger.root_public_key)
