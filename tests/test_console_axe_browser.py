"""axe-core on every console page (issue 30), in real Chromium: one sign-in, then every page an
auditor reaches (sign-in, overview, receipts with and without a text search, a receipt, a
citation, an event, history, documents empty and found, erasures, a hold's confirmation and
its done page, export, proofs and a proof's answer, reports and an issued report, the error
page) at 1280 px, then every one reached by a link again at 390 px. No serious or critical
finding, with the rules `test_console_explain_browser` applies."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from playwright.sync_api import Page

from ledger.config import LedgerConfig
from tests.api_support import LoopbackServer, api_config, make_tokens
from tests.test_console_browser import _auditor_token, _browser, _seed, _sign_in
from tests.test_console_explain_browser import _accessible


def _checked(page: Page, seen: list[str], where: str) -> None:
    """axe on the page as it stands; the page's address kept for the phone pass when it is
    one a link reaches (a form's answer is not)."""
    _accessible(page)
    seen.append(where)


def test_every_console_page_passes_axe(tmp_path: Path) -> None:
    config = api_config(LedgerConfig(data_dir=tmp_path / "data", run_checkpointer=False))
    tokens = make_tokens(config)
    with LoopbackServer(config) as server, _browser() as browser:
        base = server.base_url
        seeded = _seed(base, tokens["admin"])
        receipt_id = seeded["search"]["receipt_id"]
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        links: list[str] = []

        page.goto(base + "/console/sign-in")
        _checked(page, links, "/console/sign-in")
        _sign_in(page, base, _auditor_token(config), "/console/")
        for where in (
            "/console/",
            "/console/receipts",
            "/console/receipts?q=audit+logs&content=plain",
            f"/console/receipts/{receipt_id}",
            f"/console/citations/{seeded['cited']['citation_ids'][0]}",
            f"/console/events/{seeded['search']['position']}",
            "/console/history",
            "/console/documents",
            "/console/erasures",
            "/console/export",
            "/console/proofs",
            "/console/reports",
        ):
            answered = page.goto(base + where)
            assert answered is not None and answered.status == 200, (where, answered and answered.status)
            _checked(page, links, where)

        # The error page: a receipt that is not there.
        missing = page.goto(base + "/console/receipts/no-such-receipt")
        assert missing is not None and missing.status == 404
        _checked(page, links, "/console/receipts/no-such-receipt")

        # A document found by its path.
        page.goto(base + "/console/documents")
        page.get_by_label("Path", exact=True).fill("handbook/retention.md")
        page.get_by_role("button", name="Find").click()
        assert seeded["doc"]["document_id"] in page.locator("main").inner_text()
        _checked(page, links, page.url.removeprefix(base))

        # A hold: its confirmation, then its done page.
        page.goto(base + "/console/erasures")
        page.get_by_label("Document ids (space or comma separated)").fill(seeded["doc"]["document_id"])
        page.get_by_label("Legal basis").fill("case 12")
        page.get_by_role("button", name="Place hold…").click()
        _accessible(page)
        page.get_by_role("button", name="Yes, place the hold").click()
        assert "hold" in page.locator("main").inner_text().lower()
        _accessible(page)

        # A proof's answer: the log checked against the checkpoint it shows.
        page.goto(base + "/console/proofs")
        kept = page.locator("pre.note").inner_text()
        page.get_by_label("Your checkpoint from the last audit (a signed note)").fill(kept)
        page.get_by_role("button", name="Check the log against it").click()
        assert page.locator(".badge.intact").is_visible()
        _accessible(page)

        # An issued report.
        page.goto(base + "/console/reports")
        today = dt.datetime.now(dt.UTC).date()
        page.get_by_label("From (first day, UTC)").fill(today.isoformat())
        page.get_by_label("To (the day after the last)").fill((today + dt.timedelta(days=1)).isoformat())
        page.get_by_role("button", name="Issue report").click()
        assert page.locator("#report-id").is_visible(), page.locator("main").inner_text()
        _accessible(page)

        # On a phone: every page a link reaches, again.
        page.set_viewport_size({"width": 390, "height": 800})
        for where in links:
            if where == "/console/sign-in":
                continue  # signed in, it sends the browser on
            page.goto(base + where)
            _accessible(page)
        assert len(links) >= 14
