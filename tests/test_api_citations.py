"""Citation read-back, erasure, legal holds and retention through the real
routes (status, header and exact body), on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any

import pytest

from ledger.storage.audit import verify_store
from ledger.usecases.retention import sweep
from ledger.writing.sealing import KeyDestroyed
from tests.api_support import DOC, Api, api, make_api  # noqa: F401 - fixtures

IDS = {"X-Run-Id": "run-fixed", "X-Trace-Id": "trace-fixed"}
NOT_FOUND_BODY = {
    "error": {"code": "not_found", "message": "The requested citation was not found", "retryable": False},
    "run_id": "run-fixed",
    "trace_id": "trace-fixed",
}


def _cite(api: Api, **document: Any) -> tuple[dict[str, Any], str]:
    doc = api.document(**document)
    receipt = api.retrieval(doc)
    return doc, receipt["citation_ids"][0]


def _get(api: Api, citation_id: str, who: str = "reader", mcp: bool = False, **extra: str) -> Any:
    path = "/v1/mcp/chunks/" if mcp else "/v1/citations/"
    return api.client.get(path + citation_id, headers=api.headers(who, **IDS, **extra))


@pytest.mark.parametrize("mcp", [False, True])
def test_live_citation_reads_back(api: Api, mcp: bool) -> None:
    _, citation_id = _cite(api)
    response = _get(api, citation_id, mcp=mcp)
    assert response.status_code == 200, response.text
    assert "x-replay-reason" not in response.headers
    data = response.json()["data"]
    # The chunk as the ledger recorded it at ingest, and where the cited snippet is in it.
    assert data["chunk_text"] == "# Retention\n\nAudit logs are kept for 180 days."
    span = data["cited_span"]
    assert data["chunk_text"][span["start"] : span["end"]] == "Audit logs are kept for 180 days."
    assert data["citation_id"] == citation_id and data["path"] == "handbook/retention.md"
    assert response.json()["server_version"] and "policy_version" in response.json()


@pytest.mark.parametrize(
    "citation_id",
    ["does-not-exist", "0" * 32, "x" * 3000, "%E2%9C%93%E2%9C%93", "..%2F..%2Fetc%2Fpasswd", "a:b@c.d-e"],
)
def test_unknown_ids_of_any_shape_get_the_same_404(api: Api, citation_id: str) -> None:
    for mcp in (False, True):
        response = _get(api, citation_id, mcp=mcp)
        assert response.status_code == 404
        assert response.headers["x-replay-reason"] == "chunk_not_found"
        assert response.json() == NOT_FOUND_BODY


def test_another_tenants_citation_is_not_found(api: Api) -> None:
    _, citation_id = _cite(api)
    response = _get(api, citation_id, who="other")
    assert response.status_code == 404 and response.headers["x-replay-reason"] == "chunk_not_found"
    assert response.json() == NOT_FOUND_BODY


def test_expired_citation_is_not_found_before_and_after_the_sweep(api: Api) -> None:
    _, citation_id = _cite(api)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=400)
    api.services.clock = lambda: later
    before = _get(api, citation_id)
    assert before.status_code == 404 and before.headers["x-replay-reason"] == "chunk_not_found"
    scrubbed = sweep(api.services.context, later)
    assert scrubbed and scrubbed[-1].payload["reason"] == "retention_expired"
    after = _get(api, citation_id)
    assert after.status_code == 404 and after.headers["x-replay-reason"] == "chunk_not_found"
    assert before.content == after.content
    api.services.ledger.issue_checkpoint()
    assert verify_store(api.services.ledger.store, api.services.ledger.root_public_key, deep=True).ok


def test_scrubbed_citation_404_body_is_byte_identical(api: Api) -> None:
    doc, citation_id = _cite(api)
    missing = _get(api, "never-existed")
    erased = api.client.post(
        "/v1/erasures", json={"document_id": doc["document_id"]}, headers=api.headers("admin")
    )
    assert erased.status_code == 200, erased.text
    assert erased.json()["already_erased"] is False
    gone = _get(api, citation_id)
    assert gone.status_code == 404 and gone.headers["x-replay-reason"] == "chunk_retention_expired"
    assert gone.content == missing.content
    again = api.client.post(
        "/v1/erasures", json={"document_id": doc["document_id"]}, headers=api.headers("admin")
    )
    assert again.status_code == 200 and again.json()["already_erased"] is True


def test_restricted_citation_needs_the_scope_and_logs_the_denial(api: Api) -> None:
    _, citation_id = _cite(api, sensitivity="restricted")
    denied = _get(api, citation_id, who="reader")
    assert denied.status_code == 403
    assert denied.headers["x-replay-reason"] == "restricted_scope_required"
    assert denied.json()["error"]["message"] == "The requested citation requires knowledge.restricted.read"
    events = api.client.get("/v1/events?type=AccessDenied&order=asc", headers=api.headers("admin")).json()
    denial = [e for e in events["events"] if e["type"] == "AccessDenied"]
    assert denial and denial[-1]["payload"]["resource_id"] == citation_id
    assert denial[-1]["signature"]
    allowed = _get(api, citation_id, who="admin")  # admin holds knowledge.restricted.read
    assert allowed.status_code == 200


def test_auth_and_stateless_mcp(api: Api) -> None:
    _, citation_id = _cite(api)
    assert api.client.get(f"/v1/citations/{citation_id}").status_code == 401
    bad = api.client.get(f"/v1/citations/{citation_id}", headers={"Authorization": "Bearer nope"})
    assert bad.status_code == 401 and "x-replay-reason" not in bad.headers
    session = _get(api, citation_id, mcp=True, **{"Mcp-Session-Id": "abc"})
    assert session.status_code == 400 and session.json()["error"]["code"] == "bad_request"


def test_erasure_of_unknown_targets_and_bad_requests(api: Api) -> None:
    post = api.client.post
    assert post("/v1/erasures", json={"document_id": "nope"}, headers=api.headers()).status_code == 404
    assert post("/v1/erasures", json={"subject_id": "nobody"}, headers=api.headers()).status_code == 404
    both = post("/v1/erasures", json={"document_id": "a", "subject_id": "b"}, headers=api.headers())
    assert both.status_code == 400 and both.json()["error"]["code"]
    assert post("/v1/erasures", json={"document_id": "a"}, headers=api.headers("reader")).status_code == 403


def test_subject_erasure_destroys_their_queries(api: Api) -> None:
    doc = api.document()
    body = {**api.retrieval_body(doc), "subject_id": "subj-42"}
    receipt = api.client.post("/v1/retrievals", json=body, headers=api.headers("writer"))
    assert receipt.status_code == 201, receipt.text
    event = api.services.ledger.get(receipt.json()["position"])
    sealer = api.services.ledger.sealer
    assert sealer.unseal(event.payload["query"], tenant_id="acme") == body["query"]
    erased = api.client.post("/v1/erasures", json={"subject_id": "subj-42"}, headers=api.headers())
    assert erased.status_code == 200, erased.text
    with pytest.raises(KeyDestroyed):
        sealer.unseal(event.payload["query"], tenant_id="acme")
    citation = _get(api, receipt.json()["citation_ids"][0])
    assert citation.status_code == 200  # the document's text is not the subject's


def test_legal_hold_blocks_erasure_and_retention_until_released(api: Api) -> None:
    doc, citation_id = _cite(api)
    hold = api.client.post(
        "/v1/legal-holds",
        json={"document_ids": [doc["document_id"]], "legal_basis": "Litigation hold, case 2026-17"},
        headers=api.headers(),
    )
    assert hold.status_code == 201, hold.text
    hold_id = hold.json()["hold_id"]
    refused = api.client.post("/v1/erasures", json={"document_id": doc["document_id"]}, headers=api.headers())
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "legal_hold" and refused.json()["hold_ids"] == [hold_id]
    assert "Litigation" not in refused.text  # the legal basis is sealed, never echoed

    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=400)
    sweep(api.services.context, later)
    citation = api.services.read_models.citation("acme", citation_id)
    assert api.services.read_models.citation_text(citation, api.services.ledger.sealer)  # spared

    released = api.client.delete(f"/v1/legal-holds/{hold_id}", headers=api.headers())
    assert released.status_code == 200 and released.json()["already_released"] is False
    assert api.client.delete("/v1/legal-holds/unknown-hold", headers=api.headers()).status_code == 404
    erased = api.client.post("/v1/erasures", json={"document_id": doc["document_id"]}, headers=api.headers())
    assert erased.status_code == 200
    types = [e["type"] for e in api.client.get("/v1/events", headers=api.headers()).json()["events"]]
    assert {"LegalHoldPlaced", "LegalHoldReleased", "RetentionScrubbed"} <= set(types)


def test_erased_text_is_nowhere_in_files_rows_or_logs(api: Api, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    marker = "ZEBRA-7731-unique-passage"
    doc = api.document(text=f"# Secret\n\nThe code word is {marker}.\n")
    body = api.retrieval_body(doc)
    body["selected_entries"][0]["snippet"] = f"The code word is {marker}."
    receipt = api.client.post("/v1/retrievals", json=body, headers=api.headers())
    assert receipt.status_code == 201
    assert _get(api, receipt.json()["citation_ids"][0]).json()["data"]["chunk_text"].endswith(f"{marker}.")
    erased = api.client.post("/v1/erasures", json={"document_id": doc["document_id"]}, headers=api.headers())
    assert erased.status_code == 200
    ledger = api.services.ledger
    assert marker not in caplog.text
    if ledger.config.database_url is None:
        base = ledger.config.sqlite_path
        for path in (base, Path(f"{base}-wal"), Path(f"{base}-shm")):
            if path.exists():
                assert marker.encode() not in path.read_bytes(), path
    else:
        with ledger.store.transaction(commit=False) as cursor:
            cursor.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                (ledger.store.schema,),
            )
            tables = [row["table_name"] for row in cursor.fetchall()]
            assert tables
            for table in tables:
                cursor.execute(
                    f'SELECT count(*) AS n FROM "{ledger.store.schema}"."{table}" t '
                    "WHERE t::text LIKE %s OR encode(convert_to(t::text, 'UTF8'), 'escape') LIKE %s",
                    (f"%{marker}%", f"%{marker}%"),
                )
                assert cursor.fetchone()["n"] == 0, table
    ledger.issue_checkpoint()
    assert verify_store(ledger.store, ledger.root_public_key, deep=True).ok


def test_subject_erasure_also_erases_documents_about_them(api: Api) -> None:
    doc = api.document(text="# File\n\nNotes about the data subject.\n", subject_id="subj-7")
    body = api.retrieval_body(doc)
    body["selected_entries"][0]["snippet"] = "Notes about the data subject."
    recorded = api.client.post("/v1/retrievals", json=body, headers=api.headers())
    assert recorded.status_code == 201, recorded.text
    citation_id = recorded.json()["citation_ids"][0]
    ingested = api.services.ledger.get(doc["position"])
    chunk = ingested.payload["chunks"][0]["text"]
    assert chunk["extra_key_refs"] == ["subject/acme/subj-7"]
    assert _get(api, citation_id).status_code == 200
    erased = api.client.post("/v1/erasures", json={"subject_id": "subj-7"}, headers=api.headers())
    assert erased.status_code == 200, erased.text
    assert erased.json()["erased"]["document_ids"] == [doc["document_id"]]
    with pytest.raises(KeyDestroyed):
        api.services.ledger.sealer.unseal(chunk, tenant_id="acme")
    gone = _get(api, citation_id)
    assert gone.status_code == 404 and gone.headers["x-replay-reason"] == "chunk_retention_expired"


def test_a_chunk_kept_by_a_new_version_is_cited_in_the_version_it_was_read_from(api: Api) -> None:
    """Chunk ids come from content, so an unchanged section has the same id in v1 and v2: a
    citation names its version, and its bundle proves that version's entry."""
    v1 = api.document()
    before = api.retrieval(v1)
    v2 = api.document(
        DOC.replace("Restricted documents need a scope.", "Restricted documents need two scopes.")
    )
    assert v2["version"] == 2 and v2["document_id"] == v1["document_id"]
    assert v2["chunks"][0]["chunk_id"] == v1["chunks"][0]["chunk_id"]  # the Retention section
    assert v2["chunks"][1]["chunk_id"] != v1["chunks"][1]["chunk_id"]  # the Access section
    after = api.retrieval(v2)
    for receipt, version in ((before, v1), (after, v2)):
        response = api.client.get(
            f"/v1/receipts/{receipt['receipt_id']}/bundle", headers=api.headers("reader")
        )
        assert response.status_code == 200, response.text
        bundle = response.json()["bundle"]
        [entry] = bundle["entry"]["payload"]["selected_entries"]
        assert entry["version_id"] == version["version_id"]
        [citation] = bundle["citations"]
        assert citation["document"]["entry"]["payload"]["version_id"] == version["version_id"]
        read = api.client.get(f"/v1/citations/{receipt['citation_ids'][0]}", headers=api.headers("reader"))
        assert read.status_code == 200, read.text
        assert read.json()["data"]["chunk_text"] == "# Retention\n\nAudit logs are kept for 180 days."
        assert read.json()["data"]["version_id"] == version["version_id"]
