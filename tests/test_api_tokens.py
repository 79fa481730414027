"""Tokens listed, created and revoked by the operator over HTTP, with expiry and "last used":
a revoked or expired token gets the unknown token's 401, each change is a signed entry
(never the secret nor its hash), a tenant token cannot manage tokens. Both stores."""

from __future__ import annotations

import os
import stat
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from api.auth import create_token, digest, read_token_file, revoke_in_file
from api.token_usage import usage_path
from ledger.storage.audit import verify_store
from ledger.writing.application import Ledger
from ledger.writing.integrity import Finding
from tests.api_support import Api, api, make_api  # noqa: F401


def _secrets_absent(text: str, api: Api, *extra: str) -> None:
    """No bearer value nor its SHA-256 anywhere in `text`."""
    for bearer in [*api.tokens.values(), *extra]:
        assert bearer not in text
        assert digest(bearer) not in text


def _log_size(api: Api) -> int:
    return int(api.services.ledger.size)


def _unknown_401(api: Api) -> dict[str, Any]:
    response = api.client.get("/v1/receipts", headers={"Authorization": "Bearer clt_nope_nope"})
    assert response.status_code == 401
    body: dict[str, Any] = response.json()["error"]
    return body


def test_operator_lists_creates_and_revokes_tokens_each_a_signed_entry(api: Api) -> None:
    op = api.headers("operator")
    listed = api.client.get("/v1/operator/tokens", headers=op)
    assert listed.status_code == 200, listed.text
    tokens = listed.json()["tokens"]
    assert {t["tenant"] for t in tokens} == {"acme", "globex", None}
    assert all(t["status"] == "active" and t["created_at"] for t in tokens)
    _secrets_absent(listed.text, api)

    created = api.client.post(
        "/v1/operator/tokens",
        json={"tenant": "acme", "scopes": ["audit.read"], "expires_in": "30d"},
        headers=op,
    )
    assert created.status_code == 201, created.text
    body = created.json()
    bearer, token = body["bearer"], body["token"]
    assert bearer.startswith(f"clt_{token['token_id']}_")
    assert token["scopes"] == ["audit.read"] and token["expires_at"] and token["status"] == "active"
    assert digest(bearer) not in created.text
    new_headers = {"Authorization": f"Bearer {bearer}"}
    assert api.client.get("/v1/receipts", headers=new_headers).status_code == 200

    revoked = api.client.delete(f"/v1/operator/tokens/{token['token_id']}", headers=op)
    assert revoked.status_code == 200, revoked.text
    assert revoked.json()["token"]["status"] == "revoked" and revoked.json()["already_revoked"] is False
    refused = api.client.get("/v1/receipts", headers=new_headers)
    assert refused.status_code == 401
    assert refused.json()["error"] == _unknown_401(api)  # same answer as a token never issued
    again = api.client.delete(f"/v1/operator/tokens/{token['token_id']}", headers=op)
    assert again.status_code == 200 and again.json()["already_revoked"] is True
    assert again.json()["position"] is None
    assert api.client.delete("/v1/operator/tokens/nope", headers=op).status_code == 404

    # The signed record: who issued and revoked what, when; never the secret or its hash.
    ledger: Ledger = api.services.ledger
    entries = [e for e in ledger.read() if e.type in ("TokenIssued", "TokenRevoked")]
    assert [e.type for e in entries] == ["TokenIssued", "TokenRevoked"]
    issued, gone = entries
    assert issued.position == body["position"] and gone.position == revoked.json()["position"]
    assert issued.tenant_id == "acme" and issued.envelope["actor"].startswith("token:")
    assert issued.payload == {
        "token_id": token["token_id"],
        "kind": "tenant",
        "tenant": "acme",
        "scopes": ["audit.read"],
        "expires_at": token["expires_at"],
    }
    assert gone.payload == {"token_id": token["token_id"], "kind": "tenant", "tenant": "acme"}
    for entry in entries:
        assert bearer.encode() not in entry.entry and digest(bearer).encode() not in entry.entry
    report = verify_store(ledger.store, ledger.root_public_key, deep=True)
    assert report.ok, report
    # ... and in the tenant's history.
    history = api.client.get(
        "/v1/events?type=TokenIssued&type=TokenRevoked&order=asc", headers=api.headers("reader")
    )
    assert history.status_code == 200, history.text
    assert [e["type"] for e in history.json()["events"]] == ["TokenIssued", "TokenRevoked"]
    other = api.client.get("/v1/events?type=TokenIssued", headers=api.headers("other"))
    assert other.json()["events"] == []  # another tenant's token is not globex's business


def test_a_tenant_token_cannot_manage_tokens_and_bad_bodies_write_nothing(api: Api) -> None:
    before, file_before = _log_size(api), api.config.token_path.read_bytes()
    for who in ("admin", "other"):
        assert api.client.get("/v1/operator/tokens", headers=api.headers(who)).status_code == 403
        made = api.client.post(
            "/v1/operator/tokens", json={"tenant": "acme", "scopes": ["admin"]}, headers=api.headers(who)
        )
        assert made.status_code == 403
        assert api.client.delete("/v1/operator/tokens/bootstrap", headers=api.headers(who)).status_code == 403
    assert api.client.get("/v1/operator/tokens").status_code == 401
    schema = api.client.get("/schema/openapi.json").json()["paths"]
    operations = [("/v1/operator/tokens", "get"), ("/v1/operator/tokens", "post")]
    for path, method in [*operations, ("/v1/operator/tokens/{token_id}", "delete")]:
        documented = schema[path][method]
        assert {"401", "403"} <= set(documented["responses"]) and documented["security"], (path, method)
    allowed = api.client.options("/v1/operator/tokens")
    assert allowed.status_code == 204 and allowed.headers["allow"] == "GET, OPTIONS, POST"
    op = api.headers("operator")
    bad: list[tuple[dict[str, Any], int, str]] = [
        ({"tenant": "acme", "scopes": ["root"]}, 400, "scopes"),
        ({"tenant": "acme", "scopes": []}, 422, "scopes"),
        ({"tenant": "Not A Tenant", "scopes": ["audit.read"]}, 400, "tenant"),
        ({"scopes": ["audit.read"]}, 422, "tenant"),
        ({"operator": True, "tenant": "acme"}, 422, "operator"),
        ({"tenant": "acme", "scopes": ["audit.read"], "expires_in": "5x"}, 400, "expires_in"),
        (
            {"tenant": "acme", "scopes": ["audit.read"], "expires_at": "2001-01-01T00:00:00Z"},
            422,
            "expires_at",
        ),
        ({"tenant": "acme", "scopes": ["audit.read"], "expires_at": "yesterday"}, 422, "expires_at"),
        (
            {
                "tenant": "acme",
                "scopes": ["audit.read"],
                "expires_in": "1d",
                "expires_at": "2099-01-01T00:00:00Z",
            },
            422,
            "expires_in",
        ),
        ({"tenant": "acme", "scopes": ["audit.read"], "secret_sha256": "00" * 32}, 400, "secret_sha256"),
        ({"tenant": "acme", "scopes": "audit.read"}, 400, "scopes"),
    ]
    for body, status, field in bad:
        answer = api.client.post("/v1/operator/tokens", json=body, headers=op)
        assert answer.status_code == status, (body, answer.text)
        assert field in answer.json()["error"]["message"], (body, answer.text)
    assert api.client.delete("/v1/operator/tokens/" + "x" * 300, headers=op).status_code in (400, 404)
    assert _log_size(api) == before
    assert api.config.token_path.read_bytes() == file_before


def test_expired_token_gets_the_unknown_answer_and_files_are_private(api: Api) -> None:
    path = api.config.token_path
    expired = create_token(path, "acme", ["audit.read"], expires_at="2020-01-01T00:00:00Z")
    soon = create_token(
        path,
        "acme",
        ["audit.read"],
        expires_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 2)),
    )
    api.services.tokens.refresh()
    answer = api.client.get("/v1/receipts", headers={"Authorization": f"Bearer {expired}"})
    assert answer.status_code == 401 and answer.json()["error"] == _unknown_401(api)
    assert api.client.get("/v1/receipts", headers={"Authorization": f"Bearer {soon}"}).status_code == 200
    time.sleep(2.1)
    assert api.client.get("/v1/receipts", headers={"Authorization": f"Bearer {soon}"}).status_code == 401
    statuses = {
        t["status"]
        for t in api.client.get("/v1/operator/tokens", headers=api.headers("operator")).json()["tokens"]
    }
    assert "expired" in statuses
    for private in (path, path.with_name(path.name + ".lock"), usage_path(path)):
        assert stat.S_IMODE(os.stat(private).st_mode) == 0o600, private


def test_last_used_is_noted_at_most_once_a_minute(api: Api) -> None:
    reader = api.headers("reader")
    assert api.client.get("/v1/receipts", headers=reader).status_code == 200
    notes = usage_path(api.config.token_path)
    first = notes.stat().st_mtime_ns
    for _ in range(20):
        assert api.client.get("/v1/receipts", headers=reader).status_code == 200
    assert notes.stat().st_mtime_ns == first  # twenty requests, no write
    listed = api.client.get("/v1/operator/tokens", headers=api.headers("operator")).json()["tokens"]
    reader_id = api.tokens["reader"].split("_")[1]
    used = {t["token_id"]: t["last_used_at"] for t in listed}
    assert used[reader_id] is not None
    never = [
        r.token_id
        for r in read_token_file(api.config.token_path)
        if r.tenant == "globex" and "admin" in r.scopes
    ]
    assert used[never[0]] is None


def test_concurrent_changes_to_the_tokens_file_lose_nothing(tmp_path: Path) -> None:
    """Creates and revocations from several writers at once (the CLI and API workers): the
    file's lock keeps every one of them."""
    path = tmp_path / "tokens.json"
    first = [create_token(path, "acme", ["audit.read"]).split("_")[1] for _ in range(8)]

    def create_many(_: int) -> None:
        for _ in range(10):
            create_token(path, "acme", ["audit.read"])

    def revoke_all(_: int) -> None:
        for token_id in first:
            revoke_in_file(path, token_id)

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda job: job(0), [create_many, create_many, create_many, revoke_all]))
    records = read_token_file(path)
    assert len(records) == 8 + 30
    assert {r.token_id for r in records if r.revoked_at is not None} == set(first)


def test_a_revocation_whose_entry_cannot_be_written_still_revokes_and_a_repeat_records_it(api: Api) -> None:
    """Writes held (an integrity finding): no token can be created (its entry comes first),
    a revocation takes effect anyway (503 names the hold), and revoking again after the
    repair writes the missing entry, once."""
    op = api.headers("operator")
    ledger: Ledger = api.services.ledger
    reader_id = api.tokens["reader"].split("_")[1]
    ledger.hold(Finding("witness_refused", "test:held-for-tokens", "a witness refused the checkpoint"))
    before = ledger.size
    made = api.client.post(
        "/v1/operator/tokens", json={"tenant": "acme", "scopes": ["audit.read"]}, headers=op
    )
    assert made.status_code == 503 and made.json()["error"]["code"] == "integrity_hold"
    assert len(read_token_file(api.config.token_path)) == len(api.tokens)  # no token without its entry
    held = api.client.delete(f"/v1/operator/tokens/{reader_id}", headers=op)
    assert held.status_code == 503 and held.json()["error"]["code"] == "integrity_hold"
    assert api.client.get("/v1/receipts", headers=api.headers("reader")).status_code == 401
    assert ledger.size == before
    ledger.repair(actor="operator")
    again = api.client.delete(f"/v1/operator/tokens/{reader_id}", headers=op)
    assert again.status_code == 200 and again.json()["already_revoked"] is False, again.text
    third = api.client.delete(f"/v1/operator/tokens/{reader_id}", headers=op)
    assert third.json()["already_revoked"] is True
    revoked = [e for e in ledger.read() if e.type == "TokenRevoked"]
    assert [e.payload["token_id"] for e in revoked] == [reader_id]


def test_a_token_made_by_another_process_works_at_once(api: Api) -> None:
    """A token written to the file a moment ago (by `citeledger tokens create`, or another worker)
    is known on the very next request: an unknown token id costs one stat of the file, not a wait
    for the once-a-second re-read (which still bounds revocation of a known token)."""
    assert api.client.get("/v1/keys", headers=api.headers()).status_code == 200  # the store is read
    for _ in range(5):
        made = create_token(api.config.token_path, "acme", ["audit.read"])
        answer = api.client.get("/v1/keys", headers={"Authorization": f"Bearer {made}"})
        assert answer.status_code == 200, answer.text
    unknown = api.client.get("/v1/keys", headers={"Authorization": "Bearer clt_nosuchid_secret"})
    assert unknown.status_code == 401
