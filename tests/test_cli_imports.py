"""The offline commands never load the web package (issue item 7).

An auditor's `verify-bundle` of a 6 KB file used to import Litestar and uvicorn
(~785 modules) because the command line lived in `api/` and registered the server
commands at import time. Each command runs here in one real subprocess on a real
store; after each one, none of `litestar`, `uvicorn`, `api` may be in `sys.modules`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.server_process import ROOT, run_python, without_citeledger_settings

FORBIDDEN = ("litestar", "uvicorn", "api")

# Runs in the child: each command in turn through the real typer app, then the forbidden
# top-level packages loaded so far.
PROBE = """
import json, sys
from cli.main import app

forbidden = set(sys.argv[1].split(","))
results = []
for args in json.loads(sys.argv[2]):
    try:
        app(args, prog_name="citeledger")
        code = 0
    except SystemExit as exc:
        code = exc.code
    loaded = sorted({name for name in sys.modules if name.split(".")[0] in forbidden})
    results.append({"args": args, "exit": code, "loaded": loaded})
print("PROBE " + json.dumps(results))
"""


def _probe(commands: list[list[str]], forbidden: tuple[str, ...] = FORBIDDEN) -> list[dict[str, object]]:
    env = {**without_citeledger_settings(), "PYTHONPATH": str(ROOT)}
    done = run_python(["-c", PROBE, ",".join(forbidden), json.dumps(commands)], env, timeout=300)
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("PROBE "))
    results: list[dict[str, object]] = json.loads(line.removeprefix("PROBE "))
    return results


def _auditor_files(tmp_path: Path) -> tuple[str, str, str, str, str]:
    """The data dir, its public key, and where the log export, tenant export and bundle go."""
    data = tmp_path / "data"
    return (
        str(data),
        str(data / "keys" / "root.pub"),
        str(tmp_path / "log.jsonl"),
        str(tmp_path / "tenant.jsonl"),
        str(tmp_path / "bundle.json"),
    )


@pytest.mark.slow
def test_offline_commands_import_no_web_package(tmp_path: Path) -> None:
    data, public_key, export, tenant_export, bundle = _auditor_files(tmp_path)
    # The auditor's three commands first, each in a fresh interpreter on a store made
    # by the same command line.
    assert _probe([["demo", "--events", "5", "--data-dir", data]])[0]["exit"] == 0
    audited = [
        ["export", "--out", export, "--data-dir", data],
        ["verify", "--data-dir", data],
        ["verify", "--export", export, "--public-key", public_key, "--deep"],
        ["export", "--tenant", "default", "--out", tenant_export, "--data-dir", data],
        ["verify", "--export", tenant_export, "--public-key", public_key],
        ["bundle", "3", "--out", bundle, "--data-dir", data],
        ["verify-bundle", bundle, "--public-key", public_key],
    ]
    for command in audited:
        result = _probe([command])[0]
        assert result == {"args": command, "exit": 0, "loaded": []}

    # Every other command that works on the ledger or the read models, one process.
    offline = [
        ["demo", "--events", "5", "--data-dir", data],
        ["checkpoint", "--data-dir", data],
        ["rotate-key", "--data-dir", data],
        ["retire-keys", "--data-dir", data],
        ["backup", "--out", str(tmp_path / "backup"), "--data-dir", data],
        ["rebuild", "--data-dir", data],
        ["digest", "--data-dir", data],
        ["lag", "--data-dir", data],
        ["projection-checkpoint", "--data-dir", data],
        ["verify-projections", "--data-dir", data],
    ]
    for result in _probe(offline):
        assert result["exit"] == 0, result
        assert result["loaded"] == [], result


# What an auditor's machine needs no more of than the export and the key: no database driver,
# no event-store library, no HTTP client (they also stay out of memory, so none can be reached).
STORE_PACKAGES = ("psycopg", "psycopg_pool", "sqlite3", "_sqlite3", "eventsourcing", "httpx", *FORBIDDEN)


@pytest.mark.slow
def test_offline_verification_imports_no_database_driver(tmp_path: Path) -> None:
    data, public_key, export, tenant_export, bundle = _auditor_files(tmp_path)
    report = str(tmp_path / "report")
    today = datetime.now(UTC).date()
    period = ["--from", str(today - timedelta(days=1)), "--to", str(today + timedelta(days=1))]
    made = _probe(
        [
            ["demo", "--events", "5", "--data-dir", data],
            ["export", "--out", export, "--data-dir", data],
            ["export", "--tenant", "default", "--out", tenant_export, "--data-dir", data],
            ["report", "--tenant", "default", *period, "--out", report, "--no-pdf", "--data-dir", data],
            ["bundle", "3", "--out", bundle, "--data-dir", data],
        ],
        STORE_PACKAGES,
    )
    assert [result["exit"] for result in made] == [0, 0, 0, 0, 0], made
    assert made[-1]["loaded"], "the probe must see the drivers a store-side command loads"
    offline = [
        ["verify", "--export", export, "--public-key", public_key, "--deep"],
        ["verify", "--export", tenant_export, "--public-key", public_key],
        ["verify-bundle", bundle, "--public-key", public_key],
        ["verify-report", report, "--public-key", public_key, "--tenant", "default"],
    ]
    for command in offline:
        result = _probe([command], STORE_PACKAGES)[0]
        assert result == {"args": command, "exit": 0, "loaded": []}


@pytest.mark.slow
def test_server_commands_still_reach_the_web_package(tmp_path: Path) -> None:
    """The probe sees imports: `tokens create` loads `api` (lazily, inside the command)."""
    data = str(tmp_path / "data")
    result = _probe(
        [
            ["init", "--data-dir", data],
            ["tokens", "create", "--tenant", "acme", "--scopes", "audit.read", "--data-dir", data],
        ]
    )
    assert result[0]["exit"] == 0 and result[0]["loaded"] == []  # init is offline too
    assert result[1]["exit"] == 0
    assert "api" in result[1]["loaded"]  # type: ignore[operator]
