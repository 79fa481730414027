"""The console explains what the record shows, in real Chromium at 1280 and 390 px (issue 30):
why a receipt cites nothing, a redacted snippet's rule, each part's rank by score, what an
`AccessDenied` denied, an event page that reads as a page; documents found, erased and held by
path (a path that names nothing is the console's 404 page); a replay after an erasure coloured
by its verdict; on a phone the receipt link on screen and the filters folded. axe-core finds no
serious or critical issue on any of these pages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page

from ledger.config import LedgerConfig
from tests import loopback_http
from tests.api_support import LoopbackServer, api_config, make_tokens
from tests.test_console_browser import _auditor_token, _browser, _seed, _sign_in

REDACT = "version: r1\nrules:\n  - id: hb-redacted\n    action: redact\n    match: {paths: ['handbook/**']}\n"
AXE = Axe()


def _accessible(page: Page) -> None:
    """axe-core on the page as it stands: no serious or critical violation."""
    found = AXE.run(page).response["violations"]
    bad = [(v["id"], v["impact"], len(v["nodes"])) for v in found if v["impact"] in ("serious", "critical")]
    assert bad == [], (page.url, bad)


def _more(base_url: str, admin: str) -> dict[str, Any]:
    """Beside `_seed`: two files at paths, a search that finds nothing in its root, a search
    under a redacting policy, and a search citing both files (replayed after an erasure)."""
    with loopback_http.client(
        base_url=base_url, headers={"Authorization": f"Bearer {admin}"}, timeout=30
    ) as http:

        def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
            answer = http.post(path, json=body)
            assert answer.status_code in (200, 201), answer.text
            result: dict[str, Any] = answer.json()
            return result

        leave = post(
            "/v1/documents",
            {
                "path": "policies/leave.md",
                "text": "# Leave\n\nParental leave lasts sixteen weeks.\n",
                "source": "hr",
            },
        )
        post(
            "/v1/documents",
            {
                "path": "policies/bonus.md",
                "text": "# Bonus\n\nParental leave does not pause the bonus.\n",
                "source": "hr",
            },
        )
        both = post("/v1/search", {"task_id": "both", "input": {"query": "parental leave", "top_k": 5}})
        assert len(both["output"]["citations"]) == 2, both
        nothing = post(
            "/v1/search",
            {"task_id": "nothing", "input": {"query": "audit logs kept", "target_roots": ["hr"]}},
        )
        assert nothing["status"] == "no_hit", nothing
        post("/v1/policy-bundles", {"bundle_yaml": REDACT})
        redacted = post("/v1/search", {"task_id": "redacted", "input": {"query": "audit logs kept"}})
    return {"leave": leave, "both": both, "nothing": nothing, "redacted": redacted}


@pytest.mark.parametrize("width", [1280, 390])
def test_the_console_explains_the_record(tmp_path: Path, width: int) -> None:
    config = api_config(LedgerConfig(data_dir=tmp_path / "data", run_checkpointer=False))
    tokens = make_tokens(config)
    with LoopbackServer(config) as server, _browser() as browser:
        base = server.base_url
        seeded = _seed(base, tokens["admin"])
        more = _more(base, tokens["admin"])
        page = browser.new_page(viewport={"width": width, "height": 800})
        _sign_in(page, base, _auditor_token(config), "/console/receipts")

        # The receipts list: the link that opens a receipt is on screen, on a phone too; there
        # the filters fold behind one control, which opens them.
        link = page.locator("table.receipts tbody tr").first.locator("a").first
        box = link.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, box
        fold = page.locator("details.fold")
        assert fold.evaluate("d => d.open") is (width > 700)
        if width <= 700:
            assert not page.get_by_label("Status").is_visible()
            page.locator("details.fold > summary").click()
            assert page.get_by_label("Status").is_visible()
        _accessible(page)

        # A receipt that cites nothing says where it looked, the rule and the gaps.
        page.goto(f"{base}/console/receipts/{more['nothing']['receipt_id']}")
        why = page.locator("section.why").inner_text()
        assert "Why nothing was cited (no_hit)" in why and "hr" in why and "only hr was searched" in why
        _accessible(page)

        # A redacted snippet names its rule; every part shows its own rank by score.
        page.goto(f"{base}/console/receipts/{more['redacted']['receipt_id']}")
        assert "redacted by rule hb-redacted" in page.locator("main").inner_text()
        page.goto(f"{base}/console/receipts/{more['both']['receipt_id']}")
        ranks = page.locator("main table").first.locator("tbody tr td:nth-child(2)").all_inner_texts()
        assert sorted(ranks) == ["1", "2"], ranks
        _accessible(page)

        # The event page: the fields first, the signed JSON folded under them.
        page.goto(f"{base}/console/events/{more['both']['position']}")
        assert page.locator("dl.payload").is_visible() and not page.locator("pre.json").is_visible()
        page.locator("details.raw > summary").click()
        assert page.locator("pre.json").is_visible()
        _accessible(page)

        # An AccessDenied says what was denied, never the restricted path or text.
        page.goto(f"{base}/console/citations/{seeded['restricted']['citation_ids'][0]}")
        page.goto(base + "/console/history?type=AccessDenied")
        [denied] = page.locator("table.history tbody tr td:nth-child(3)").all_inner_texts()
        assert (
            "citation" in denied and "knowledge.restricted.read" in denied and "hr/salaries.md" not in denied
        )
        _accessible(page)

        # Documents by path: a path that names nothing is the console's page naming it.
        missing = page.goto(base + "/console/documents?path=policies/nowhere.md")
        assert missing is not None and missing.status == 404
        assert (
            "policies/nowhere.md" in page.locator("main").inner_text()
            and "{" not in page.locator("main").inner_text()
        )
        page.goto(base + "/console/documents")
        page.get_by_label("Path", exact=True).fill("policies/leave.md")
        page.get_by_role("button", name="Find").click()
        facts = page.locator("main").inner_text()
        assert more["leave"]["document_id"] in facts and "1 receipt" in facts
        _accessible(page)

        # Erase by path: the confirmation names the path, its versions and the citing receipts;
        # the done page says what happened in words.
        page.goto(base + "/console/erasures")
        page.get_by_label("Document path").first.fill("policies/leave.md")
        page.get_by_label("Source of the path (optional)").first.fill("hr")
        page.get_by_role("button", name="Erase…").click()
        confirm = page.locator("main").inner_text()
        assert "policies/leave.md" in confirm and "v1 from position" in confirm and "1 receipt" in confirm
        _accessible(page)
        page.get_by_role("button", name="Yes, erase").click()
        done = page.locator("main").inner_text()
        assert "Erased the document at policies/leave.md" in done and "already_erased" not in done
        assert "False" not in done
        _accessible(page)

        # The replay of the search that cited both: the other file reproduced, the erased one
        # named by path, in the verdict's colour.
        page.goto(f"{base}/console/receipts/{more['both']['receipt_id']}")
        page.get_by_role("button", name="Replay this receipt").click()
        badge = page.locator(".badge.partial")
        assert badge.is_visible(), page.locator("main").inner_text()
        said = badge.inner_text()
        assert (
            "reproduced apart from erased" in said
            and "policies/leave.md" in said
            and "erasure request" in said
        )
        _accessible(page)
