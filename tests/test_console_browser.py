"""The compliance console in a real browser: headless Chromium (the system package, driven
by Playwright; nothing is downloaded) against a real server on loopback, on SQLite and on
PostgreSQL. An auditor signs in, filters the history, opens a receipt (intact), replays it
and reads the diff, reads a citation back, is refused a restricted one (and finds the
denial in the history), erases a document (its citation goes), exports and verifies the
file with the CLI, and signs out. A forged form is refused; a tampered copy of the store
shows the receipt as not intact. Screenshots of each page go to a temporary folder (to
docs/console/ only through scripts/console_screenshots.sh)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, sync_playwright

from api.auth import create_token
from ledger.config import LedgerConfig
from tests import loopback_http
from tests.api_support import DOC, LoopbackServer, api_config, make_tokens
from tests.server_process import chromium

ROOT = Path(__file__).resolve().parents[1]
# The committed pictures in docs/console/ are made by scripts/console_screenshots.sh, which names
# that folder here; the suite itself writes only into its temporary directories.
SHOTS_ENV = "CITELEDGER_SCREENSHOT_DIR"
SECRET = "# Salaries\n\nThe salary bands of the board are confidential.\n"


@contextmanager
def _browser() -> Iterator[Any]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium(),
            args=["--no-sandbox", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"],
        )
        try:
            yield browser
        finally:
            browser.close()


def _seed(base_url: str, admin: str) -> dict[str, Any]:
    """A document, a restricted one, an external retrieval citing each, and a search."""
    headers = {"Authorization": f"Bearer {admin}"}
    with loopback_http.client(base_url=base_url, headers=headers, timeout=30) as http:

        def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
            answer = http.post(path, json=body)
            assert answer.status_code in (200, 201), answer.text
            result: dict[str, Any] = answer.json()
            return result

        doc = post("/v1/documents", {"path": "handbook/retention.md", "text": DOC})
        secret = post(
            "/v1/documents", {"path": "hr/salaries.md", "text": SECRET, "sensitivity": "restricted"}
        )

        def cite(document: dict[str, Any], snippet: str) -> dict[str, Any]:
            chunk = document["chunks"][-1]
            return post(
                "/v1/retrievals",
                {
                    "query": "what does the handbook say?",
                    "engine": "external:test-rag",
                    "task": {"task_id": "console-task", "deadline_ms": 1500},
                    "selected_entries": [
                        {
                            "document_id": document["document_id"],
                            "chunk_id": chunk["chunk_id"],
                            "score": "2.5",
                            "snippet": snippet,
                        }
                    ],
                },
            )

        cited = cite({**doc, "chunks": doc["chunks"][:1]}, "Audit logs are kept for 180 days.")
        restricted = cite(secret, "The salary bands of the board are confidential.")
        searched = post("/v1/search", {"task_id": "console-search", "input": {"query": "audit logs kept"}})
        assert searched["output"]["citations"], searched
    return {"doc": doc, "cited": cited, "restricted": restricted, "search": searched}


def _shot(page: Page, name: str, shots: Path | None) -> None:
    if shots is not None:
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / f"{name}.png"), full_page=True)


def _shots_dir(ledger_config: LedgerConfig, tmp_path: Path) -> Path | None:
    """Where this run's pictures go: one set, from SQLite; the suite keeps them in its tmp_path."""
    if ledger_config.database_url is not None:
        return None
    named = os.environ.get(SHOTS_ENV)
    return Path(named) if named else tmp_path / "screenshots"


def _sign_in(page: Page, base_url: str, token: str, target: str = "/console/") -> None:
    page.goto(base_url + target)
    assert "/console/sign-in" in page.url
    page.get_by_label("Bearer token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_load_state()


def _cli(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _auditor_token(config: Any) -> str:
    # Everything an auditor does in the console, but not knowledge.restricted.read.
    return create_token(config.token_path, "acme", ["audit.read", "audit.content", "replay.run", "admin"])


def test_an_auditor_works_through_the_console(ledger_config: LedgerConfig, tmp_path: Path) -> None:
    config = api_config(ledger_config)
    tokens = make_tokens(config)
    auditor = _auditor_token(config)
    screenshots = _shots_dir(ledger_config, tmp_path)
    with LoopbackServer(config) as server, _browser() as browser:
        base = server.base_url
        seeded = _seed(base, tokens["admin"])
        context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
        page = context.new_page()

        _sign_in(page, base, auditor)
        assert page.get_by_role("heading", name="Overview").is_visible()
        cookie = next(c for c in context.cookies() if c["name"] == "citeledger_console")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and auditor not in cookie["value"]
        _shot(page, "overview", screenshots)

        # History, filtered by type: a shareable URL, only that type listed.
        page.goto(base + "/console/history")
        page.get_by_label("Type").select_option("RetrievalRecorded")
        page.get_by_role("button", name="Filter").click()
        assert "type=RetrievalRecorded" in page.url
        types = page.locator("table.history tbody tr td:nth-child(3)").all_inner_texts()
        assert len(types) == 3 and set(types) == {"RetrievalRecorded"}
        _shot(page, "history", screenshots)

        # Receipts, filtered by task: the question asked, in plain under audit.content.
        page.goto(base + "/console/receipts")
        page.get_by_text("More filters").click()
        page.get_by_label("Task id").fill("console-search")
        page.get_by_role("button", name="Filter").click()
        assert "task_id=console-search" in page.url
        rows = page.locator("table.receipts tbody tr")
        assert rows.count() == 1 and "audit logs kept" in rows.first.inner_text()
        _shot(page, "receipts", screenshots)

        # The search receipt: intact, with its citations and policy snapshot.
        receipt_id = seeded["search"]["receipt_id"]
        page.locator(f"a[href='/console/receipts/{receipt_id}']").first.click()
        assert page.locator(".badge.intact").is_visible()
        main = page.locator("main").inner_text()
        assert "handbook/retention.md" in main
        # The question asked, in plain under audit.content, and the read is on the record.
        assert page.locator("blockquote.question").inner_text() == "audit logs kept"
        _shot(page, "receipt", screenshots)
        page.goto(base + "/console/history?type=ContentRead")
        assert page.locator("table.history tbody tr td:nth-child(3)").count() >= 1
        # The restricted citation's snippet stays sealed for a token without the scope.
        page.goto(f"{base}/console/receipts/{seeded['restricted']['receipt_id']}")
        assert "restricted: needs knowledge.restricted.read" in page.locator("main").inner_text()
        assert "confidential" not in page.content()
        page.goto(f"{base}/console/receipts/{receipt_id}")

        # Evidence for a third party: the receipt's bundle checks offline with the root key alone.
        with page.expect_download() as bundle_download:
            page.get_by_role("link", name="Download the receipt's bundle").click()
        bundle_path = tmp_path / "receipt.bundle.json"
        bundle_download.value.save_as(bundle_path)
        root_pub = str(config.ledger.data_dir / "keys" / "root.pub")
        offline = _cli(["verify-bundle", str(bundle_path), "--public-key", root_pub])
        assert offline.returncode == 0 and offline.stdout.startswith("OK "), offline.stdout + offline.stderr

        # Replay: the diff's three views and the integrity verdict.
        page.get_by_role("button", name="Replay this receipt").click()
        main = page.locator("main").inner_text()
        assert "Integrity: ok" in main
        for view in ("As of the original", "Data drift", "Policy drift"):
            assert view in main
        _shot(page, "replay", screenshots)

        # Read a citation back: the chunk with its cited span marked.
        cited_id = seeded["cited"]["citation_ids"][0]
        page.goto(f"{base}/console/citations/{cited_id}")
        assert page.locator("mark").inner_text() == "Audit logs are kept for 180 days."
        _shot(page, "citation", screenshots)

        # A restricted chunk without the scope: 403, recorded, and found in the history.
        restricted_id = seeded["restricted"]["citation_ids"][0]
        answer = page.goto(f"{base}/console/citations/{restricted_id}")
        assert answer is not None and answer.status == 403
        assert "confidential" not in page.content()
        _shot(page, "citation-denied", screenshots)
        page.goto(base + "/console/history?type=AccessDenied")
        [denied] = page.locator("table.history tbody tr td:nth-child(3)").all_inner_texts()
        # What was denied, without the restricted path or text: the reader lacks the scope.
        assert denied.startswith("AccessDenied") and "restricted document" in denied
        assert "hr/salaries.md" not in denied and "confidential" not in page.content()

        # Erase the cited document (with a confirmation step): its citation is gone.
        page.goto(base + "/console/erasures")
        page.get_by_label("Document id", exact=True).fill(seeded["doc"]["document_id"])
        page.get_by_role("button", name="Erase…").click()
        assert "cannot be undone" in page.locator("main").inner_text()
        page.get_by_role("button", name="Yes, erase").click()
        assert page.get_by_role("heading", name="Erased").is_visible()
        gone = page.goto(f"{base}/console/citations/{cited_id}")
        assert gone is not None and gone.status == 404
        assert "Audit logs are kept" not in page.content()
        page.goto(base + "/console/erasures")
        assert "erasure_request" in page.locator("main").inner_text()
        _shot(page, "erasures", screenshots)

        # Proof that the log was not rewritten since a kept checkpoint; a forged one is refused.
        page.goto(base + "/console/proofs")
        kept = page.locator("pre.note").inner_text()
        page.get_by_label("Your checkpoint from the last audit (a signed note)").fill(kept)
        page.get_by_role("button", name="Check the log against it").click()
        assert page.locator(".badge.intact").inner_text().startswith("Not rewritten")
        _shot(page, "proofs", screenshots)
        lines = kept.split("\n")
        lines[2] = "A" * len(lines[2])  # another root hash, the same signature
        page.get_by_label("Your checkpoint from the last audit (a signed note)").fill("\n".join(lines))
        page.get_by_role("button", name="Check the log against it").click()
        assert page.locator(".badge.broken").is_visible()

        # Export, then verify the downloaded file offline with the CLI.
        page.goto(base + "/console/export")
        _shot(page, "export", screenshots)
        with page.expect_download() as download:
            page.get_by_role("link", name="Download the export").click()
        exported = tmp_path / "export.jsonl"
        download.value.save_as(exported)
        checked = _cli(["verify", "--export", str(exported), "--public-key", root_pub])
        assert checked.returncode == 0, checked.stdout + checked.stderr

        # Sign out: the session is gone server-side too.
        page.get_by_role("button", name="Sign out").click()
        assert "/console/sign-in" in page.url
        page.goto(base + "/console/history")
        assert "/console/sign-in" in page.url
        context.close()


def test_forged_forms_and_foreign_tokens_are_refused(ledger_config: LedgerConfig) -> None:
    config = api_config(ledger_config)
    tokens = make_tokens(config)
    auditor = _auditor_token(config)
    with LoopbackServer(config) as server:
        seeded = _seed(server.base_url, tokens["admin"])
        doc_id = seeded["doc"]["document_id"]
        services = server.app.state.services
        with loopback_http.client(base_url=server.base_url, timeout=30) as browser:
            origin = {"Origin": server.base_url}  # what a browser sends with a form
            signed_in = browser.post(
                "/console/sign-in", data={"token": auditor, "next": "/console/"}, headers=origin
            )
            assert signed_in.status_code == 303
            size = services.ledger.size
            # No CSRF token, a wrong one, and the right one from another site: all refused.
            for data, headers in (
                ({"document_id": doc_id, "confirm": "yes"}, origin),
                ({"document_id": doc_id, "confirm": "yes", "csrf_token": "forged"}, origin),
                ({"document_id": doc_id, "confirm": "yes"}, {"Origin": "https://evil.example"}),
            ):
                forged = browser.post("/console/erasures", data=data, headers=headers)
                assert forged.status_code == 403, forged.text
            assert services.ledger.size == size  # nothing was written
            page = browser.get("/console/erasures")
            assert page.headers["content-security-policy"].startswith("default-src 'none'")
            assert page.headers["x-frame-options"] == "DENY"
            assert "unsafe-inline" not in page.headers["content-security-policy"]
            # Another tenant's receipt is a 404, exactly as on /v1.
            foreign = _seed(server.base_url, tokens["other"])
            assert browser.get(f"/console/receipts/{foreign['cited']['receipt_id']}").status_code == 404
        with loopback_http.client(
            base_url=server.base_url, timeout=30, headers={"Origin": server.base_url}
        ) as operator:
            refused = operator.post("/console/sign-in", data={"token": tokens["operator"]})
            assert refused.status_code == 401 and "operator token has no console" in refused.text
            assert operator.post("/console/sign-in", data={"token": "clt_x_wrong"}).status_code == 401
            # An open redirect is not on offer: `next` outside the console lands on the overview.
            outside = operator.post(
                "/console/sign-in", data={"token": auditor, "next": "https://evil.example/"}
            )
            assert outside.status_code == 303 and outside.headers["location"] == "/console/"


def test_error_pages_keep_the_console_in_a_browser(ledger_config: LedgerConfig) -> None:
    """Unknown pages, unknown events, a refused page and a wrong method: each is the console's
    page (navigation, headers, no inline script the CSP would block), signed in or not."""
    config = api_config(ledger_config)
    reader = create_token(config.token_path, "acme", ["audit.read"])
    with LoopbackServer(config) as server, _browser() as browser:
        base = server.base_url
        context = browser.new_context()
        page = context.new_page()
        blocked: list[str] = []
        page.on("console", lambda message: blocked.append(message.text) if message.type == "error" else None)
        anonymous = page.goto(base + "/console/no-such-page")
        assert anonymous is not None and anonymous.status == 404
        assert page.get_by_role("heading", name="Not found").is_visible()
        assert page.get_by_role("navigation", name="Console").get_by_role("link", name="Proofs").is_visible()
        _sign_in(page, base, reader)
        for path, status, heading in (
            ("/console/no-such-page", 404, "Not found"),
            ("/console/events/not-a-number", 404, "Not found"),
            ("/console/events/999999", 404, "Not found"),
            ("/console/history?type=Bogus", 400, "Bad filter"),
        ):
            answer = page.goto(base + path)
            assert answer is not None and answer.status == status, path
            headers = answer.headers
            assert headers["x-frame-options"] == "DENY" and headers["x-content-type-options"] == "nosniff"
            assert headers["content-security-policy"].startswith("default-src 'none'"), path
            assert headers["content-type"].startswith("text/html"), path
            assert page.get_by_role("heading", name=heading).first.is_visible(), path
            nav = page.get_by_role("navigation", name="Console")
            nav.get_by_role("link", name="History").click()  # the navigation works from the error
            assert page.url == base + "/console/history", path
        context.close()
        # A token without audit.read: refused as a page, with the user's header kept.
        writer = create_token(config.token_path, "acme", ["retrieval.write"])
        context = browser.new_context()
        page = context.new_page()
        _sign_in(page, base, writer)
        assert page.get_by_role("heading", name="Not allowed").is_visible()
        assert page.get_by_role("button", name="Sign out").is_visible()
        assert page.get_by_role("navigation", name="Console").is_visible()
        context.close()
        # The console's own script and style load under its CSP on error pages too.
        assert all("Content Security Policy" not in text for text in blocked), blocked


def test_a_tampered_copy_of_the_store_shows_the_receipt_not_intact(tmp_path: Path) -> None:
    """SQLite: a copy of the data directory with one byte of a receipt's entry changed."""
    config = api_config(LedgerConfig(data_dir=tmp_path / "data", run_checkpointer=False))
    tokens = make_tokens(config)
    auditor = _auditor_token(config)
    with LoopbackServer(config) as server:
        receipt_id = _seed(server.base_url, tokens["admin"])["cited"]["receipt_id"]
        with loopback_http.client(base_url=server.base_url, timeout=30) as http:
            http.post("/console/sign-in", data={"token": auditor}, headers={"Origin": server.base_url})
            assert "badge intact" in http.get(f"/console/receipts/{receipt_id}").text
    copy = tmp_path / "copy"
    shutil.copytree(config.ledger.data_dir, copy)
    with sqlite3.connect(copy / "ledger.sqlite") as db:
        (version, state) = db.execute(
            "SELECT originator_version, state FROM stored_events WHERE instr(state, ?) > 0",
            (f'"receipt_id":"{receipt_id}"'.encode(),),
        ).fetchone()
        db.execute(
            "UPDATE stored_events SET state=? WHERE originator_version=? AND state=?",
            (bytes(state).replace(b'"score":"2.5"', b'"score":"9.5"'), version, state),
        )
    tampered = replace(config, ledger=replace(config.ledger, data_dir=copy))
    with LoopbackServer(tampered) as server, _browser() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        _sign_in(page, server.base_url, auditor, f"/console/receipts/{receipt_id}")
        assert page.locator(".badge.broken").is_visible()
        assert "Not intact" in page.locator(".badge.broken").inner_text()


@pytest.mark.parametrize("width", [390])
def test_pages_read_on_a_phone(tmp_path: Path, width: int) -> None:
    config = api_config(LedgerConfig(data_dir=tmp_path / "data", run_checkpointer=False))
    tokens = make_tokens(config)
    with LoopbackServer(config) as server, _browser() as browser:
        _seed(server.base_url, tokens["admin"])
        page = browser.new_page(viewport={"width": width, "height": 800})
        _sign_in(page, server.base_url, _auditor_token(config), "/console/history")
        # Nothing wider than the screen but the tables, which scroll inside themselves.
        overflow = page.evaluate("document.documentElement.scrollWidth")
        assert overflow <= width + 1, overflow
        named = os.environ.get(SHOTS_ENV)
        _shot(page, "history-phone", Path(named) if named else tmp_path / "screenshots")
