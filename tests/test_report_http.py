"""The report over HTTP (`POST /v1/reports`, `GET /v1/reports/{id}`), on the real server on
loopback, both stores: the zip verifies offline; scopes, tenants and bad periods are refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from ledger.config import LedgerConfig
from tests import loopback_http
from tests.api_support import DOC, LoopbackServer, api_config, make_tokens
from tests.client_support import retrieval
from tests.report_support import verify_report_zip


def test_report_over_http(ledger_config: LedgerConfig, tmp_path: Path) -> None:
    config = api_config(ledger_config)
    tokens = make_tokens(config)
    today = datetime.now(UTC).date()
    period = {"from": str(today - timedelta(days=1)), "to": str(today + timedelta(days=1))}
    with (
        LoopbackServer(config) as server,
        loopback_http.client(base_url=server.base_url, timeout=120) as http,
    ):

        def auth(who: str) -> dict[str, str]:
            return {"Authorization": f"Bearer {tokens[who]}"}

        doc = http.post("/v1/documents", json={"path": "a.md", "text": DOC}, headers=auth("admin"))
        assert doc.status_code == 201, doc.text
        for _ in range(3):
            posted = http.post("/v1/retrievals", json=retrieval(doc.json()), headers=auth("writer"))
            assert posted.status_code == 201, posted.text
        issued = http.post("/v1/reports", json=period, headers=auth("reader"))
        assert issued.status_code == 201, issued.text
        answer = issued.json()
        assert answer["tenant_id"] == "acme" and answer["pdf"] is False and answer["entries"] >= 4
        report_id = answer["report_id"]
        # Another tenant's token finds nothing under that id; a token without audit.read is refused.
        assert http.get(f"/v1/reports/{report_id}", headers=auth("other-reader")).status_code == 404
        assert http.get(f"/v1/reports/{report_id}/manifest", headers=auth("other")).status_code == 404
        assert http.post("/v1/reports", json=period, headers=auth("writer")).status_code == 403
        assert http.get(f"/v1/reports/{'0' * 32}", headers=auth("reader")).status_code == 404
        manifest = http.get(f"/v1/reports/{report_id}/manifest", headers=auth("reader"))
        assert manifest.status_code == 200 and manifest.json()["manifest"]["report_id"] == report_id
        download = http.get(f"/v1/reports/{report_id}", headers=auth("reader"))
        assert download.status_code == 200 and download.headers["content-type"] == "application/zip"
        # Bad periods: a clear 4xx naming the field, nothing written.
        for body, field in (
            ({"from": "2026-13-45", "to": "2026-12-01"}, "from"),
            ({"from": "2024-01-01", "to": "2026-01-01"}, "to"),
            ({"from": period["to"], "to": period["from"]}, "to"),
        ):
            refused = http.post("/v1/reports", json=body, headers=auth("reader"))
            assert refused.status_code == 422, refused.text
            assert refused.json()["error"]["message"].startswith(f"{field}: ")
        assert http.post("/v1/reports", json={"from": "x"}, headers=auth("reader")).status_code == 400
    result = verify_report_zip(download.content, report_id, ledger_config, tmp_path)
    assert result.figures > 20 and result.entries == answer["entries"]
