"""The real MCP Inspector CLI (npm `@modelcontextprotocol/inspector`), each pinned version installed
once per machine into `~/.cache/citeledger/mcp-inspector/<version>` (scripts/test.sh installs them
up front; a test installs one when missing). 2.x speaks Streamable HTTP with headers; 0.15, the
first line whose CLI checked `structuredContent` against the output schema, only stdio to a bearer-
token server (it has no `--header`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.server_process import ROOT

CURRENT = "2.12.0"  # its exit codes and checks are what the tests assert
FIRST_CHECKING = "0.15.0"
INSPECTOR_VERSIONS = (CURRENT, FIRST_CHECKING)
# Outside the checkout, so a fresh clone reuses them (scripts/test.sh sets the same folder).
CACHE = (
    Path(os.environ["CITELEDGER_TOOL_CACHE"])
    if os.environ.get("CITELEDGER_TOOL_CACHE")
    else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "citeledger"
) / "mcp-inspector"
_LAUNCHER = {CURRENT: "inspector", FIRST_CHECKING: "mcp-inspector"}


def inspector_bin(version: str = CURRENT) -> Path:
    """The Inspector's launcher, installed from the npm registry on first use."""
    prefix = CACHE / version
    launcher = prefix / "node_modules" / ".bin" / _LAUNCHER[version]
    package = prefix / "node_modules" / "@modelcontextprotocol" / "inspector" / "package.json"
    if launcher.exists() and package.exists() and json.loads(package.read_text())["version"] == version:
        return launcher
    npm = shutil.which("npm")
    assert npm is not None, "npm is needed for the MCP Inspector tests (scripts/test.sh installs it)"
    prefix.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--silent",
         f"@modelcontextprotocol/inspector@{version}"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and launcher.exists(), done.stderr[-2000:]
    return launcher


@dataclass
class InspectorRun:
    returncode: int
    result: dict[str, Any] | None  # the tool result it printed on stdout
    stdout: str
    stderr: str


def _run(command: list[str], home: Path, cwd: Path | None = None) -> InspectorRun:
    env = {**os.environ, "HOME": str(home), "MCP_CATALOG_PATH": str(home / "mcp.json"), "NO_COLOR": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, cwd=cwd, check=False)
    try:
        result = json.loads(done.stdout) if done.stdout.strip() else None
    except json.JSONDecodeError:
        result = None
    return InspectorRun(done.returncode, result, done.stdout, done.stderr)


def _tool_args(args: dict[str, str]) -> list[str]:
    return [part for name, value in args.items() for part in ("--tool-arg", f"{name}={value}")]


def call_tool(url: str, token: str, tool: str, args: dict[str, str], home: Path) -> InspectorRun:
    """`inspector --cli URL --method tools/call` over Streamable HTTP, as an operator runs it."""
    command = [str(inspector_bin()), "--cli", url, "--transport", "http",
               "--header", f"Authorization: Bearer {token}",
               "--method", "tools/call", "--tool-name", tool, *_tool_args(args)]  # fmt: skip
    return _run(command, home)


def call_tool_stdio(
    server: list[str], env: dict[str, str], tool: str, args: dict[str, str], home: Path
) -> InspectorRun:
    """0.15's `mcp-inspector --cli COMMAND... --method tools/call`: it starts the stdio server."""
    settings = [part for name, value in env.items() for part in ("-e", f"{name}={value}")]
    command = [str(inspector_bin(FIRST_CHECKING)), "--cli", *settings, *server,
               "--method", "tools/call", "--tool-name", tool, *_tool_args(args)]  # fmt: skip
    return _run(command, home, cwd=ROOT)
