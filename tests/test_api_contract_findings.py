"""Regressions for findings of the contract review (issue 9) fixed so far: bundles as
downloaded verify offline, a citation never outlives its document's window, strict
request types, private files, settings refused in one line, an operator's token
never echoed. Each test failed on the code before its fix."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import orjson
import pytest

from ledger.config import LedgerConfig
from ledger.writing.application import Ledger
from tests.api_support import Api, api, make_api  # noqa: F401
from tests.server_process import ROOT, ServerProcess, run_cli, server_env

CLI_ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def test_downloaded_bundle_verifies_offline(api: Api, tmp_path: Path) -> None:
    receipt = api.retrieval(api.document())
    response = api.client.get(f"/v1/receipts/{receipt['receipt_id']}/bundle", headers=api.headers())
    assert response.status_code == 200
    bundle_file = tmp_path / "bundle.json"
    bundle_file.write_bytes(response.content)  # exactly what a client saves
    public_key = api.services.ledger.keydir.root_public_key_path
    result = run_cli(["verify-bundle", str(bundle_file), "--public-key", str(public_key)], env=CLI_ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OK" in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("expires_at", "code"),
    [
        ("9999-12-31T23:59:59Z", "expires_after_retention"),  # was a 500 (date overflow)
        ("2099-01-01T00:00:00Z", "expires_after_retention"),  # was accepted: outlived the text
        ("2026-02-30T00:00:00Z", "invalid_timestamp"),  # was a 500 (impossible date)
    ],
)
def test_citation_expiry_never_outlives_the_document(api: Api, expires_at: str, code: str) -> None:
    body = api.retrieval_body(api.document())
    body["selected_entries"][0]["expires_at"] = expires_at
    before = api.services.ledger.size
    response = api.client.post("/v1/retrievals", json=body, headers=api.headers())
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == code and error["retryable"] is False
    assert "selected_entries[0].expires_at" in error["message"]
    assert api.services.ledger.size == before  # nothing written


@pytest.mark.parametrize("days", ["5", True, 5.5])  # 5.0 is the JSON number 5: accepted
def test_retention_days_must_be_an_integer(api: Api, days: object) -> None:
    before = api.services.ledger.size
    response = api.client.post(
        "/v1/documents",
        json={"path": "a.md", "text": "# A\n\nText.\n", "retention_days": days},
        headers=api.headers(),
    )
    assert response.status_code == 400, response.text
    assert "retention_days" in response.json()["error"]["message"]
    assert api.services.ledger.size == before


def test_data_directory_and_database_files_are_private(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"  # the embedded store: its files are the ones on disk
    with Ledger(LedgerConfig(data_dir=data_dir, run_checkpointer=False)) as ledger:
        ledger.issue_checkpoint()  # the WAL and shared-memory files exist now
        assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
        files = [p for p in data_dir.iterdir() if p.name.startswith("ledger.sqlite")]
        assert {p.name for p in files} >= {"ledger.sqlite", "ledger.sqlite-wal"}
        for path in files:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_a_bad_setting_stops_serve_with_one_line(tmp_path: Path) -> None:
    env = {**CLI_ENV, "CITELEDGER_RETENTION_FLOOR_DAYS": "0"}
    result = run_cli(["serve", "--data-dir", str(tmp_path / "data"), "--port", "1"], env=env, timeout=60)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines == [lines[0]] and "CITELEDGER_RETENTION_FLOOR_DAYS" in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_a_token_given_by_environment_is_never_printed(ledger_config: LedgerConfig, tmp_path: Path) -> None:
    secret = "operator-chosen-bootstrap-secret-0123456789"
    log = tmp_path / "serve.log"
    server = ServerProcess(ledger_config.data_dir, server_env(ledger_config, secret), log_path=log).start()
    try:
        assert secret not in log.read_text()
    finally:
        server.stop()
    assert secret not in log.read_text()
    body = orjson.loads((ledger_config.data_dir / "tokens.json").read_bytes())
    assert secret not in orjson.dumps(body).decode()  # stored only as its digest


def _no_write_4xx(api: Api, response: object, before: int) -> dict[str, object]:
    status = getattr(response, "status_code", 0)
    assert 400 <= status < 500, getattr(response, "text", "")
    body: dict[str, object] = response.json()  # type: ignore[attr-defined]
    error = body["error"]
    assert isinstance(error, dict) and error["retryable"] is False
    assert api.services.ledger.size == before
    return error


def test_deeply_nested_json_is_refused(api: Api) -> None:
    before = api.services.ledger.size
    body = b'{"query": ' + b"[" * 10_000 + b"]" * 10_000 + b"}"
    response = api.client.post(
        "/v1/retrievals", content=body, headers={**api.headers(), "Content-Type": "application/json"}
    )
    _no_write_4xx(api, response, before)


def test_invalid_utf8_in_json_is_refused(api: Api) -> None:
    before = api.services.ledger.size
    body = b'{"path": "a\xff\xfe.md", "text": "# A\\n\\nText.\\n"}'
    response = api.client.post(
        "/v1/documents", content=body, headers={**api.headers(), "Content-Type": "application/json"}
    )
    _no_write_4xx(api, response, before)


def test_invalid_utf8_in_the_upload_path_is_refused(api: Api) -> None:
    before = api.services.ledger.size
    response = api.client.post(
        "/v1/documents/upload",
        files={"file": ("a.md", b"# A\n\nText.\n", "text/markdown")},
        data={"path": b"a\xff.md"},
        headers=api.headers(),
    )
    _no_write_4xx(api, response, before)


def test_deeply_nested_yaml_is_refused(api: Api) -> None:
    before = api.services.ledger.size
    bundle = "a: " + "[" * 10_000 + "]" * 10_000 + "\n"
    response = api.client.post("/v1/policy-bundles", json={"bundle_yaml": bundle}, headers=api.headers())
    error = _no_write_4xx(api, response, before)
    assert error["code"] == "invalid_policy_bundle"


def test_verify_says_truthfully_what_it_checked(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with Ledger(LedgerConfig(data_dir=data_dir, run_checkpointer=False)) as ledger:
        ledger.rotate_signing_key()
        ledger.issue_checkpoint()  # everything covered: nothing pending
    shallow = run_cli(["verify", "--data-dir", str(data_dir)], env=CLI_ENV)
    assert shallow.returncode == 0, shallow.stderr
    lines = shallow.stdout.splitlines()
    assert lines[0] == "OK: no problem found"
    assert "entries after the latest checkpoint (no signed root yet): 0" in lines
    # Without --deep only key entries (and the pending tail) are signature-checked; here both
    # entries are key entries, so the count is exact and nothing claims otherwise.
    assert "entry signatures checked: 2 of 2" in lines
    assert not any("signatures checked" in line and "no checkpoint yet" in line for line in lines)
    deep = run_cli(["verify", "--deep", "--json", "--data-dir", str(data_dir)], env=CLI_ENV)
    summary = orjson.loads(deep.stdout)
    assert summary["ok"] and summary["signatures_checked"] == summary["entries"] == 2


def test_a_stalled_projection_is_reported(tmp_path: Path) -> None:
    from projections.runner import ProjectionRunner
    from tests.factories import document_draft

    data_dir = tmp_path / "data"
    with Ledger(LedgerConfig(data_dir=data_dir, run_checkpointer=False)) as ledger:
        runner = ProjectionRunner(ledger.store)  # tracking at 0; nothing applies what follows
        for _ in range(5):
            ledger.append(document_draft(ledger))
        assert runner.health(max_lag=2, stall_s=3600)["ok"]  # behind, but only just now
        assert not runner.health(max_lag=2, stall_s=0)["ok"]  # behind and not moving
        assert runner.health(max_lag=100, stall_s=0)["ok"]  # within the bound
        stalled = runner.health(max_lag=2, stall_s=0)["projections"]["history"]
        assert stalled["status"] == "stalled" and stalled["lag"] == 6  # the genesis entry too
    env = {**CLI_ENV, "CITELEDGER_MAX_PROJECTION_LAG": "2", "CITELEDGER_PROJECTION_STALL_S": "0"}
    result = run_cli(["lag", "--data-dir", str(data_dir)], env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert orjson.loads(result.stdout)["ok"] is False


def test_the_demo_explains_itself_and_says_when_it_appends(tmp_path: Path) -> None:
    corpus_files = sum(1 for _ in (ROOT / "tests" / "corpus").rglob("*.md"))
    data_dir = tmp_path / "data"
    first = run_cli(["demo", "--events", "6", "--data-dir", str(data_dir)], env=CLI_ENV)
    assert first.returncode == 0, first.stdout + first.stderr
    out = first.stdout + first.stderr
    lines = out.splitlines()
    assert "New ledger in" in out
    # The committed corpus, synced as an allowlisted source: every file recorded once.
    assert f"source demo-corpus -> {ROOT / 'tests' / 'corpus'}" in out
    assert f"{corpus_files} files in " in out and f"{corpus_files} ingested, 0 unchanged" in out
    assert f"{corpus_files:6d}  DocumentIngested" in out
    # Searches in three languages answer from the right documents; the absent one is no_hit with gaps.
    for label, path in (
        ("English", "policies/data-retention.md"),
        ("Chinese", "zh/handbook/年假.md"),
        ("Japanese", "ja/handbook/有給休暇.md"),
    ):
        at = next(i for i, line in enumerate(lines) if line.startswith(f"{label}: "))
        assert "-> ok," in lines[at] and path in lines[at + 1], lines[at : at + 2]
    absent = "Absent: 'submarine reactor maintenance schedule' -> no_hit"
    assert any(line.startswith(absent) for line in lines)
    assert any(line.strip().startswith("gap: no searchable document mentions: submarin") for line in lines)
    # The citation reads back; after the erasure the erased document's citation is gone (404).
    assert any(line.startswith("citation ") and "policies/data-retention.md lines" in line for line in lines)
    before = next(line for line in lines if line.endswith("reads back: ok (before)"))
    erased_citation = before.split()[1]
    assert f"citation {erased_citation} reads back: gone (404 not_found" in out
    assert "     1  RetentionScrubbed" in out
    # The policy's filter is recorded; the replay of the earlier search reproduces it and shows the drift.
    downranked = "superseded-travel-policy -> downrank on policies/travel/travel-policy-2025.md"
    assert f"filters_applied: {downranked}" in out
    assert "integrity: ok" in out
    policy_drift = next(line for line in lines if line.strip().startswith("policy_drift:"))
    # @3 keeps a file's best two chunks as candidates: the 2025 policy's two are downranked
    # (under @2 three of its chunks were in the window: "filters +3").
    assert "context hash changed" in policy_drift and "filters +2" in policy_drift
    assert "     1  ReplayRecorded" in out
    assert "<- tree size: the number of entries this checkpoint commits to" in out
    assert "verify --deep: OK" in out
    # The commands it suggests call the citeledger it ran from (a venv's is not on the PATH).
    command = next(line.strip() for line in out.splitlines() if " verify-bundle " in line)
    executable, _, bundle_file, _, public_key = command.split()
    assert Path(executable).name == "citeledger" and (
        executable == "citeledger" or Path(executable).exists()
    ), command
    checked = run_cli(["verify-bundle", bundle_file, "--public-key", public_key], env=CLI_ENV)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    again = run_cli(["demo", "--events", "2", "--data-dir", str(data_dir)], env=CLI_ENV)
    assert again.returncode == 0, again.stdout + again.stderr
    out = again.stdout + again.stderr
    assert "Appending to the existing ledger" in out
    assert "already on the allowlist" in out
    # The document the first run erased is still in the folder: it stays out.
    assert f"0 ingested, {corpus_files - 1} unchanged, 0 removed, 1 skipped" in out
    assert "skipped (erased): 1" in out
    assert not re.search(r"^ +\d+  DocumentIngested$", out, re.M)  # nothing re-recorded
    assert "already live (same bundle)" in out
    # A rerun finds its erasure done and erases nothing more.
    assert "already done by an earlier run: document" in out
    assert "reads back: gone (404" not in out
    assert "RetentionScrubbed" not in out.split("What the ledger proves")[-1]
    assert "integrity: ok" in out and "verify --deep: OK" in out


def test_a_snippet_that_is_not_in_the_chunk_is_refused(api: Api) -> None:
    doc = api.document()
    body = api.retrieval_body(doc)
    body["selected_entries"][0]["snippet"] = "Audit logs are kept forever."  # made up
    before = api.services.ledger.size
    response = api.client.post("/v1/retrievals", json=body, headers=api.headers())
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "snippet_not_in_chunk" and "selected_entries[0].snippet" in error["message"]
    assert "forever" not in response.text  # the refusal never echoes text
    assert api.services.ledger.size == before
