"""The real MCP Inspector CLI (npm `@modelcontextprotocol/inspector`), installed once into
`.cache/mcp-inspector` (scripts/test.sh installs it up front; a test installs it when missing)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.server_process import ROOT

INSPECTOR_VERSION = "2.12.0"  # pinned: its exit codes and checks are what the tests assert
PREFIX = ROOT / ".cache" / "mcp-inspector"
BIN = PREFIX / "node_modules" / ".bin" / "inspector"


def inspector_bin() -> Path:
    """The Inspector's launcher, installed from the npm registry on first use."""
    package = PREFIX / "node_modules" / "@modelcontextprotocol" / "inspector" / "package.json"
    if BIN.exists() and package.exists() and json.loads(package.read_text())["version"] == INSPECTOR_VERSION:
        return BIN
    npm = shutil.which("npm")
    assert npm is not None, "npm is needed for the MCP Inspector tests (scripts/test.sh installs it)"
    PREFIX.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            npm,
            "install",
            "--prefix",
            str(PREFIX),
            "--no-audit",
            "--no-fund",
            "--silent",
            f"@modelcontextprotocol/inspector@{INSPECTOR_VERSION}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0 and BIN.exists(), done.stderr[-2000:]
    return BIN


@dataclass
class InspectorRun:
    returncode: int
    result: dict[str, Any] | None  # the tool result it printed on stdout
    stderr: str


def call_tool(url: str, token: str, tool: str, args: dict[str, str], home: Path) -> InspectorRun:
    """`inspector --cli URL --method tools/call` over Streamable HTTP, as an operator runs it."""
    command = [
        str(inspector_bin()),
        "--cli",
        url,
        "--transport",
        "http",
        "--header",
        f"Authorization: Bearer {token}",
        "--method",
        "tools/call",
        "--tool-name",
        tool,
    ]
    for name, value in args.items():
        command += ["--tool-arg", f"{name}={value}"]
    env = {**os.environ, "HOME": str(home), "MCP_CATALOG_PATH": str(home / "mcp.json"), "NO_COLOR": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, check=False)
    try:
        result = json.loads(done.stdout) if done.stdout.strip() else None
    except json.JSONDecodeError:
        result = None
    return InspectorRun(done.returncode, result, done.stderr)
