"""The README's curl examples, run in order with bash against a real `citeledger serve`
(issue 9: the README cannot drift from the code).

Every block marked `<!-- example -->` in README.md is extracted exactly and run in one bash
script (`set -euo pipefail`, so a failing `curl -fsS` or `citeledger verify` fails the test),
after what the marked set-up block provides: `DATA_DIR`, `BASE`, `TOKEN` of a server started
here on a free loopback port with a known bootstrap token, and `citeledger` running this
checkout's code."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from ledger.config import LedgerConfig
from tests.guide_blocks import script_start
from tests.server_process import ROOT, ServerProcess, server_env

README = ROOT / "README.md"
BLOCK = re.compile(r"<!-- (example|example-setup) -->\n```sh\n(.*?)\n```\n", re.S)
PYTHON_BLOCK = re.compile(r"<!-- example-python -->\n```python\n(.*?)\n```\n", re.S)
TOKEN = "readme-bootstrap-token-0123456789"


def _blocks() -> tuple[str, list[str]]:
    text = README.read_text(encoding="utf-8")
    found = BLOCK.findall(text)
    setups = [code for kind, code in found if kind == "example-setup"]
    examples = [code for kind, code in found if kind == "example"]
    assert len(setups) == 1, "README.md needs exactly one <!-- example-setup --> block"
    # Every marker is followed by a block the pattern took (none silently skipped) ...
    assert text.count("<!-- example") == len(found) + len(PYTHON_BLOCK.findall(text))
    # ... and every curl command of the README is in a tested block.
    tested = "\n".join(code for _, code in found)
    for line in text.splitlines():
        if line.lstrip().startswith("curl "):
            assert line in tested, f"untested curl example: {line}"
    return setups[0], examples


def test_examples_are_extracted_exactly() -> None:
    setup, examples = _blocks()
    assert len(examples) >= 7
    for name in ("DATA_DIR", "BASE", "TOKEN"):
        assert re.search(rf"^export (.* )?{name}=", setup, re.M), name
    assert 'citeledger serve --data-dir "$DATA_DIR"' in setup
    joined = "\n".join(examples)
    curls = [line for line in joined.splitlines() if line.lstrip().startswith("curl ")]
    assert curls and all(line.lstrip().startswith("curl -fsS ") for line in curls)
    for route in ("/v1/documents", "/v1/retrievals", "/v1/receipts/", "/v1/citations/", "/v1/export"):
        assert any(route in line for line in curls), route
    for command in ("citeledger verify-bundle", "citeledger verify --export"):
        assert command in joined, command
    assert '"engine": "external:' in joined and '"score": "3.25"' in joined
    assert '"snippet": "Audit logs are kept for 180 days."' in joined


def test_readme_examples_run_against_a_real_server(tmp_path: Path) -> None:
    assert shutil.which("curl") and shutil.which("jq"), "the README examples need curl and jq"
    _, examples = _blocks()
    data_dir = tmp_path / "citeledger-data"
    env = server_env(LedgerConfig(data_dir=data_dir), TOKEN)
    work = tmp_path / "work"
    work.mkdir()
    script = script_start(data_dir)
    for number, code in enumerate(examples, start=1):
        script += [f"echo '=== example {number}' >&2", code]
    # The MCP Python snippet, exactly as written, against the same server (after the curls).
    [snippet] = PYTHON_BLOCK.findall(README.read_text(encoding="utf-8"))
    (work / "snippet.py").write_text(snippet + "\n", encoding="utf-8")
    script += [
        "echo '=== python snippet' >&2",
        f'CITELEDGER_URL="$BASE" CITELEDGER_TOKEN="$TOKEN" {shlex.quote(sys.executable)} snippet.py',
    ]
    script.append("echo '=== all examples done' >&2")
    with ServerProcess(data_dir, env, log_path=tmp_path / "server.log") as server:
        done = subprocess.run(
            ["bash", "-c", "\n".join(script)],
            cwd=work,
            env={**env, "BASE": server.base_url, "TOKEN": TOKEN},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    reached = [line for line in done.stderr.splitlines() if line.startswith("=== ")]
    assert done.returncode == 0, f"failed after {reached[-1:]}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert reached[-1] == "=== all examples done"
    out = done.stdout
    # What the examples printed: the receipt, the chunk read back, and the three offline checks.
    assert '"engine": "external:my-rag"' in out
    assert '"chunk_text": "# Retention\\n\\nAudit logs are kept for 180 days."' in out
    assert '"status": "ok"' in out and '"path": "handbook/retention.md"' in out  # the search hit
    assert '"integrity": "ok"' in out  # its replay reproduced the context hash
    assert '"isError": false' in out and '"cited_span": {' in out  # the MCP tool call over /mcp
    assert '"text": "how long are audit logs kept?"' in out  # the question, read with content=plain
    assert "receipts, newest first" in out and "external token:" in out  # the Python snippet
    assert "OK entry at position" in out  # verify-bundle's verdict is its result: stdout
    assert "export: partial, tenant 'default' only (not the whole log)" in out
    assert out.count("OK: no problem found") == 2  # the tenant export and the whole log
    for name in (
        "document.json",
        "receipt.json",
        "search.json",
        "bundle.json",
        "tenant-export.jsonl",
        "whole-log.jsonl",
    ):
        assert (work / name).stat().st_size > 0, name


def _command_names() -> list[str]:
    import typer

    from cli.main import app

    names: list[str] = []
    group: Any = typer.main.get_command(app)  # a click-style group (typer may bundle its own click)
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            names += [f"{name} {sub}" for sub in command.commands]
        else:
            names.append(name)
    return names


def test_readme_names_every_command_and_setting() -> None:
    text = README.read_text(encoding="utf-8")
    commands = _command_names()
    assert {"verify", "lag", "verify-projections", "projection-checkpoint", "tokens create"} <= set(commands)
    missing = [name for name in commands if f"`citeledger {name}" not in text]
    assert not missing, f"commands missing from the README's table: {missing}"
    sources = [
        path
        for folder in ("api", "cli", "ledger", "projections", "scripts", "tests")
        for path in (ROOT / folder).rglob("*.py")
    ]
    settings = {
        name
        for path in sources
        for name in re.findall(r"CITELEDGER_[A-Z0-9_]+", path.read_text(encoding="utf-8"))
    }
    assert {"CITELEDGER_TEST_PG_DSN", "CITELEDGER_RATE_LIMIT_RPS", "CITELEDGER_REDIS_URL"} <= settings
    missing = sorted(name for name in settings if f"`{name}`" not in text)
    assert not missing, f"settings missing from the README: {missing}"
