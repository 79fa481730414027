"""What a batch request reuses while it runs, and that nothing of it outlives the request:
derived keys (the data-key store's cache, dropped the moment a key is shredded) and the chunk
texts it unsealed (this request only); the
metrics a batch's entries are counted in (tallied once per kind)."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.writing.application import Ledger
from ledger.writing.sealing import KeyDestroyed, document_key_ref, expiry_key_ref
from tests.api_support import Api, api, make_api  # noqa: F401
from tests.factories import TENANT


def _refs() -> tuple[str, str]:
    return document_key_ref(TENANT, "doc-reuse"), expiry_key_ref(TENANT, "2030-01-01", "doc-reuse")


def test_a_derived_key_is_reused_while_its_data_keys_are_cached_and_values_still_unseal(
    ledger: Ledger,
) -> None:
    """A batch seals hundreds of values under the same few refs: the key derived from them
    (HKDF, AES-GCM object) is derived once, not per value."""
    sealer = ledger.sealer
    document, expiry = _refs()
    refs = (document, expiry)
    first = sealer._key(refs, TENANT, create=True)
    assert sealer._key(refs, TENANT, create=False) is first
    sealed = [
        sealer.seal(f"text {n}", tenant_id=TENANT, key_ref=document, extra_key_refs=[expiry])
        for n in range(3)
    ]
    assert len({value.nonce for value in sealed}) == 3
    assert [sealer.unseal(value, tenant_id=TENANT) for value in sealed] == ["text 0", "text 1", "text 2"]


def test_a_derived_key_is_gone_the_moment_one_of_its_data_keys_is_shredded(ledger: Ledger) -> None:
    sealer = ledger.sealer
    document, expiry = _refs()
    sealed = sealer.seal("soon gone", tenant_id=TENANT, key_ref=document, extra_key_refs=[expiry])
    assert sealer.unseal(sealed, tenant_id=TENANT) == "soon gone"
    sealer.keys.destroy(expiry, TENANT, "retention")
    with pytest.raises(KeyDestroyed):
        sealer.unseal(sealed, tenant_id=TENANT)
    with pytest.raises(KeyDestroyed):
        sealer.seal("again", tenant_id=TENANT, key_ref=document, extra_key_refs=[expiry])


def _item(api: Api, doc: dict[str, Any], key: str, snippet: str | None = None) -> dict[str, Any]:
    body = api.retrieval_body(doc, query=f"query {key}")
    if snippet is not None:
        body["selected_entries"][0]["snippet"] = snippet
    return {"idempotency_key": key, "retrieval": body}


def _batch(api: Api, items: list[Any]) -> list[dict[str, Any]]:
    response = api.client.post("/v1/retrievals/batch", json={"items": items}, headers=api.headers("writer"))
    assert response.status_code == 200, response.text
    results: list[dict[str, Any]] = response.json()["results"]
    return results


def test_items_citing_one_chunk_are_each_checked_against_its_text(api: Api) -> None:
    doc = api.document()
    good = api.retrieval_body(doc)["selected_entries"][0]["snippet"]
    items = [
        _item(api, doc, "k-0"),
        _item(api, doc, "k-1", snippet="words the chunk never held"),
        _item(api, doc, "k-2", snippet=good[: len(good) // 2]),
        _item(api, doc, "k-3"),
    ]
    results = _batch(api, items)
    assert [r["http_status"] for r in results] == [201, 422, 201, 201], results
    assert results[1]["error"]["code"] == "snippet_not_in_chunk"


def test_a_later_batch_does_not_quote_text_an_earlier_one_unsealed(api: Api) -> None:
    doc = api.document()
    assert [r["http_status"] for r in _batch(api, [_item(api, doc, "k-before")])] == [201]
    erased = api.client.post("/v1/erasures", json={"document_id": doc["document_id"]}, headers=api.headers())
    assert erased.status_code in (200, 201, 202), erased.text
    after = _batch(api, [_item(api, doc, "k-after")])
    assert after[0]["http_status"] == 422, after
    assert after[0]["error"]["code"] == "chunk_scrubbed"


def test_a_batch_counts_every_entry_in_the_metrics(api: Api) -> None:
    doc = api.document()
    refused = _item(api, doc, "k-refused", snippet="words the chunk never held")
    results = _batch(api, [_item(api, doc, f"k-{n}") for n in range(7)] + [refused])
    assert [r["http_status"] for r in results] == [201] * 7 + [422]
    text = api.client.get("/v1/metrics").text
    assert 'citeledger_events_appended_total{type="RetrievalRecorded"} 7.0' in text
    assert 'citeledger_retrievals_total{status="ok"} 7.0' in text
