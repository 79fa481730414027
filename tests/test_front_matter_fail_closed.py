"""Front matter fails closed (issue 26 item 2): a file whose front matter cannot be read
completely is skipped with its reason, never recorded under its source's weaker rules;
wrong types skip that file only, the rest of the source syncs (HTTP 200, CLI exit 0).
Real server and real CLI processes, both stores.

On the old code: the unclosed, BOM, `--- ` (trailing spaces), leading-blank-line, nested,
`Sensitivity`, `retention` and duplicate-key files were ingested at the source's
`internal`; `sensitivity: [public]` / `{a: 1}` raised TypeError (HTTP 500, CLI exit 70)
and nothing of the source was synced."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from ledger.config import LedgerConfig
from ledger.policy.front_matter import FrontMatterRefused, file_rules
from ledger.retrieval.source_registry import SourceRegistry
from ledger.retrieval.sources import SourceLimits
from ledger.usecases.sources import add_source
from tests.api_support import bearer, http_to_served
from tests.server_process import run_cli, server_env

BODY = "# Vault\n\nThe {word} rota is kept here.\n"
# Each asks for `restricted` and cannot be read completely: skipped, never ingested.
REFUSED = {
    "unclosed.md": "---\nsensitivity: restricted\n" + BODY,
    "opener-with-text.md": "--- {sensitivity: restricted}\n---\n" + BODY,
    "toml.md": "+++\nsensitivity = 'restricted'\n+++\n" + BODY,
    "capitalised.md": "---\nSensitivity: restricted\n---\n" + BODY,
    "dashed.md": "---\nretention-days: 3\n---\n" + BODY,
    "synonym.md": "---\nclassification: restricted\n---\n" + BODY,
    "nested.md": "---\nmeta: {sensitivity: restricted}\n---\n" + BODY,
    "duplicate.md": "---\nsensitivity: restricted\nsensitivity: internal\n---\n" + BODY,
    "merge.md": "---\n<<: {sensitivity: restricted}\n---\n" + BODY,
    "list.md": "---\nsensitivity: [public]\n---\n" + BODY,
    "mapping-value.md": "---\nsensitivity: {a: 1}\n---\n" + BODY,
    "empty-value.md": "---\nsensitivity:\n---\n" + BODY,
    "upper-value.md": "---\nsensitivity: RESTRICTED\n---\n" + BODY,
    "days-text.md": "---\nretention_days: '30'\n---\n" + BODY,
    "days-bool.md": "---\nretention_days: true\n---\n" + BODY,
    "days-float.md": "---\nretention_days: 30.5\n---\n" + BODY,
    "not-mapping.md": "---\n- sensitivity: restricted\n---\n" + BODY,
    "int-key.md": "---\n1: restricted\n---\n" + BODY,
    "tab.md": "---\nsensitivity:\trestricted\n---\n" + BODY,
}
# Each is front matter read completely: the file is recorded restricted.
READ = {
    "bom.md": "\ufeff---\nsensitivity: restricted\n---\n" + BODY,
    "crlf.md": ("---\nsensitivity: restricted\n---\n" + BODY).replace("\n", "\r\n"),
    "spaces.md": "---   \nsensitivity: restricted\n---  \n" + BODY,
    "dots.md": "---\nsensitivity: restricted\n...\n" + BODY,
    "blank-first.md": "\n\n---\nsensitivity: restricted\n---\n" + BODY,
    "block-scalar.md": "---\nsummary: |\n  ---\nsensitivity: restricted\n---\n" + BODY,
    "other-keys.md": "---\ntitle: Vault\ntags: [a, b]\nsensitivity: restricted\n---\n" + BODY,
}


def _text(name: str, text: str) -> str:
    return text.replace("{word}", "w" + name.removesuffix(".md").replace("-", ""))


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_front_matter_that_cannot_be_read_is_refused_naming_why(name: str) -> None:
    with pytest.raises(FrontMatterRefused) as refused:
        file_rules(_text(name, REFUSED[name]), "internal", None, 365)
    assert refused.value.reason == "bad_front_matter"
    assert "rota" not in refused.value.message  # names keys and types, never the text


@pytest.mark.parametrize("name", sorted(READ))
def test_front_matter_in_every_spelling_yaml_allows_is_read(name: str) -> None:
    rules = file_rules(_text(name, READ[name]), "internal", None, 365)
    assert (rules.sensitivity, rules.sensitivity_origin) == ("restricted", "front_matter")


def _folder(tmp_path: Path) -> Path:
    root = (tmp_path / "vault").resolve()
    root.mkdir()
    for name, text in {**REFUSED, **READ, "plain.md": BODY}.items():
        (root / name).write_bytes(_text(name, text).encode("utf-8"))
    return root


def _check_rows(rows: dict[str, dict[str, Any]]) -> None:
    for name in REFUSED:
        assert (rows[name]["status"], rows[name]["reason"]) == ("skipped", "bad_front_matter"), rows[name]
        assert "detail" in rows[name]
    for name in READ:
        assert (rows[name]["status"], rows[name]["sensitivity"]) == ("ingested", "restricted"), rows[name]
    assert (rows["plain.md"]["status"], rows["plain.md"]["sensitivity"]) == ("ingested", "internal")


def test_http_sync_skips_unreadable_front_matter_and_syncs_the_rest(
    ledger_config: LedgerConfig, tmp_path: Path
) -> None:
    root = _folder(tmp_path)
    registry = SourceRegistry(ledger_config.data_dir)
    add_source(registry, SourceLimits(), "vault", str(root), "acme", sensitivity="internal")
    with http_to_served(ledger_config) as (http, tokens):
        admin = bearer(tokens["admin"])
        response = http.post("/v1/sources/vault/sync", headers=admin)
        assert response.status_code == 200, response.text
        _check_rows({row["path"]: row for row in response.json()["files"]})
        # A token without knowledge.restricted.read finds none of them; the plain file it does.
        writer = bearer(tokens["writer"])
        for name in [*REFUSED, *READ]:
            word = "w" + name.removesuffix(".md").replace("-", "")
            found = http.post("/v1/search", headers=writer, json={"input": {"query": f"{word} rota"}})
            assert found.status_code in (200, 201), found.text
            assert not [c for c in found.json()["output"]["citations"] if c["path"] == name], name
        plain = http.post("/v1/search", headers=writer, json={"input": {"query": "wplain rota"}}).json()
        assert [c["path"] for c in plain["output"]["citations"]] == ["plain.md"]


def test_cli_sync_skips_unreadable_front_matter_and_syncs_the_rest(
    ledger_config: LedgerConfig, tmp_path: Path
) -> None:
    root = _folder(tmp_path)
    env = server_env(ledger_config, "t-" + uuid.uuid4().hex)
    data_dir = ["--data-dir", str(ledger_config.data_dir)]
    assert run_cli(["init", *data_dir], env).returncode == 0
    added = run_cli(["sources", "add", "vault", str(root), "--tenant", "acme", *data_dir], env)
    assert added.returncode == 0, added.stderr
    synced = run_cli(["sources", "sync", "vault", "--json", *data_dir], env)
    assert synced.returncode == 0, (synced.stdout, synced.stderr)
    assert "Traceback" not in synced.stderr
    report = json.loads(synced.stdout)
    _check_rows({row["path"]: row for row in report["files"]})
