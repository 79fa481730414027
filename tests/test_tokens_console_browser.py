"""A revoked token's console session ends, in a real browser (headless Chromium) against a
real server, on SQLite and PostgreSQL: signed in, the token revoked by the operator over
HTTP, the next page is the sign-in form; an expired token's session ends the same way."""

from __future__ import annotations

import time

from api.auth import create_token
from ledger.config import LedgerConfig
from tests import loopback_http
from tests.api_support import LoopbackServer, api_config, make_tokens
from tests.test_console_browser import _browser, _sign_in


def test_a_revoked_or_expired_tokens_console_session_ends(ledger_config: LedgerConfig) -> None:
    config = api_config(ledger_config)
    tokens = make_tokens(config)
    auditor = create_token(config.token_path, "acme", ["audit.read"])
    with LoopbackServer(config) as server, _browser() as browser:
        revoked_page = browser.new_context().new_page()
        _sign_in(revoked_page, server.base_url, auditor, "/console/history")
        assert revoked_page.url.endswith("/console/history"), revoked_page.url
        revoked = loopback_http.delete(
            f"{server.base_url}/v1/operator/tokens/{auditor.split('_')[1]}",
            headers={"Authorization": f"Bearer {tokens['operator']}"},
        )
        assert revoked.status_code == 200, revoked.text
        revoked_page.reload()
        assert "/console/sign-in" in revoked_page.url, revoked_page.url
        assert revoked_page.get_by_label("Bearer token").is_visible()

        expiry = int(time.time()) + 5  # room to sign in on a busy machine
        expiring = create_token(
            config.token_path,
            "acme",
            ["audit.read"],
            expires_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expiry)),
        )
        server.app.state.services.tokens.refresh()
        expiring_page = browser.new_context().new_page()
        _sign_in(expiring_page, server.base_url, expiring, "/console/history")
        assert expiring_page.url.endswith("/console/history"), expiring_page.url
        time.sleep(max(0.0, expiry - time.time()) + 0.2)
        expiring_page.goto(server.base_url + "/console/history")
        assert "/console/sign-in" in expiring_page.url, expiring_page.url
