"""Documents by path (issue 30): `GET /v1/documents?path=&source=` on a real server on both
stores, and `citeledger documents show|erase|hold` in a real subprocess. A path that names
nothing is a 404 naming it; a bad path a 4xx naming the rule; a restricted document is not
there for a caller without the scope; another tenant's is not there at all; no text is shown."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx

from ledger.config import LedgerConfig
from tests import loopback_http
from tests.api_support import bearer, serving
from tests.server_process import run_cli

SECRET = "# Budget\n\nThe acquisition budget is nine million.\n"


def _post(http: httpx.Client, token: str, path: str, body: dict[str, object]) -> dict[str, object]:
    answer = http.post(path, json=body, headers=bearer(token))
    assert answer.status_code in (200, 201), answer.text
    result: dict[str, object] = answer.json()
    return result


def test_a_document_is_found_by_its_path(ledger_config: LedgerConfig) -> None:
    with (
        serving(ledger_config) as (server, _, tokens),
        loopback_http.client(base_url=server.base_url) as http,
    ):
        admin = tokens["admin"]
        first = _post(
            http,
            admin,
            "/v1/documents",
            {"path": "policies/leave.md", "text": "# Leave\n\nSixteen weeks.\n", "source": "hr"},
        )
        _post(
            http,
            admin,
            "/v1/documents",
            {"path": "policies/leave.md", "text": "# Leave\n\nEighteen weeks.\n", "source": "hr"},
        )
        _post(
            http,
            admin,
            "/v1/documents",
            {"path": "policies/leave.md", "text": "# Leave\n\nA copy elsewhere.\n", "source": "wiki"},
        )
        _post(
            http,
            admin,
            "/v1/documents",
            {"path": "security/budget.md", "text": SECRET, "sensitivity": "restricted"},
        )
        searched = _post(
            http, admin, "/v1/search", {"input": {"query": "leave weeks", "target_roots": ["hr"]}}
        )
        assert searched["status"] == "ok"

        found = http.get(
            "/v1/documents",
            params={"path": "policies/leave.md", "source": "hr"},
            headers=bearer(tokens["reader"]),
        )
        assert found.status_code == 200, found.text
        [doc] = found.json()["documents"]
        assert doc["document_id"] == first["document_id"] and doc["source"] == "hr"
        assert [v["version"] for v in doc["versions"]] == [1, 2]
        assert doc["versions"][0]["live_to_position"] == doc["versions"][1]["live_from_position"]
        assert doc["receipts_citing"] == 1 and doc["erased"] is None and doc["held_by"] == []
        assert "weeks" not in found.text  # metadata only, never text

        anywhere = http.get(
            "/v1/documents", params={"path": "policies/leave.md"}, headers=bearer(tokens["reader"])
        )
        assert sorted(d["source"] for d in anywhere.json()["documents"]) == ["hr", "wiki"]

        # A path that names nothing, a restricted document without the scope, another tenant's: 404.
        for params, who in (
            ({"path": "policies/nowhere.md"}, "reader"),
            ({"path": "security/budget.md"}, "reader"),
            ({"path": "policies/leave.md"}, "other-reader"),
        ):
            missing = http.get("/v1/documents", params=params, headers=bearer(tokens[who]))
            assert missing.status_code == 404, missing.text
            assert missing.json()["error"]["message"] == f"document at path {params['path']!r} not found"
        assert (
            http.get(
                "/v1/documents", params={"path": "security/budget.md"}, headers=bearer(admin)
            ).status_code
            == 200
        )

        # Bad input: a clear 4xx naming the field or rule, never a 5xx.
        for params in (
            {"path": "../etc/passwd"},
            {"path": "/abs.md"},
            {},
            {"path": "a.md", "source": "bad source"},
            {"path": "x" * 2000},
        ):
            bad = http.get("/v1/documents", params=params, headers=bearer(tokens["reader"]))
            assert 400 <= bad.status_code < 500, (params, bad.text)
        assert http.get("/v1/documents", params={"path": "a.md"}).status_code == 401
        assert (
            http.get("/v1/documents", params={"path": "a.md"}, headers=bearer(tokens["writer"])).status_code
            == 403
        )

        # After an erasure by id: the erasure's position, time and basis.
        erased = _post(http, admin, "/v1/erasures", {"document_id": first["document_id"]})
        after = http.get(
            "/v1/documents", params={"path": "policies/leave.md", "source": "hr"}, headers=bearer(admin)
        )
        [doc] = after.json()["documents"]
        assert doc["erased"]["basis"] == "erasure_request" and doc["erased"]["position"] == erased["position"]
        assert doc["erased"]["erased_at"].endswith("Z")


def test_the_command_line_shows_erases_and_holds_by_path(tmp_path: Path) -> None:
    from bootstrap import ledger_context
    from ledger.schemas.requests import DocumentIn
    from ledger.storage.claims import DocumentClaims
    from ledger.usecases.context import Caller
    from ledger.usecases.documents import ingest_document
    from ledger.writing.application import Ledger

    data = tmp_path / "data"
    caller = Caller("default", "svc", frozenset({"ingest.write"}))
    with Ledger(LedgerConfig(data_dir=data, run_checkpointer=False)) as ledger:
        ctx, claims = ledger_context(ledger), DocumentClaims(ledger.store)
        for path in ("policies/leave.md", "policies/bonus.md"):
            ingest_document(
                ctx, claims, caller, DocumentIn(path=path, text=f"# {path}\n\nText of {path}.\n", source="hr")
            )

    def cli(*args: str) -> tuple[int, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CITELEDGER_")}
        done = run_cli(["documents", *args, "--data-dir", str(data)], env)
        return done.returncode, done.stdout + done.stderr

    code, shown = cli("show", "--path", "policies/leave.md", "--json")
    assert code == 0, shown
    [doc] = json.loads(shown)["documents"]
    assert doc["path"] == "policies/leave.md" and doc["source"] == "hr"

    code, said = cli("show", "--path", "policies/nowhere.md")
    assert code == 2 and "document at path 'policies/nowhere.md' not found" in said

    code, said = cli("hold", "--path", "policies/bonus.md", "--source", "hr", "--basis", "case 12")
    assert code == 0 and "placed on policies/bonus.md" in said, said
    code, said = cli("erase", "--path", "policies/bonus.md", "--yes")
    assert code == 2 and "under legal hold" in said, said

    code, said = cli("erase", "--path", "policies/leave.md", "--source", "hr", "--yes")
    assert code == 0 and "Erased policies/leave.md: its data key was destroyed at position" in said, said
    assert "versions: 1" in said and "cited by: 0 receipt(s)" in said
    code, said = cli("erase", "--path", "policies/leave.md", "--yes")
    assert code == 0 and "already erased" in said, said


def test_the_command_line_shows_a_document_from_a_server(ledger_config: LedgerConfig) -> None:
    """`citeledger documents show --path --url` reads `GET /v1/documents` with the token: the
    route's documents, its not-found and its 403 said as the local command says them."""
    with (
        serving(ledger_config) as (server, _, tokens),
        loopback_http.client(base_url=server.base_url) as http,
    ):
        body = {"path": "policies/leave.md", "text": "# Leave\n\nSixteen weeks.\n", "source": "hr"}
        made = _post(http, tokens["admin"], "/v1/documents", body)

        def cli(who: str, *args: str) -> tuple[int, str, str]:
            env = {k: v for k, v in os.environ.items() if not k.startswith("CITELEDGER_")}
            env.update({"CITELEDGER_URL": server.base_url, "CITELEDGER_TOKEN": tokens[who]})
            done = run_cli(["documents", "show", *args], env)
            return done.returncode, done.stdout, done.stderr

        code, shown, _ = cli("reader", "--path", "policies/leave.md", "--source", "hr", "--json")
        assert code == 0, shown
        route = http.get(
            "/v1/documents", params={"path": "policies/leave.md"}, headers=bearer(tokens["reader"])
        ).json()
        assert json.loads(shown)["documents"] == route["documents"]
        assert route["documents"][0]["document_id"] == made["document_id"]

        code, shown, _ = cli("reader", "--path", "policies/leave.md")
        assert code == 0 and f"policies/leave.md (source hr): document {made['document_id']}" in shown
        assert "cited by: 0 receipt(s)" in shown and "weeks" not in shown

        code, _, said = cli("other-reader", "--path", "policies/leave.md")
        assert code == 2 and "refused (not_found): document at path 'policies/leave.md' not found" in said
        code, _, said = cli("writer", "--path", "policies/leave.md")
        assert code == 2 and "refused (forbidden)" in said, said
        code, _, said = cli("reader", "--path", "../etc/passwd")
        assert code == 2 and "refused (" in said and "path" in said, said
