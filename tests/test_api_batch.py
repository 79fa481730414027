"""POST /v1/retrievals/batch on SQLite and PostgreSQL: per-item results (a bad item is
refused by index, the others recorded), one transaction for the accepted items,
repeated keys answered from their record (`dedup: true`), limits."""

from __future__ import annotations

from typing import Any

from tests.api_support import Api, api, make_api  # noqa: F401


def _item(api: Api, doc: dict[str, Any], key: str, query: str = "how long?") -> dict[str, Any]:
    return {"idempotency_key": key, "retrieval": api.retrieval_body(doc, query=query)}


def _events(api: Api, event_type: str) -> list[dict[str, Any]]:
    response = api.client.get(f"/v1/events?type={event_type}&limit=500&order=asc", headers=api.headers())
    assert response.status_code == 200, response.text
    events: list[dict[str, Any]] = response.json()["events"]
    return events


def _batch(api: Api, items: list[Any], who: str = "writer", **headers: str) -> Any:
    return api.client.post("/v1/retrievals/batch", json={"items": items}, headers=api.headers(who, **headers))


def test_bad_items_are_refused_by_index_while_the_others_are_recorded(api: Api) -> None:
    doc = api.document()
    unknown = _item(api, doc, "k-unknown")
    unknown["retrieval"]["selected_entries"][0]["chunk_id"] = "no-such-chunk"
    malformed = _item(api, doc, "k-malformed")
    malformed["retrieval"]["engine"] = "internal"
    made_up = _item(api, doc, "k-made-up")
    made_up["retrieval"]["selected_entries"][0]["snippet"] = "text the chunk never held"
    items = [_item(api, doc, "k-0"), unknown, _item(api, doc, "k-2"), malformed, 7, made_up]
    response = _batch(api, items)
    assert response.status_code == 200, response.text
    body = response.json()
    results = body["results"]
    assert [r["index"] for r in results] == list(range(6))
    assert [r["http_status"] for r in results] == [201, 422, 201, 422, 422, 422]
    assert results[1]["error"]["code"] == "unknown_chunk"
    assert "selected_entries[0]" in results[1]["error"]["message"]
    assert results[3]["error"]["code"] == "invalid_item"
    assert results[3]["error"]["message"].startswith("retrieval.engine:")
    assert results[4]["error"]["code"] == "invalid_item"
    assert results[5]["error"]["code"] == "snippet_not_in_chunk"
    assert all(r["error"]["retryable"] is False for r in results if "error" in r)
    assert (body["recorded"], body["dedup"], body["refused"]) == (2, 0, 4)
    recorded = {e["payload"]["receipt_id"] for e in _events(api, "RetrievalRecorded")}
    assert recorded == {results[0]["receipt_id"], results[2]["receipt_id"]}
    for index in (0, 2):
        receipt = api.client.get(f"/v1/receipts/{results[index]['receipt_id']}", headers=api.headers())
        assert receipt.status_code == 200, receipt.text


def test_accepted_items_share_one_transaction_and_carry_their_own_correlation(api: Api) -> None:
    doc = api.document()
    items = [_item(api, doc, f"k-{i}", query=f"query {i}") for i in range(40)]
    items[3]["trace_id"] = "trace-of-item-3"
    items[3]["run_id"] = "run-of-item-3"
    before = api.services.committer.batches
    response = _batch(api, items, **{"X-Trace-Id": "batch-trace"})
    assert response.status_code == 200, response.text
    assert api.services.committer.batches == before + 1
    positions = [r["position"] for r in response.json()["results"]]
    assert positions == list(range(positions[0], positions[0] + 40))
    events = {e["payload"]["receipt_id"]: e for e in _events(api, "RetrievalRecorded")}
    results = response.json()["results"]
    assert events[results[3]["receipt_id"]]["trace_id"] == "trace-of-item-3"
    assert events[results[3]["receipt_id"]]["run_id"] == "run-of-item-3"
    assert events[results[4]["receipt_id"]]["trace_id"] == "batch-trace"


def test_repeated_keys_are_answered_from_their_record(api: Api) -> None:
    doc = api.document()
    single = api.client.post(
        "/v1/retrievals",
        json=api.retrieval_body(doc, query="first tried alone"),
        headers=api.headers("writer", **{"Idempotency-Key": "k-alone"}),
    )
    assert single.status_code == 201, single.text
    items = [_item(api, doc, "k-a"), _item(api, doc, "k-alone", query="first tried alone")]
    items.append(_item(api, doc, "k-a"))  # the same key twice in one batch
    first = _batch(api, items).json()["results"]
    assert [r["dedup"] for r in first] == [False, True, True]
    assert first[1]["receipt_id"] == single.json()["receipt_id"]
    assert first[2]["receipt_id"] == first[0]["receipt_id"]
    count = len(_events(api, "RetrievalRecorded"))
    again = _batch(api, items).json()
    assert [r["dedup"] for r in again["results"]] == [True, True, True]
    assert [r["receipt_id"] for r in again["results"]] == [r["receipt_id"] for r in first]
    assert (again["recorded"], again["dedup"]) == (0, 3)
    assert len(_events(api, "RetrievalRecorded")) == count == 2
    reused = _batch(api, [_item(api, doc, "k-a", query="a different request")]).json()["results"][0]
    assert reused["http_status"] == 409
    assert reused["error"]["code"] == "idempotency_key_reused"


def test_limits_scope_and_a_malformed_batch(api: Api) -> None:
    doc = api.document()
    too_many = _batch(api, [_item(api, doc, f"k-{i}") for i in range(1001)])
    assert too_many.status_code == 400, too_many.text
    assert "items" in too_many.json()["error"]["message"]
    assert _batch(api, []).status_code == 400
    assert api.client.post("/v1/retrievals/batch", json=[1], headers=api.headers("writer")).status_code == 400
    assert _batch(api, [_item(api, doc, "k-r")], who="reader").status_code == 403
    assert _events(api, "RetrievalRecorded") == []


def test_a_full_batch_of_a_thousand(api: Api) -> None:
    doc = api.document()
    response = _batch(api, [_item(api, doc, f"k-{i}", query=f"q{i}") for i in range(1000)])
    assert response.status_code == 200, response.text
    assert response.json()["recorded"] == 1000
    assert len({r["receipt_id"] for r in response.json()["results"]}) == 1000
