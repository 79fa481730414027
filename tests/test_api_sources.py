"""`POST /v1/sources/{name}/sync` on a real loopback server (SQLite and PostgreSQL):
the report, scopes, another tenant's source as a 404 in the envelope, path rules as 422."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ledger.config import LedgerConfig
from ledger.retrieval.source_registry import SourceRegistry
from ledger.retrieval.sources import SourceLimits
from ledger.usecases.sources import add_source
from tests import loopback_http
from tests.api_support import LoopbackServer, api_config, make_tokens

SECRET_LINE = "The vault code is 4417."


@pytest.fixture
def served(
    ledger_config: LedgerConfig, tmp_path: Path
) -> Iterator[tuple[httpx.Client, dict[str, str], Path]]:
    root = (tmp_path / "handbook").resolve()
    (root / "ops").mkdir(parents=True)
    (root / "retention.md").write_text("# Retention\n\nAudit logs are kept for 180 days.\n")
    (root / "ops" / "vault.md").write_text(f"# Vault\n\n{SECRET_LINE}\n")
    (root / "ops" / "broken.md").write_bytes(b"\xc3\x28 not utf-8")
    config = api_config(ledger_config)
    tokens = make_tokens(config)  # "acme" tokens and one of "globex" ("other")
    registry = SourceRegistry(ledger_config.data_dir)
    add_source(registry, SourceLimits(), "handbook", str(root), "acme")
    with (
        LoopbackServer(config) as server,
        loopback_http.client(base_url=server.base_url, timeout=30) as client,
    ):
        yield client, tokens, root


def post(client: httpx.Client, token: str, path: str, **kwargs: Any) -> httpx.Response:
    return client.post(path, headers={"Authorization": f"Bearer {token}"}, **kwargs)


def test_sync_reports_each_file_and_a_resync_is_unchanged(
    served: tuple[httpx.Client, dict[str, str], Path],
) -> None:
    client, tokens, root = served
    response = post(client, tokens["writer"], "/v1/sources/handbook/sync")
    assert response.status_code == 200, response.text
    body = response.json()
    assert [(f["path"], f["status"], f.get("reason")) for f in body["files"]] == [
        ("ops/broken.md", "skipped", "not_utf8"),
        ("ops/vault.md", "ingested", None),
        ("retention.md", "ingested", None),
    ]
    assert body["totals"] == {"ingested": 2, "unchanged": 0, "removed": 0, "skipped": 1, "ignored": 0}
    assert body["truncated"] is None and "run_id" in body
    assert SECRET_LINE not in response.text and "Audit logs" not in response.text
    (root / "retention.md").unlink()
    again = post(client, tokens["admin"], "/v1/sources/handbook/sync", json={}).json()
    assert {f["path"]: f["status"] for f in again["files"]} == {
        "ops/broken.md": "skipped",
        "ops/vault.md": "unchanged",
        "retention.md": "removed",
    }
    listed = client.get("/v1/sources", headers={"Authorization": f"Bearer {tokens['writer']}"})
    assert listed.status_code == 200 and listed.json()["sources"] == [{"name": "handbook"}]


def test_another_tenants_source_and_an_unknown_one_are_404_in_the_envelope(
    served: tuple[httpx.Client, dict[str, str], Path],
) -> None:
    client, tokens, _ = served
    for token, path in (
        (tokens["other"], "/v1/sources/handbook/sync"),
        (tokens["writer"], "/v1/sources/no-such-source/sync"),
        (tokens["writer"], "/v1/sources/..%2F..%2Fetc/sync"),
    ):
        response = post(client, token, path)
        assert response.status_code == 404, (path, response.text)
        error = response.json()["error"]
        assert error["code"] == "not_found" and error["retryable"] is False
    other = client.get("/v1/sources", headers={"Authorization": f"Bearer {tokens['other']}"})
    assert other.json()["sources"] == []


def test_scope_and_path_rules(served: tuple[httpx.Client, dict[str, str], Path]) -> None:
    client, tokens, _ = served
    assert post(client, tokens["reader"], "/v1/sources/handbook/sync").status_code == 403
    assert client.post("/v1/sources/handbook/sync").status_code == 401
    for under, rule in (
        ("../..", "outside_allowlist"),
        ("/etc", "denylisted"),
        ("/tmp", "outside_allowlist"),
    ):
        response = post(client, tokens["writer"], "/v1/sources/handbook/sync", json={"under": under})
        assert response.status_code == 422, response.text
        assert response.json()["error"]["code"] == rule
    bad = post(client, tokens["writer"], "/v1/sources/handbook/sync", json={"under": 5})
    assert bad.status_code == 400 and "error" in bad.json()
    part = post(client, tokens["writer"], "/v1/sources/handbook/sync", json={"under": "ops"})
    assert part.status_code == 200 and [f["path"] for f in part.json()["files"]] == [
        "ops/broken.md",
        "ops/vault.md",
    ]
