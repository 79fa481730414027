"""The console over real HTTP (a real server on loopback, httpx): the Proofs check costs what
changed since the kept checkpoint and stops at the deadline; a form needs a same-origin
`Origin` or `Referer` (issue 26 item 5); every `/console` answer, errors included, is an
HTML page with the console's headers and navigation."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace

import httpx
import pytest

from api.auth import create_token
from ledger.config import LedgerConfig
from ledger.deadline import Deadline, DeadlineExceeded
from ledger.storage.store import LEDGER_STREAM_ID
from ledger.tlog.checkpoints import make_checkpoint
from ledger.usecases.held_checkpoint import check_held_checkpoint
from tests import loopback_http
from tests.api_support import LoopbackServer, api_config, make_tokens
from tests.conftest import RawStore
from tests.test_client_checkpoints import _grow
from tests.test_tamper import _forger_key, _set_state, _state

CSRF = 'name="csrf_token" value="'


@contextmanager
def _signed_in(base_url: str, token: str) -> Iterator[tuple[httpx.Client, str]]:
    """A browser-like client: signed in (Origin sent, as browsers do on a POST), with the
    session's CSRF token read from a page."""
    with loopback_http.client(base_url=base_url, timeout=30) as http:
        signed = http.post(
            "/console/sign-in", data={"token": token, "next": "/console/proofs"}, headers={"Origin": base_url}
        )
        assert signed.status_code == 303, signed.text
        page = http.get("/console/proofs").text
        yield http, page.split(CSRF, 1)[1].split('"', 1)[0]


def _kept_note(http: httpx.Client) -> str:
    page = http.get("/console/proofs").text
    return page.split('<pre class="note">', 1)[1].split("</pre>", 1)[0].replace("&#43;", "+")


def test_proofs_check_from_the_kept_size(ledger_config: LedgerConfig, raw_store: RawStore) -> None:
    config = api_config(ledger_config)
    tokens = make_tokens(config)
    with LoopbackServer(config) as server:
        base, ledger = server.base_url, server.app.state.services.ledger
        _grow(ledger, 20)
        with _signed_in(base, tokens["admin"]) as (http, csrf):
            kept = ledger.latest_checkpoint()
            assert kept is not None and kept.tree_size == 21
            _grow(ledger, 9)

            def check(note: str) -> str:
                answer = http.post(
                    "/console/proofs", data={"checkpoint": note, "csrf_token": csrf}, headers={"Origin": base}
                )
                assert answer.status_code == 200, answer.text
                return answer.text

            good = check(kept.note)
            assert "Not rewritten" in good and "your checkpoint of 21 entries is a prefix" in good
            assert "9 of the 9 entries since were read back" in good
            # Signed by a key this log never had: refused.
            forged = make_checkpoint(seq=1, origin=ledger.origin, tree_size=21, root=kept.root,
                                     issued_at=kept.issued_at, key=_forger_key())  # fmt: skip
            assert "not signed by any key of this log" in check(forged.note)
            # An entry written after the kept checkpoint altered in the store: found by the re-read.
            state = _state(raw_store, LEDGER_STREAM_ID, 25)
            _set_state(
                raw_store, LEDGER_STREAM_ID, 25, state.replace(b'"recorded_at":"2', b'"recorded_at":"3', 1)
            )
            assert "the stored entries 22..30 are not the ones the checkpoint signed" in check(kept.note)
            _set_state(raw_store, LEDGER_STREAM_ID, 25, state)
        # The work stops at the deadline instead of running on after the 408.
        with pytest.raises(DeadlineExceeded):
            check_held_checkpoint(SimpleNamespace(ledger=ledger), kept.note, Deadline(0.0))  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", ["sqlite"])
def test_forms_need_a_same_origin_origin_or_referer(ledger_config: LedgerConfig) -> None:
    config = api_config(ledger_config)
    tokens = make_tokens(config)
    with LoopbackServer(config) as server:
        base = server.base_url
        port = base.rsplit(":", 1)[1]
        with _signed_in(base, tokens["admin"]) as (http, csrf):
            form = {"document_id": "doc-1", "csrf_token": csrf}  # the first step only shows a confirmation

            def post(**headers: str) -> int:
                return http.post("/console/erasures", data=form, headers=headers).status_code

            assert post(Origin=base) == 200
            assert post(Origin=f"HTTP://127.0.0.1:{port}") == 200  # scheme and host are case-blind
            assert post(Referer=f"{base}/console/erasures") == 200
            refused = [
                {"Origin": "null"},
                {"Origin": "null", "Referer": f"{base}/console/erasures"},
                {"Referer": "https://evil.example/console/erasures"},
                {},  # neither: where it came from cannot be told
                {"Origin": "https://evil.example"},
                {"Origin": f"https://127.0.0.1:{port}"},  # scheme
                {"Origin": "http://127.0.0.1:1"},  # port
                {"Origin": "http://127.0.0.1"},  # default port
                {"Origin": f"{base}/console"},  # an Origin has no path
                {"Origin": f"http://user@127.0.0.1:{port}"},
                {"Origin": "127.0.0.1"},
                {"Origin": "http://"},
                {"Origin": f"http://127.0.0.1:{port}x"},
                {"Referer": "not a url"},
                {"Origin": base, "Sec-Fetch-Site": "cross-site"},
            ]
            for headers in refused:
                assert post(**headers) == 403, headers
        # Signing in is a form too (no login CSRF from an opaque or foreign origin).
        with loopback_http.client(base_url=base, timeout=30) as http:
            for headers in ({"Origin": "null"}, {}, {"Referer": "https://evil.example/"}):
                answer = http.post("/console/sign-in", data={"token": tokens["admin"]}, headers=headers)
                assert answer.status_code == 403 and "citeledger_console" not in answer.headers.get(
                    "set-cookie", ""
                ), headers


def _is_console_page(answer: httpx.Response, status: int, *, signed_in: bool | None = False) -> None:
    where = f"{answer.request.method} {answer.request.url.path}: {answer.status_code}"
    assert answer.status_code == status, where + answer.text[:200]
    assert answer.headers["content-type"].startswith("text/html"), where
    assert answer.headers["content-security-policy"].startswith("default-src 'none'"), where
    assert answer.headers["x-frame-options"] == "DENY", where
    assert answer.headers["x-content-type-options"] == "nosniff", where
    assert '<nav aria-label="Console">' in answer.text and 'href="/console/proofs"' in answer.text, where
    if signed_in is not None:
        assert ('action="/console/sign-out"' in answer.text) == signed_in, where
    assert '"error"' not in answer.text and "Traceback" not in answer.text, where


@pytest.mark.parametrize("backend", ["sqlite"])
def test_every_console_error_is_a_console_page(ledger_config: LedgerConfig) -> None:
    config = api_config(ledger_config)
    reader = create_token(config.token_path, "acme", ["audit.read"])
    with LoopbackServer(config) as server:
        base = server.base_url
        with loopback_http.client(base_url=base, timeout=30) as anonymous:
            _is_console_page(anonymous.get("/console/no-such-page"), 404)
            _is_console_page(anonymous.get("/console/events/not-a-number"), 404)
            _is_console_page(anonymous.get("/console/static/missing.css"), 404)
            _is_console_page(anonymous.delete("/console/sign-in"), 405)
            _is_console_page(anonymous.get("/console/sign-in", headers={"X-Run-Id": "bad id!"}), 400)
            _is_console_page(anonymous.get("/console/sign-in?next=" + "x" * 5000), 400)
        with _signed_in(base, reader) as (http, csrf):
            _is_console_page(http.get("/console/no-such-page"), 404)
            _is_console_page(http.get("/console/events/999999"), 404, signed_in=True)
            _is_console_page(http.put("/console/proofs"), 405)
            _is_console_page(http.get("/console/history?type=Bogus"), 400, signed_in=True)
            _is_console_page(http.get("/console/history?actor=" + "a" * 200), 400, signed_in=True)
            _is_console_page(http.get("/console/history?from_position=-3"), 400, signed_in=True)
            form = {"document_id": "doc-1", "csrf_token": csrf}
            refused = http.post("/console/erasures", data=form, headers={"Origin": base})
            _is_console_page(refused, 403, signed_in=True)  # no admin scope
            big = {"checkpoint": "x" * (5 * 1024 * 1024), "csrf_token": csrf}
            _is_console_page(
                http.post("/console/proofs", data=big, headers={"Origin": base}), 413, signed_in=None
            )
    # The deadline's 408 too (a server whose deadline nothing meets).
    slow = api_config(ledger_config, request_deadline_s=0.000001)
    with LoopbackServer(slow) as server, loopback_http.client(base_url=server.base_url, timeout=30) as http:
        slow_sign_in = http.post(
            "/console/sign-in", data={"token": reader}, headers={"Origin": server.base_url}
        )
        _is_console_page(slow_sign_in, 408)
        api = http.get("/v1/healthz")
        assert api.status_code == 408 and api.headers["content-type"].startswith("application/json")
