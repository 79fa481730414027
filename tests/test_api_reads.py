"""Writes and compliance reads through the API, checked with the ledger's own
verifiers: bundles (with the cited documents' proofs), exports, proofs, keys."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.auth import TokenStore, digest, ensure_bootstrap_token
from cli.main import app as cli_app
from ledger.evidence.bundle import verify_bundle
from ledger.evidence.export_file import verify_export
from ledger.tlog.canonical import canonical_json
from ledger.tlog.checkpoints import CheckpointRecord
from ledger.tlog.merkle import leaf_hash, verify_consistency, verify_inclusion
from tests.api_support import DOC, Api, api, make_api  # noqa: F401


def test_bundle_carries_verifiable_proofs_of_the_cited_documents(api: Api) -> None:
    doc = api.document()
    receipt = api.retrieval(doc)
    response = api.client.get(f"/v1/receipts/{receipt['receipt_id']}/bundle", headers=api.headers("reader"))
    assert response.status_code == 200, response.text
    bundle = response.json()["bundle"]
    root_key = api.services.ledger.root_public_key
    entry = verify_bundle(bundle, root_key)
    assert entry["payload"]["receipt_id"] == receipt["receipt_id"]
    checkpoint = CheckpointRecord.from_json(bundle["checkpoint"])
    [citation] = bundle["citations"]
    assert citation["citation_id"] == receipt["citation_ids"][0]
    document = citation["document"]
    assert document["entry"]["type"] == "DocumentIngested"
    assert citation["chunk_id"] in {c["chunk_id"] for c in document["entry"]["payload"]["chunks"]}
    proof = document["inclusion_proof"]
    verify_inclusion(
        leaf_hash(canonical_json(document["entry"])),
        proof["leaf_index"],
        checkpoint.tree_size,
        [bytes.fromhex(h) for h in proof["hashes"]],
        checkpoint.root,
    )
    tampered = json.loads(json.dumps(document["entry"]))
    tampered["payload"]["path"] = "elsewhere.md"
    with pytest.raises(Exception, match=r"(?i)proof|root"):
        verify_inclusion(
            leaf_hash(canonical_json(tampered)),
            proof["leaf_index"],
            checkpoint.tree_size,
            [bytes.fromhex(h) for h in proof["hashes"]],
            checkpoint.root,
        )


def test_a_receipt_bundle_against_the_latest_checkpoint(api: Api) -> None:
    """`?checkpoint=latest`: the receipt is still in the log as it stands today (what `receipts
    show` checks), not only in the first checkpoint that covered it."""
    doc = api.document()
    receipt = api.retrieval(doc)
    url = f"/v1/receipts/{receipt['receipt_id']}/bundle"
    first = api.client.get(url, headers=api.headers("reader")).json()["bundle"]
    for _ in range(3):
        api.retrieval(doc)
    newest = api.services.ledger.issue_checkpoint()
    latest = api.client.get(url + "?checkpoint=latest", headers=api.headers("reader")).json()["bundle"]
    assert first["checkpoint"]["tree_size"] < latest["checkpoint"]["tree_size"] == newest.tree_size
    root_key = api.services.ledger.root_public_key
    assert verify_bundle(latest, root_key)["payload"]["receipt_id"] == receipt["receipt_id"]
    assert api.client.get(url + "?checkpoint=newest", headers=api.headers("reader")).status_code == 400


def test_export_streams_a_log_that_verifies_offline(api: Api, tmp_path: Path) -> None:
    doc = api.document()
    for _ in range(3):
        api.retrieval(doc)
    api.services.ledger.issue_checkpoint()
    response = api.client.get("/v1/operator/export", headers=api.headers("operator"))  # the whole log
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/x-ndjson")
    assert response.headers["x-run-id"]
    path = tmp_path / "export.jsonl"
    path.write_bytes(response.content)
    report = verify_export(path, api.services.ledger.root_public_key, deep=True)
    assert report.ok, report.first_bad
    assert report.entries == api.services.ledger.size
    lines = path.read_bytes().splitlines()
    assert b"external:test-rag" in lines[-1]
    lines[-1] = lines[-1].replace(b"external:test-rag", b"external:forged-rag")
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert not verify_export(path, api.services.ledger.root_public_key, deep=True).ok


def test_inclusion_consistency_checkpoint_and_keys(api: Api) -> None:
    doc = api.document()
    first = api.retrieval(doc)
    small = api.services.ledger.issue_checkpoint()
    assert small is not None
    api.retrieval(doc)
    api.services.ledger.rotate_signing_key()
    api.retrieval(doc)
    h = api.headers("reader")
    latest = api.client.get("/v1/checkpoints/latest", headers=h).json()["checkpoint"]
    assert latest["tree_size"] == small.tree_size
    proof = api.client.get(f"/v1/events/{first['position']}/inclusion-proof", headers=h).json()
    event = api.client.get(f"/v1/events/{first['position']}", headers=h).json()
    verify_inclusion(
        bytes.fromhex(event["leaf_hash"]),
        proof["inclusion_proof"]["leaf_index"],
        proof["tree_size"],
        [bytes.fromhex(x) for x in proof["inclusion_proof"]["hashes"]],
        bytes.fromhex(proof["checkpoint"]["root"]),
    )
    assert leaf_hash(canonical_json(event["event"])).hex() == event["leaf_hash"]
    size = api.services.ledger.size
    consistency = api.client.get(
        f"/v1/checkpoints/consistency?from={small.tree_size}&to={size}", headers=h
    ).json()
    verify_consistency(
        small.tree_size,
        size,
        small.root,
        bytes.fromhex(consistency["new_root"]),
        [bytes.fromhex(x) for x in consistency["hashes"]],
    )
    assert consistency["old_root"] == small.root.hex()
    # Well formed but an impossible range: 422 (the schema allows both numbers).
    bad = api.client.get(f"/v1/checkpoints/consistency?from={size}&to=1", headers=h)
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_range"
    keys = api.client.get("/v1/keys", headers=h).json()
    assert [k["active"] for k in keys["keys"]] == [False, True]
    old, new = keys["keys"]
    assert new["previous_kid"] == old["kid"] and old["valid_until"] == new["valid_from"]
    assert base64.b64decode(keys["root_public_key"]) == api.services.ledger.root_public_key
    last = api.client.get(f"/v1/events/{api.services.ledger.size}", headers=h).json()["event"]
    assert last["kid"] == new["kid"]


def test_documents_versions_upload_and_removal(api: Api) -> None:
    first = api.document()
    assert first["version"] == 1 and first["dedup"] is False and len(first["chunks"]) == 2
    assert first["chunks"][0]["start_line"] == 1
    second = api.document(text=DOC + "\nA new paragraph.\n")
    assert second["version"] == 2 and second["supersedes_version_id"] == first["version_id"]
    assert second["document_id"] == first["document_id"]
    upload = api.client.post(
        "/v1/documents/upload",
        files={"file": ("guide.md", b"# Guide\n\nStep one.\n", "text/markdown")},
        data={"sensitivity": "restricted"},
        headers=api.headers("writer"),
    )
    assert upload.status_code == 201, upload.text
    event = api.client.get(f"/v1/events/{upload.json()['position']}", headers=api.headers()).json()["event"]
    assert event["payload"]["path"] == "guide.md" and event["payload"]["sensitivity"] == "restricted"
    assert "Step one" not in json.dumps(event)
    assert event["payload"]["chunks"][0]["text"]["key_ref"] == f"document/acme/{upload.json()['document_id']}"
    removed = api.client.delete(f"/v1/documents/{first['document_id']}", headers=api.headers("writer"))
    assert removed.status_code == 200 and removed.json()["removed"] is True
    again = api.client.delete(f"/v1/documents/{first['document_id']}", headers=api.headers("writer"))
    assert again.status_code == 404
    removal = api.client.get(f"/v1/events/{removed.json()['position']}", headers=api.headers()).json()[
        "event"
    ]
    assert removal["type"] == "DocumentRemoved" and removal["payload"]["reason"] == "withdrawn"


def test_policy_bundle_versions_the_responses_and_snapshots_receipts(api: Api) -> None:
    doc = api.document()
    published = api.client.post(
        "/v1/policy-bundles",
        json={"bundle_yaml": "version: pol-2025-09\nrules:\n  - id: r1\n    action: allow\n"},
        headers=api.headers(),
    )
    assert published.status_code == 201 and published.json()["policy_version"] == "pol-2025-09"
    same = api.client.post(
        "/v1/policy-bundles",
        json={"bundle_yaml": "version: pol-2025-09\nrules:\n  - id: r1\n    action: allow\n"},
        headers=api.headers(),
    )
    assert same.status_code == 200 and same.json()["dedup"] is True
    receipt = api.retrieval(doc)
    assert receipt["policy_version"] == "pol-2025-09"
    event = api.client.get(f"/v1/events/{receipt['position']}", headers=api.headers()).json()["event"]
    assert event["payload"]["policy_snapshot"]["bundle_hash"] == published.json()["bundle_sha256"]
    assert api.client.get("/v1/version").json()["policy_version"] == "none"  # tenant `default` has none
    denied = api.client.post(
        "/v1/policy-bundles", json={"bundle_yaml": "a: 1\n"}, headers=api.headers("writer")
    )
    assert denied.status_code == 403


def test_event_and_receipt_listings_filter_and_page(api: Api) -> None:
    doc = api.document()
    made = [api.retrieval(doc, **{"X-Run-Id": f"run-{i % 2}"}) for i in range(5)]
    h = api.headers("reader")
    seen: list[int] = []
    cursor = None
    while True:
        url = "/v1/events?type=RetrievalRecorded&limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = api.client.get(url, headers=h).json()
        seen += [e["position"] for e in page["events"]]
        assert all("signature" in e for e in page["events"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [m["position"] for m in reversed(made)]  # newest first unless order=asc
    run0 = api.client.get("/v1/events?run_id=run-0&order=asc", headers=h).json()["events"]
    assert [e["position"] for e in run0] == [m["position"] for i, m in enumerate(made) if i % 2 == 0]
    by_receipt = api.client.get(f"/v1/events?receipt_id={made[2]['receipt_id']}", headers=h).json()["events"]
    assert [e["position"] for e in by_receipt] == [made[2]["position"]]
    ranged = api.client.get(
        f"/v1/events?from_position={made[1]['position']}&to_position={made[3]['position']}&order=asc",
        headers=h,
    ).json()["events"]
    assert [e["position"] for e in ranged] == [m["position"] for m in made[1:4]]
    future = api.client.get("/v1/events?since=2999-01-01T00:00:00Z", headers=h).json()["events"]
    assert future == []
    receipts = api.client.get("/v1/receipts?run_id=run-1&limit=1", headers=h).json()
    assert len(receipts["receipts"]) == 1 and receipts["next_cursor"]
    rest = api.client.get(
        f"/v1/receipts?run_id=run-1&limit=5&cursor={receipts['next_cursor']}", headers=h
    ).json()
    ids = [r["receipt_id"] for r in receipts["receipts"] + rest["receipts"]]
    assert ids == [m["receipt_id"] for i, m in reversed(list(enumerate(made))) if i % 2 == 1]
    # The right shape, but never issued by this API: 422.
    bad = api.client.get("/v1/events?cursor=zzzz", headers=h)
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_cursor"
    assert api.client.get("/v1/events", headers=api.headers("other")).json()["events"] == []


def test_ops_routes(api: Api) -> None:
    api.retrieval(api.document())
    health = api.client.get("/v1/healthz").json()
    assert health["store_ok"] is True and health["projections_ok"] is True and health["lag"] == 0
    assert health["uptime_s"] >= 0 and "last_error" in health and health["server_version"]
    version = api.client.get("/v1/version").json()
    assert version["server_version"] and version["policy_version"]
    metrics = api.client.get("/v1/metrics")
    assert metrics.status_code == 200
    text = metrics.text
    assert (
        'citeledger_http_request_duration_seconds_bucket{le="0.005",method="POST",route="/v1/retrievals"'
        in text
    )
    assert 'citeledger_events_appended_total{type="RetrievalRecorded"} 1.0' in text
    assert 'citeledger_retrievals_total{status="ok"} 1.0' in text
    schema = api.client.get("/schema/openapi.json")
    assert schema.status_code == 200 and "/v1/retrievals" in schema.json()["paths"]


def test_tokens_cli_and_bootstrap(tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(cli_app, ["init", "--data-dir", str(tmp_path)]).exit_code == 0
    result = runner.invoke(
        cli_app,
        [
            "tokens",
            "create",
            "--tenant",
            "acme",
            "--scopes",
            "audit.read,retrieval.write",
            "--data-dir",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 0, result.output
    bearer = result.stdout.strip().splitlines()[-1]
    path = tmp_path / "tokens.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    stored = path.read_text()
    assert bearer not in stored and bearer.split("_", 2)[2] not in stored and digest(bearer) in stored
    principal = TokenStore(path).authenticate(bearer)
    assert principal is not None and principal.tenant == "acme"
    assert principal.scopes == {"audit.read", "retrieval.write"}
    assert TokenStore(path).authenticate(bearer + "x") is None
    bad = runner.invoke(
        cli_app, ["tokens", "create", "--tenant", "acme", "--scopes", "root", "--data-dir", str(tmp_path)]
    )
    assert bad.exit_code == 2
    # first start: an all-scopes token for `default`, from CITELEDGER_BOOTSTRAP_TOKEN when set
    fresh = tmp_path / "fresh" / "tokens.json"
    assert ensure_bootstrap_token(fresh, "dev-token") == "dev-token"
    assert ensure_bootstrap_token(fresh, "dev-token") is None  # printed once only
    boot = TokenStore(fresh).authenticate("dev-token")
    assert boot is not None and boot.tenant == "default" and "admin" in boot.scopes
