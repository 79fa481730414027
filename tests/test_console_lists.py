"""The console's receipts and history lists in real Chromium at 1280 px and 390 px, on both
stores: how many match (not the page size), the kind and actor columns, newest first with a
switch to oldest first, Since/Until to the second, the export of the filter as CSV, and on a
phone the receipt link on screen with the rarer filters folded."""

from __future__ import annotations

import csv
import datetime as dt
import io
from pathlib import Path

import pytest
from playwright.sync_api import Page

from ledger.config import LedgerConfig
from ledger.domain.timestamps import parse_timestamp
from tests import loopback_http
from tests.api_support import LoopbackServer, api_config, make_tokens
from tests.test_console_browser import _auditor_token, _browser, _seed, _sign_in


def _form_time(recorded_at: str, seconds: int = 0) -> str:
    """A recorded time as the form's datetime-local field takes it (UTC, to the second)."""
    moment = parse_timestamp(recorded_at).replace(microsecond=0) + dt.timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%S")


@pytest.mark.parametrize("width", [1280, 390])
def test_the_receipts_list_counts_orders_narrows_and_exports(
    ledger_config: LedgerConfig, tmp_path: Path, width: int
) -> None:
    config = api_config(ledger_config)
    tokens = make_tokens(config)
    with LoopbackServer(config) as server, _browser() as browser:
        base = server.base_url
        seeded = _seed(base, tokens["admin"])
        oldest, newest = seeded["cited"]["receipt_id"], seeded["search"]["receipt_id"]
        context = browser.new_context(viewport={"width": width, "height": 844}, accept_downloads=True)
        page = context.new_page()
        _sign_in(page, base, _auditor_token(config), "/console/receipts")

        caption = page.locator("table.receipts caption")
        assert caption.inner_text().startswith("3 receipts")
        first = page.locator("table.receipts tbody tr").first
        assert newest[:12] in first.inner_text() and "search" in first.inner_text()
        kinds = page.locator("table.receipts tbody tr td:nth-child(4)").all_inner_texts()
        actors = page.locator("table.receipts tbody tr td:nth-child(6)").all_inner_texts()
        assert kinds == ["search", "external", "external"] and all(a.startswith("token:") for a in actors)
        if width == 390:
            # On a phone: the receipt link is on screen, the rarer filters folded away.
            box = page.locator(f"a[href='/console/receipts/{newest}']").bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width
            assert not page.get_by_label("Task id").is_visible()

        # Oldest first, on asking; the choice stays in the URL and in the form.
        _open_filters(page)
        page.get_by_label("Order").select_option("asc")
        page.get_by_role("button", name="Filter").click()
        assert "order=asc" in page.url
        assert oldest[:12] in page.locator("table.receipts tbody tr").first.inner_text()
        _open_filters(page)
        assert page.get_by_label("Order").input_value() == "asc"

        # Since, to the second: a second after the last receipt, nothing; at the first, all three.
        recorded = {r["receipt_id"]: r["recorded_at"] for r in _receipts(server, tokens["admin"])}
        page.get_by_label("Since (UTC)").fill(_form_time(recorded[newest], seconds=1))
        page.get_by_role("button", name="Filter").click()
        assert page.locator("table.receipts caption").inner_text().startswith("0 receipts")
        assert "Nothing matches" in page.locator("table.receipts tbody").inner_text()
        _open_filters(page)
        page.get_by_label("Since (UTC)").fill(_form_time(recorded[oldest]))
        page.get_by_label("Status").select_option("ok")
        page.get_by_role("button", name="Filter").click()
        assert page.locator("table.receipts caption").inner_text().startswith("3 receipts")
        _open_filters(page)
        # The same moment; a browser gives a whole minute without ":00" (HTML's normalized form).
        shown = page.get_by_label("Since (UTC)").input_value()
        assert dt.datetime.fromisoformat(shown) == dt.datetime.fromisoformat(_form_time(recorded[oldest]))

        # The export of this very filter: every row with its receipt id and log position.
        with page.expect_download() as download:
            page.get_by_role("link", name="CSV").click()
        rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text())))
        assert [row["receipt_id"] for row in rows] == [oldest, seeded["restricted"]["receipt_id"], newest]
        assert all(int(row["position"]) >= 1 for row in rows)

        # A wrong choice in the URL is a page naming the allowed values.
        refused = page.goto(base + "/console/receipts?status=nohit")
        assert refused is not None and refused.status == 400
        assert (
            "status must be one of: ok, no_hit, denied, timeout, error" in page.locator("main").inner_text()
        )

        # The history: a total, newest first, and oldest first on asking.
        page.goto(base + "/console/history?type=RetrievalRecorded")
        assert page.locator("table.history caption").inner_text().startswith("3 events")
        positions = [int(p) for p in page.locator("table.history tbody tr td:nth-child(1)").all_inner_texts()]
        assert positions == sorted(positions, reverse=True)
        _open_filters(page)
        page.get_by_label("Order").select_option("asc")
        page.get_by_role("button", name="Filter").click()
        ascending = [int(p) for p in page.locator("table.history tbody tr td:nth-child(1)").all_inner_texts()]
        assert ascending == sorted(positions)
        context.close()


def _open_filters(page: Page) -> None:
    """On a phone the filters fold behind one control (console.js): open it as a user would."""
    fold = page.locator("details.fold")
    if fold.count() and not fold.first.evaluate("d => d.open"):
        page.locator("details.fold > summary").first.click()


def _receipts(server: LoopbackServer, token: str) -> list[dict[str, str]]:
    answer = loopback_http.get(
        server.base_url + "/v1/receipts", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    assert answer.status_code == 200, answer.text
    rows: list[dict[str, str]] = answer.json()["receipts"]
    return rows
