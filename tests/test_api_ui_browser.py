"""The interactive API page in a real browser: headless Chromium loads `/schema` from a real
loopback server with every other host unresolvable, and Swagger UI must render the
operations from the JSON document (so the page works offline, not just its HTML).
Chromium is a system package (`.ci/run` installs it); without it this test fails, never skips."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ledger.config import LedgerConfig
from tests.api_support import LoopbackServer, api_config
from tests.server_process import chromium


def _browse(url: str, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",  # the suite runs as root in CI
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={profile}",
            # Offline: any host but the loopback server fails to resolve.
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            "--virtual-time-budget=15000",
            *extra,
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_swagger_ui_renders_every_operation_offline(tmp_path: Path) -> None:
    config = api_config(LedgerConfig(data_dir=tmp_path / "data", run_checkpointer=False))
    with LoopbackServer(config) as server:
        page = _browse(f"{server.base_url}/schema", tmp_path / "profile", "--dump-dom")
        shot = tmp_path / "schema.png"
        _browse(
            f"{server.base_url}/schema",
            tmp_path / "profile2",
            f"--screenshot={shot}",
            "--window-size=1280,1600",
        )
    dom = page.stdout
    assert page.returncode == 0, page.stderr[-2000:]
    # Rendered by Swagger UI's JavaScript from /schema/openapi.json, not present in the served HTML.
    assert 'class="swagger-ui' in dom, dom[:2000]
    assert dom.count("opblock-summary-path") >= 20, "operations were not rendered"
    for path in ("/v1/retrievals", "/v1/receipts/{receipt_id}/replay", "/v1/export", "/v1/healthz"):
        assert f'data-path="{path}"' in dom, path
    assert "Failed to load API definition" not in dom
    assert shot.exists() and shot.stat().st_size > 10_000
