"""Export per tenant (issue 9): a tenant's token downloads only its own entries, each with an
inclusion proof against a signed checkpoint, plus the key chain; `verify --export` checks such
a partial export offline and names each kind of tampering; the whole log needs an operator
token bound to no tenant. Real app on SQLite and PostgreSQL, real offline checks."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import orjson
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from api.auth import read_token_file
from ledger.evidence.export_file import verify_export
from ledger.evidence.tenant_export import TENANT_EXPORT_FORMAT, verify_tenant_export
from ledger.tlog.checkpoints import make_checkpoint
from ledger.tlog.signing import SigningKey
from tests.api_support import Api, api, make_api  # noqa: F401 - fixtures
from tests.server_process import run_cli, without_citeledger_settings

ROOT = Path(__file__).resolve().parents[1]
ACME_DOC = "# Acme onboarding\n\nAcme badges are issued on day one.\n"
GLOBEX_DOC = "# Globex secrets\n\nGlobex vault codes rotate weekly.\n"


def _retrieval(api: Api, doc: dict[str, Any], snippet: str, who: str) -> dict[str, Any]:
    body = api.retrieval_body(doc)
    body["selected_entries"][0]["snippet"] = snippet
    response = api.client.post("/v1/retrievals", json=body, headers=api.headers(who))
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


def _two_tenants(api: Api) -> dict[str, Any]:
    """acme: a document and two retrievals; globex: a restricted document, a retrieval and a
    denial (a reader without the restricted scope reading the citation back)."""
    acme_doc = api.document(ACME_DOC, path="acme/onboarding.md")
    for _ in range(2):
        _retrieval(api, acme_doc, "Acme badges are issued on day one.", "admin")
    globex_doc = api.document(
        GLOBEX_DOC, who="other", path="globex/vault-procedures.md", sensitivity="restricted"
    )
    receipt = _retrieval(api, globex_doc, "Globex vault codes rotate weekly.", "other")
    denied = api.client.get(
        f"/v1/citations/{receipt['citation_ids'][0]}", headers=api.headers("other-reader")
    )
    assert denied.status_code == 403, denied.text
    return {"acme_doc": acme_doc, "globex_doc": globex_doc, "globex_receipt": receipt}


def _export(api: Api, who: str = "reader") -> bytes:
    response = api.client.get("/v1/export", headers=api.headers(who))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return bytes(response.content)


def _token_id(api: Api, who: str) -> str:
    return api.tokens[who].split("_", 2)[1]


def _entry_lines(export: bytes) -> list[dict[str, Any]]:
    return [value for value in map(orjson.loads, export.splitlines()) if value.get("kind") == "entry"]


def test_tenant_export_holds_nothing_of_another_tenant(api: Api) -> None:
    made = _two_tenants(api)
    acme = _export(api)
    globex_doc, receipt = made["globex_doc"], made["globex_receipt"]
    # No byte of globex's: tenant, path, document id, version, chunk ids, receipt, citations,
    # the actor (token id) of its writes and of its denial.
    secrets_of_globex = [
        b"globex",
        b"vault-procedures",
        globex_doc["document_id"].encode(),
        globex_doc["version_id"].encode(),
        *(chunk["chunk_id"].encode() for chunk in globex_doc["chunks"]),
        receipt["receipt_id"].encode(),
        *(citation.encode() for citation in receipt["citation_ids"]),
        _token_id(api, "other").encode(),
        _token_id(api, "other-reader").encode(),
        b"AccessDenied",
    ]
    for secret in secrets_of_globex:
        assert secret not in acme, secret
    # ... and it does hold acme's own entries, each with its proof.
    entries = _entry_lines(acme)
    assert [e["entry"]["type"] for e in entries] == [
        "DocumentIngested",
        "RetrievalRecorded",
        "RetrievalRecorded",
    ]
    assert all(e["entry"]["tenant_id"] == "acme" for e in entries)
    assert made["acme_doc"]["document_id"].encode() in acme and b"acme/onboarding.md" in acme
    # globex's own export is the mirror image: its three entries, none of acme's.
    globex = _export(api, "other-reader")
    assert [e["entry"]["type"] for e in _entry_lines(globex)] == [
        "DocumentIngested",
        "RetrievalRecorded",
        "AccessDenied",
    ]
    assert b"acme" not in globex and _token_id(api, "admin").encode() not in globex


def test_tenant_export_verifies_offline_and_covers_the_newest_entry(api: Api, tmp_path: Path) -> None:
    made = _two_tenants(api)
    ledger = api.services.ledger
    before = ledger.latest_checkpoint()
    newest = _retrieval(api, made["acme_doc"], "Acme badges are issued on day one.", "admin")
    assert before is None or before.tree_size < newest["position"]
    path = tmp_path / "acme.jsonl"
    path.write_bytes(_export(api))
    header = orjson.loads(path.read_bytes().splitlines()[0])
    assert header["format"] == TENANT_EXPORT_FORMAT and header["tenant_id"] == "acme"
    report = verify_tenant_export(path, ledger.root_public_key)
    assert report.ok, report.first_bad
    assert report.tenant_id == "acme" and report.entries == 4
    assert report.last_position == newest["position"]  # a checkpoint was issued on demand
    assert report.checkpoint is not None and report.checkpoint.tree_size >= newest["position"]
    assert report.key_entries == len(ledger.key_events(up_to=report.checkpoint.tree_size)) >= 1


def test_key_rotation_is_in_the_chain_of_a_tenant_export(api: Api, tmp_path: Path) -> None:
    made = _two_tenants(api)
    api.services.ledger.rotate_signing_key()
    _retrieval(api, made["acme_doc"], "Acme badges are issued on day one.", "admin")  # new key
    path = tmp_path / "acme.jsonl"
    path.write_bytes(_export(api))
    report = verify_tenant_export(path, api.services.ledger.root_public_key)
    assert report.ok, report.first_bad
    assert report.key_entries == 2 and report.entries == 4
    kids = {e["entry"]["kid"] for e in _entry_lines(path.read_bytes())}
    assert len(kids) == 2  # entries signed before and after the rotation both checked


def _tampered(path: Path, edit: Any, out: Path) -> Path:
    lines = path.read_bytes().split(b"\n")[:-1]
    out.write_bytes(b"\n".join(edit(lines)) + b"\n")
    return out


def _entry_index(lines: list[bytes], which: int = 0) -> int:
    return [i for i, line in enumerate(lines) if line.startswith(b'{"kind":"entry"')][which]


def test_tampering_with_a_tenant_export_is_named(api: Api, tmp_path: Path) -> None:
    _two_tenants(api)
    root_key = api.services.ledger.root_public_key
    acme = tmp_path / "acme.jsonl"
    acme.write_bytes(_export(api))
    globex = tmp_path / "globex.jsonl"
    globex.write_bytes(_export(api, "other-reader"))
    assert verify_tenant_export(acme, root_key).ok and verify_tenant_export(globex, root_key).ok

    def problem(edit: Any) -> tuple[int | None, str]:
        report = verify_tenant_export(_tampered(acme, edit, tmp_path / "bad.jsonl"), root_key)
        assert not report.ok
        bad = report.first_bad
        assert bad is not None
        return bad.position, bad.problem

    first_entry = _entry_lines(acme.read_bytes())[0]["entry"]["position"]

    def changed_byte(lines: list[bytes]) -> list[bytes]:
        i = _entry_index(lines)
        lines[i] = lines[i].replace(b'"actor":"token:', b'"actor":"tokeN:', 1)
        return lines

    assert problem(changed_byte) == (
        first_entry,
        "entry changed: neither its signature nor its inclusion proof verifies",
    )

    def wrong_proof(lines: list[bytes]) -> list[bytes]:
        i = _entry_index(lines)
        at = lines[i].index(b'"hashes":["') + len(b'"hashes":["')
        flipped = b"0" if lines[i][at : at + 1] != b"0" else b"1"
        lines[i] = lines[i][:at] + flipped + lines[i][at + 1 :]
        return lines

    position, text = problem(wrong_proof)
    assert position == first_entry and text.startswith("inclusion proof does not verify against checkpoint #")

    def forged_checkpoint(lines: list[bytes]) -> list[bytes]:
        real = orjson.loads(lines[1])["checkpoint"]
        impostor = SigningKey(kid=real["kid"], public_raw=b"", private=Ed25519PrivateKey.generate())
        forged = make_checkpoint(
            seq=real["seq"],
            origin=api.services.ledger.origin,
            tree_size=real["tree_size"],
            root=bytes(32),
            issued_at=real["issued_at"],
            key=impostor,
        )
        lines[1] = orjson.dumps({"checkpoint": forged.to_json()})
        return lines

    position, text = problem(forged_checkpoint)
    assert text.startswith("checkpoint signature invalid")

    def root_edited(lines: list[bytes]) -> list[bytes]:
        record = orjson.loads(lines[1])
        record["checkpoint"]["root"] = "00" * 32
        lines[1] = orjson.dumps(record)
        return lines

    assert "differs from the signed note" in problem(root_edited)[1]

    def spliced(lines: list[bytes]) -> list[bytes]:
        theirs = globex.read_bytes().split(b"\n")
        lines.insert(_entry_index(lines, -1) + 1, theirs[_entry_index(theirs)])
        return lines

    position, text = problem(spliced)
    assert text == "entry of tenant 'globex' in an export of tenant 'acme' (spliced in from another export)"

    def dropped(lines: list[bytes]) -> list[bytes]:
        del lines[_entry_index(lines, 1)]
        return lines

    assert "lines removed or added" in problem(dropped)[1]
    assert problem(lambda lines: lines[:-1])[1] == "file ends without its trailer (cut off)"

    def tenant_renamed(lines: list[bytes]) -> list[bytes]:
        i = _entry_index(lines)
        lines[i] = lines[i].replace(b'"tenant_id":"acme"', b'"tenant_id":"acmf"')
        lines[0] = lines[0].replace(b'"tenant_id":"acme"', b'"tenant_id":"acmf"')
        return lines

    assert problem(tenant_renamed) == (
        first_entry,
        "entry changed: neither its signature nor its inclusion proof verifies",
    )


def test_whole_log_needs_an_operator_token(api: Api, tmp_path: Path) -> None:
    _two_tenants(api)
    # A tenant's admin never gets the whole log.
    refused = api.client.get("/v1/operator/export", headers=api.headers("admin"))
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "forbidden"
    assert "operator token" in refused.json()["error"]["message"]
    assert b"globex" not in refused.content
    assert api.client.get("/v1/operator/export").status_code == 401
    # The operator gets every tenant's entries, verifiable as a whole log.
    whole = api.client.get("/v1/operator/export", headers=api.headers("operator"))
    assert whole.status_code == 200
    assert whole.headers["content-type"].startswith("application/x-ndjson")
    path = tmp_path / "whole.jsonl"
    path.write_bytes(whole.content)
    report = verify_export(path, api.services.ledger.root_public_key, deep=True)
    assert report.ok, report.first_bad
    assert report.entries == api.services.ledger.size
    assert b'"tenant_id":"acme"' in whole.content and b'"tenant_id":"globex"' in whole.content
    # ... and nothing else: it is bound to no tenant.
    for path_ in ("/v1/export", "/v1/keys", "/v1/receipts", "/v1/events"):
        response = api.client.get(path_, headers=api.headers("operator"))
        assert response.status_code == 403, (path_, response.text)
        assert "bound to no tenant" in response.json()["error"]["message"]
    citation = api.client.get("/v1/citations/anything", headers=api.headers("operator"))
    assert citation.status_code == 403
    writes = api.client.post(
        "/v1/documents", json={"path": "x.md", "text": "# x\n"}, headers=api.headers("operator")
    )
    assert writes.status_code == 403


def _cli(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    return run_cli([*args, "--data-dir", str(data_dir)], without_citeledger_settings())


def test_cli_verify_says_what_a_partial_export_proves(api: Api, tmp_path: Path) -> None:
    _two_tenants(api)
    data_dir = api.config.ledger.data_dir
    public_key = data_dir / "keys" / "root.pub"
    path = tmp_path / "acme.jsonl"
    path.write_bytes(_export(api))
    told = _cli("verify", "--export", str(path), "--public-key", str(public_key), data_dir=tmp_path / "none")
    assert told.returncode == 0, told.stdout + told.stderr
    lines = told.stdout.splitlines()
    assert lines[0] == "OK: no problem found"
    assert "export: partial, tenant 'acme' only (not the whole log)" in lines
    assert "entry signatures checked: 3 of 3" in lines and "inclusion proofs checked: 3 of 3" in lines
    assert any(line.startswith("does not prove: that the tenant has no other entries") for line in lines)
    as_json = _cli(
        "verify", "--export", str(path), "--public-key", str(public_key), "--json", data_dir=tmp_path / "none"
    )
    summary = json.loads(as_json.stdout)
    assert summary["ok"] and summary["partial"] and summary["tenant_id"] == "acme"
    assert summary["entries"] == summary["signatures_checked"] == summary["inclusion_proofs_checked"] == 3
    # A changed byte: exit 1, the position named.
    raw = path.read_bytes().replace(b'"type":"RetrievalRecorded"', b'"type":"RetrievalRecorder"', 1)
    path.write_bytes(raw)
    broken = _cli(
        "verify", "--export", str(path), "--public-key", str(public_key), data_dir=tmp_path / "none"
    )
    assert broken.returncode == 1
    assert broken.stdout.splitlines()[0].startswith("FAILED: position ")
    assert "entry changed" in broken.stdout.splitlines()[0]
    # Not an export at all: exit 1 with one line, no traceback.
    path.write_text('{"format": "something-else"}\n')
    alien = _cli("verify", "--export", str(path), "--public-key", str(public_key), data_dir=tmp_path / "none")
    assert alien.returncode == 1 and "not a citeledger-export/1 file" in alien.stderr
    assert "Traceback" not in alien.stderr


def test_tokens_create_operator(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    assert _cli("init", data_dir=data_dir).returncode == 0
    made = _cli("tokens", "create", "--operator", data_dir=data_dir)
    assert made.returncode == 0, made.stderr
    bearer = made.stdout.strip()
    assert bearer.startswith("clt_")
    (record,) = read_token_file(data_dir / "tokens.json")
    assert record.kind == "operator" and record.tenant == "" and record.scopes == ()
    assert bearer not in (data_dir / "tokens.json").read_text()
    mixed = _cli("tokens", "create", "--operator", "--tenant", "acme", data_dir=data_dir)
    assert mixed.returncode == 2 and "no tenant" in mixed.stderr
    missing = _cli("tokens", "create", "--tenant", "acme", data_dir=data_dir)
    assert missing.returncode == 2 and "--scopes" in missing.stderr
