"""The console's reports page in a real browser (the system Chromium, driven by Playwright)
against the real server on loopback: an auditor issues a report for a period, downloads its
zip, and the zip verifies offline; another tenant's auditor finds neither the report nor its zip."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from ledger.config import LedgerConfig
from tests import loopback_http
from tests.api_support import DOC, LoopbackServer, api_config, make_tokens
from tests.client_support import retrieval
from tests.report_support import verify_report_zip
from tests.test_console_browser import _browser, _sign_in


def test_console_issues_and_serves_a_report(ledger_config: LedgerConfig, tmp_path: Path) -> None:
    config = api_config(ledger_config)
    tokens = make_tokens(config)
    today = datetime.now(UTC).date()
    with LoopbackServer(config) as server:
        admin = {"Authorization": f"Bearer {tokens['admin']}"}
        with loopback_http.client(base_url=server.base_url, timeout=60) as http:
            doc = http.post("/v1/documents", json={"path": "a.md", "text": DOC}, headers=admin).json()
            assert http.post("/v1/retrievals", json=retrieval(doc), headers=admin).status_code == 201
        with _browser() as browser:
            page = browser.new_page()
            _sign_in(page, server.base_url, tokens["reader"], "/console/reports")
            assert page.url.endswith("/console/reports")
            assert page.get_by_text("None issued yet.").is_visible()
            page.get_by_label("From (first day, UTC)").fill(str(today - timedelta(days=1)))
            page.get_by_label("To (the day after the last)").fill(str(today + timedelta(days=1)))
            page.get_by_role("button", name="Issue report").click()
            page.wait_for_load_state()
            report_id = page.locator("#report-id").inner_text()
            assert len(report_id) == 32 and int(page.locator("#report-entries").inner_text()) >= 3
            rows = page.locator("table tbody tr")
            assert rows.count() == 1  # the ReportIssued entry is listed
            assert "zip" in rows.first.inner_text()
            with page.expect_download() as download_info:
                page.locator("#report-download").click()
            archive = tmp_path / "report.zip"
            download_info.value.save_as(archive)
            # A period that ends before it starts: refused on a console page naming the field.
            page.goto(server.base_url + "/console/reports")
            page.get_by_label("From (first day, UTC)").fill(str(today))
            page.get_by_label("To (the day after the last)").fill(str(today - timedelta(days=3)))
            page.get_by_role("button", name="Issue report").click()
            page.wait_for_load_state()
            assert page.get_by_text("to: the period ends before it starts").is_visible()
            # Another tenant signed in: no such report, no zip (404).
            other = browser.new_page()
            _sign_in(other, server.base_url, tokens["other-reader"], "/console/reports")
            assert other.get_by_text("None issued yet.").is_visible()
            refused = other.request.get(f"{server.base_url}/console/reports/{report_id}/download")
            assert refused.status == 404
    verify_report_zip(archive.read_bytes(), report_id, ledger_config, tmp_path)
