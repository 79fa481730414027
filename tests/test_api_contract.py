"""HTTP contract v1 through litestar.testing, on SQLite and PostgreSQL:
correlation ids, duration header, versions, the error envelope for every
status, auth and scopes, tenant isolation, idempotency, rate limits,
deadlines, size limits, structured logs."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

import pytest

from ledger.domain.entries import RecordedEvent
from projections.receipt_index import RECEIPTS_TABLE
from tests.api_support import DOC, Api, api, make_api  # noqa: F401
from tests.conftest import RawStore

FORBIDDEN_IN_BODIES = ("Traceback", 'File "', "SELECT", "INSERT", "sqlite", "psycopg", "relation ")


def assert_envelope(
    response: Any, status: int, code: str | None = None, *, retryable: bool | None = None
) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert set(body) >= {"error", "run_id", "trace_id"}, body
    assert set(body["error"]) == {"code", "message", "retryable"}, body
    if code is not None:
        assert body["error"]["code"] == code, body
    if retryable is not None:
        assert body["error"]["retryable"] is retryable, body
    assert response.headers["x-run-id"] == body["run_id"]
    assert response.headers["x-trace-id"] == body["trace_id"]
    assert float(response.headers["x-request-duration-ms"]) >= 0
    for marker in FORBIDDEN_IN_BODIES:
        assert marker not in response.text, (marker, response.text)
    return body


def test_correlation_ids_versions_and_recorded_ids(api: Api) -> None:
    doc = api.document()
    response = api.client.post(
        "/v1/retrievals",
        json=api.retrieval_body(doc),
        headers=api.headers(**{"X-Run-Id": "duo-run-7", "X-Trace-Id": "trace-abc"}),
    )
    assert response.status_code == 201
    body = response.json()
    assert response.headers["x-run-id"] == "duo-run-7" == body["run_id"]
    assert response.headers["x-trace-id"] == "trace-abc" == body["trace_id"]
    assert float(response.headers["x-request-duration-ms"]) > 0
    assert body["server_version"] and body["policy_version"] == "none"
    event = api.client.get(f"/v1/events/{body['position']}", headers=api.headers()).json()["event"]
    assert event["run_id"] == "duo-run-7" and event["trace_id"] == "trace-abc"
    assert event["payload"]["task"]["trace_id"] == "trace-abc"
    assert event["signature"] == body["signature"] and event["kid"] == body["kid"]

    # generated when absent, different per request; W3C traceparent gives the trace id
    first = api.client.get("/v1/version")
    second = api.client.get("/v1/version")
    assert first.headers["x-run-id"] != second.headers["x-run-id"]
    assert first.json()["server_version"] and "policy_version" in first.json()
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    traced = api.client.get("/v1/version", headers={"traceparent": parent})
    assert traced.headers["x-trace-id"] == "4bf92f3577b34da6a3ce929d0e0e4736"


def test_invalid_correlation_header_is_400(api: Api) -> None:
    response = api.client.get("/v1/version", headers={"X-Run-Id": "bad id with spaces"})
    body = assert_envelope(response, 400, "bad_request")
    assert "X-Run-Id" in body["error"]["message"]
    assert body["run_id"] != "bad id with spaces"


def test_every_error_uses_the_envelope(api: Api) -> None:
    client, h = api.client, api.headers
    doc = api.document()
    # 400: schema validation, malformed JSON, query string too long
    assert_envelope(client.post("/v1/retrievals", json={"query": 5}, headers=h()), 400, "bad_request")
    malformed = client.post(
        "/v1/retrievals", content=b"{nope", headers={**h(), "content-type": "application/json"}
    )
    assert_envelope(malformed, 400, "bad_request")
    long_query = client.get("/v1/events?actor=" + "a" * 5000, headers=h())
    assert "4096" in assert_envelope(long_query, 400, "query_too_long")["error"]["message"]
    too_many = api.retrieval_body(doc)
    too_many["selected_entries"] = too_many["selected_entries"] * 201
    assert (
        "200"
        in assert_envelope(client.post("/v1/retrievals", json=too_many, headers=h()), 400)["error"]["message"]
    )
    # 401 missing / wrong token, 403 missing scope
    assert_envelope(client.get("/v1/keys"), 401, "unauthorized")
    assert_envelope(client.get("/v1/keys", headers={"Authorization": "Bearer clt_nope_nope"}), 401)
    assert_envelope(client.get("/v1/keys", headers={"Authorization": "Basic abc"}), 401)
    denied = client.post("/v1/retrievals", json=api.retrieval_body(doc), headers=h("reader"))
    assert "retrieval.write" in assert_envelope(denied, 403, "forbidden")["error"]["message"]
    assert_envelope(client.get("/v1/export", headers=h("writer")), 403)
    # 404: unknown route, unknown object
    assert_envelope(client.get("/v1/nothing-here", headers=h()), 404, "not_found")
    assert_envelope(client.get("/v1/events/999999", headers=h()), 404, "not_found")
    # 405
    assert_envelope(client.put("/v1/keys", headers=h()), 405, "method_not_allowed")
    # 413: body over the limit (4 MiB), YAML bundle over its limit
    huge = b'{"query": "' + b"x" * (5 * 1024 * 1024) + b'"}'
    too_large = client.post(
        "/v1/retrievals", content=huge, headers={**h(), "content-type": "application/json"}
    )
    assert_envelope(too_large, 413, "payload_too_large")
    bundle = client.post("/v1/policy-bundles", json={"bundle_yaml": "a: " + "b" * 300_000}, headers=h())
    assert "262144" in assert_envelope(bundle, 413, "bundle_too_large")["error"]["message"]
    # 422: a citation of a chunk the ledger never saw; YAML that is not a mapping
    unknown = api.retrieval_body(doc)
    unknown["selected_entries"][0]["chunk_id"] = "no-such-chunk"
    assert_envelope(client.post("/v1/retrievals", json=unknown, headers=h()), 422, "unknown_chunk")
    assert_envelope(client.post("/v1/policy-bundles", json={"bundle_yaml": "- a\n- b\n"}, headers=h()), 422)
    assert_envelope(client.post("/v1/policy-bundles", json={"bundle_yaml": "a: [\n"}, headers=h()), 422)


def test_other_tenant_objects_are_indistinguishable_from_missing(api: Api) -> None:
    doc = api.document()
    receipt = api.retrieval(doc)
    mine = api.client.get(f"/v1/receipts/{receipt['receipt_id']}", headers=api.headers())
    assert (
        mine.status_code == 200 and mine.json()["citations"][0]["citation_id"] == receipt["citation_ids"][0]
    )
    theirs = api.client.get(f"/v1/receipts/{receipt['receipt_id']}", headers=api.headers("other"))
    missing = api.client.get("/v1/receipts/0123456789abcdef", headers=api.headers("other"))
    a, b = assert_envelope(theirs, 404), assert_envelope(missing, 404)
    assert a["error"] == b["error"]
    assert theirs.headers.keys() == missing.headers.keys()
    pairs = [
        (f"/v1/events/{receipt['position']}", "/v1/events/999999"),
        (f"/v1/events/{receipt['position']}/inclusion-proof", "/v1/events/999999/inclusion-proof"),
        (f"/v1/receipts/{receipt['receipt_id']}/bundle", "/v1/receipts/0123456789abcdef/bundle"),
    ]
    for path, absent in pairs:
        hidden = assert_envelope(api.client.get(path, headers=api.headers("other")), 404)
        assert hidden["error"] == assert_envelope(api.client.get(absent, headers=api.headers()), 404)["error"]
    gone = api.client.delete(f"/v1/documents/{doc['document_id']}", headers=api.headers("other"))
    assert_envelope(gone, 404)
    # the other tenant cannot cite our chunks either
    cite = api.client.post("/v1/retrievals", json=api.retrieval_body(doc), headers=api.headers("other"))
    assert_envelope(cite, 422, "unknown_chunk")
    listed = api.client.get("/v1/receipts", headers=api.headers("other")).json()
    assert listed["receipts"] == []


def _events_of_type(api: Api, kind: str) -> list[RecordedEvent]:
    api.services.ledger.sync()
    return [e for e in api.services.ledger.read() if e.type == kind]


def test_idempotency_key(api: Api) -> None:
    doc = api.document()
    body = api.retrieval_body(doc)
    headers = api.headers(**{"Idempotency-Key": "order-42"})
    first = api.client.post("/v1/retrievals", json=body, headers=headers)
    again = api.client.post("/v1/retrievals", json=body, headers=headers)
    assert first.status_code == again.status_code == 201
    assert first.json()["dedup"] is False and again.json()["dedup"] is True
    assert again.json()["receipt_id"] == first.json()["receipt_id"]
    assert len(_events_of_type(api, "RetrievalRecorded")) == 1
    changed = {**body, "query": "something else"}
    reused = api.client.post("/v1/retrievals", json=changed, headers=headers)
    assert_envelope(reused, 409, "idempotency_key_reused", retryable=False)
    # keys are per tenant: another tenant's same key is its own
    assert len(_events_of_type(api, "RetrievalRecorded")) == 1
    # documents: dedup by content and by key
    same = api.client.post(
        "/v1/documents",
        json={
            "path": "handbook/retention.md",
            "text": DOC,
        },
        headers=api.headers(),
    )
    assert same.status_code == 200 and same.json()["dedup"] is True
    assert len(_events_of_type(api, "DocumentIngested")) == 1


def test_deadline_is_408_and_the_write_never_commits_after_it(make_api: Callable[..., Api]) -> None:
    api = make_api(request_deadline_s=0.3)
    doc = api.document()
    ledger = api.services.ledger
    headers = api.headers(**{"Idempotency-Key": "slow-1"})
    body = api.retrieval_body(doc)
    with ledger._lock:  # the store is busy (another writer holds the log): the request runs out of time
        started = time.monotonic()
        response = api.client.post("/v1/retrievals", json=body, headers=headers)
        assert time.monotonic() - started < 2.0
        size = ledger.size
    assert_envelope(response, 408, "request_timeout", retryable=True)
    # The queued write reaches the store once it is free, and is refused there: a 408 means
    # nothing was written, then or later.
    time.sleep(1.0)
    ledger.sync()
    assert ledger.size == size and len(_events_of_type(api, "RetrievalRecorded")) == 0
    # The store is free again: the retry gets an ordinary deadline (0.3 s is too short for a
    # PostgreSQL write on a loaded machine, and only the first request needed it short).
    api.client.app.deadline_s = 10.0
    retry = api.client.post("/v1/retrievals", json=body, headers=headers)
    assert retry.status_code == 201 and retry.json()["dedup"] is False  # runs afresh, once
    assert len(_events_of_type(api, "RetrievalRecorded")) == 1


@pytest.mark.parametrize("limiter", ["database", "redis"])
def test_rate_limit_holds_across_workers(make_api: Callable[..., Api], limiter: str) -> None:
    redis_url = "redis://127.0.0.1:6379/0" if limiter == "redis" else None
    worker_a = make_api(rate_limit_rps=0.5, rate_limit_burst=4, redis_url=redis_url)
    worker_b = make_api(rate_limit_rps=0.5, rate_limit_burst=4, redis_url=redis_url)
    token = {"Authorization": f"Bearer {worker_a.tokens['reader']}"}
    statuses = [
        (worker_a if i % 2 else worker_b).client.get("/v1/keys", headers=token).status_code for i in range(6)
    ]
    assert statuses[:4] == [200, 200, 200, 200], statuses
    assert statuses[4:] == [429, 429], statuses
    refused = worker_a.client.get("/v1/keys", headers=token)
    assert_envelope(refused, 429, "rate_limited", retryable=True)
    assert int(refused.headers["retry-after"]) >= 1
    # another token has its own bucket
    other = {"Authorization": f"Bearer {worker_a.tokens['writer']}"}
    assert worker_b.client.get("/v1/keys", headers=other).status_code == 403


def test_unhandled_error_is_a_500_envelope_without_details(api: Api, raw_store: RawStore) -> None:
    raw_store.execute(f"DROP TABLE {RECEIPTS_TABLE}")
    response = api.client.get("/v1/receipts", headers=api.headers())
    assert_envelope(response, 500, "internal_error", retryable=True)
    assert RECEIPTS_TABLE not in response.text
    assert int(response.headers["retry-after"]) >= 1  # every retryable 5xx says when to retry


def test_structured_log_line_has_ids_and_no_text(api: Api, caplog: pytest.LogCaptureFixture) -> None:
    doc = api.document(text="# Quokka\n\nzebra-quokka-secret paragraph.\n")
    caplog.set_level(logging.INFO, logger="citeledger.api.access")
    body = api.retrieval_body(doc, query="zebra-quokka-secret question")
    body["selected_entries"][0]["snippet"] = "zebra-quokka-secret paragraph."
    response = api.client.post(
        "/v1/retrievals", json=body, headers=api.headers(**{"X-Run-Id": "log-run", "X-Trace-Id": "log-trace"})
    )
    assert response.status_code == 201
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "citeledger.api.access"]
    line = next(item for item in lines if item["run_id"] == "log-run")
    assert line["trace_id"] == "log-trace" and line["status"] == 201 and line["route"] == "/v1/retrievals"
    assert line["tenant"] == "acme" and line["duration_ms"] >= 0
    assert all(
        "zebra" not in r.getMessage() and api.tokens["admin"] not in r.getMessage() for r in caplog.records
    )
    # the plain text never reaches the log: not in any entry
    export = api.client.get("/v1/export", headers=api.headers())
    assert export.status_code == 200 and b"zebra" not in export.content
    assert b"Quokka" not in export.content


def test_size_limits_name_the_limit(api: Api) -> None:
    doc = api.document()
    body = api.retrieval_body(doc)
    body["query"] = "q" * (16 * 1024 + 1)
    response = api.client.post("/v1/retrievals", json=body, headers=api.headers())
    assert "16384" in assert_envelope(response, 400)["error"]["message"]
    upload = api.client.post(
        "/v1/documents/upload", files={"file": ("a.md", b"\xff\xfe", "text/markdown")}, headers=api.headers()
    )
    assert_envelope(upload, 400, "bad_request")
