"""`GET /v1/receipts/{id}` answered at the ASGI entry point (`api.receipt_shortcut`) is the
route's answer byte for byte, and everything it does not take (no or a bad token, a missing
scope, an operator, another tenant's receipt, a query) is the route's, refusals included;
one request spends one token of the rate limit, whichever answers it. And the HTTP protocol
`serve` runs (`api.http_protocol`) puts the same bytes on the wire."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from litestar.types import Scope, Send

from api.http_protocol import FLUSH_AT_BYTES, CoalescingTransport
from api.receipt_shortcut import Shortcut
from ledger.config import LedgerConfig
from tests import loopback_http
from tests.api_support import Api, api, make_api, serving  # noqa: F401

IDS = {"X-Run-Id": "run-shortcut-1", "X-Trace-Id": "trace-shortcut-1"}


def counting_shortcuts(api: Api) -> list[bool]:
    """What each shortcut call answered (True: the shortcut; False: handed to the route)."""
    answered: list[bool] = []
    app: Any = api.client.app
    inner = list(app.shortcuts)

    def counted(shortcut: Shortcut) -> Shortcut:
        async def call(scope: Scope, send: Send) -> bool:
            result = await shortcut(scope, send)
            answered.append(result)
            return result

        return call

    app.shortcuts = [counted(s) for s in inner]
    return answered


def warm_lease(api: Api, receipt: str) -> None:
    """A few reads by `reader`: a token's lease of the rate limit starts at one token and
    doubles while it is spent within its second."""
    token_id = api.tokens["reader"].split("_")[1]
    for _ in range(20):
        assert api.client.get(f"/v1/receipts/{receipt}", headers=api.headers("reader")).status_code == 200
        lease = api.services.rate_limiter._leases.get(token_id)
        if lease is not None and lease.remaining >= 4:
            return
    raise AssertionError("the lease did not grow")


def without_duration(response: httpx.Response) -> list[tuple[str, str]]:
    return [(k, v) for k, v in response.headers.multi_items() if k != "x-request-duration-ms"]


def test_the_shortcut_answers_the_routes_bytes(api: Api) -> None:
    receipt = api.retrieval(api.document())["receipt_id"]
    answered = counting_shortcuts(api)
    fast = api.client.get(f"/v1/receipts/{receipt}", headers=api.headers("reader", **IDS))
    # The same read with a query: the shortcut leaves it to the route.
    routed = api.client.get(f"/v1/receipts/{receipt}?content=sealed", headers=api.headers("reader", **IDS))
    assert answered == [True, False]
    assert fast.status_code == routed.status_code == 200
    assert fast.content == routed.content
    assert without_duration(fast) == without_duration(routed)
    assert fast.json()["run_id"] == "run-shortcut-1" and fast.json()["receipt_id"] == receipt


@pytest.mark.parametrize(
    ("who", "status"),
    [(None, 401), ("bad", 401), ("writer", 403), ("operator", 403), ("other", 404), ("other-reader", 404)],
)
def test_what_the_shortcut_does_not_take_is_the_routes_refusal(
    api: Api, who: str | None, status: int
) -> None:
    receipt = api.retrieval(api.document())["receipt_id"]
    answered = counting_shortcuts(api)
    headers = {} if who is None else {"Authorization": "Bearer clt_x_y"} if who == "bad" else api.headers(who)
    response = api.client.get(f"/v1/receipts/{receipt}", headers={**headers, **IDS})
    assert answered == [False]
    assert response.status_code == status
    codes = {401: "unauthorized", 403: "forbidden", 404: "not_found"}
    assert response.json()["error"]["code"] == codes[status]
    assert response.json()["run_id"] == "run-shortcut-1"


def test_a_request_spends_one_token_whichever_answers(api: Api) -> None:
    receipt = api.retrieval(api.document())["receipt_id"]
    limiter = api.services.rate_limiter
    token_id = api.tokens["reader"].split("_")[1]
    warm_lease(api, receipt)
    before = limiter._leases[token_id].remaining
    assert api.client.get(f"/v1/receipts/{receipt}", headers=api.headers("reader")).status_code == 200
    assert limiter._leases[token_id].remaining == before - 1
    # A miss: the shortcut spent the token, then the route answered the 404 without a second.
    assert api.client.get("/v1/receipts/no-such-receipt", headers=api.headers("reader")).status_code == 404
    assert limiter._leases[token_id].remaining == before - 2


def test_an_exhausted_limit_is_the_routes_429(make_api: Callable[..., Api]) -> None:
    api = make_api(rate_limit_rps=0.001, rate_limit_burst=3)
    receipt = api.retrieval(api.document())["receipt_id"]  # the admin token's
    answered = counting_shortcuts(api)
    statuses = [api.client.get(f"/v1/receipts/{receipt}", headers=api.headers("reader")) for _ in range(4)]
    assert [r.status_code for r in statuses] == [200, 200, 200, 429]
    assert statuses[-1].json()["error"]["code"] == "rate_limited"
    assert answered == [True, True, True, False]  # the refusal: the route's guard raises it


def test_served_answers_are_whole(ledger_config: LedgerConfig) -> None:
    """Through the protocol `serve` runs: small answers (head and body joined) and a long
    stream (the whole-log export) arrive whole on a kept-alive connection."""
    with serving(ledger_config) as (server, _, tokens):
        with loopback_http.client(base_url=server.base_url, timeout=60) as http:
            auth = {"Authorization": f"Bearer {tokens['admin']}"}
            doc = http.post(
                "/v1/documents", json={"path": "a.md", "text": "# A\n\n" + "word " * 15000}, headers=auth
            )
            assert doc.status_code == 201
            for _ in range(3):
                assert http.get("/v1/version").status_code == 200
            operator = {"Authorization": f"Bearer {tokens['operator']}"}
            export = http.get("/v1/operator/export", headers=operator)
            assert export.status_code == 200 and len(export.content) > FLUSH_AT_BYTES
            lines = export.content.splitlines()
            assert len(lines) > 2 and all(json.loads(line) for line in lines)


class RecordingTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


def test_writes_of_one_turn_leave_as_one() -> None:
    async def run() -> RecordingTransport:
        inner = RecordingTransport()
        transport = CoalescingTransport(inner, asyncio.get_running_loop())
        transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
        transport.write(b"{}")
        assert inner.writes == []  # held until the turn ends
        await asyncio.sleep(0)
        assert inner.writes == [b"HTTP/1.1 200 OK\r\n\r\n{}"]
        transport.write(b"x" * FLUSH_AT_BYTES)  # a large part leaves at once
        assert len(inner.writes) == 2
        transport.write(b"last")
        transport.close()  # what is held leaves before the close
        assert inner.writes[-1] == b"last" and inner.closed
        return inner

    asyncio.run(run())
