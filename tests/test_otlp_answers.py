"""The refusals made before the OTLP route runs (the token check, the rate limit, the request
deadline of the server's ASGI wrapper) answer `/v1/traces` as OTLP does: a `google.rpc.Status`
in the request's encoding, `Retry-After` where the exporter should retry, never the `/v1` JSON
envelope. Real server on loopback, both stores."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
from google.protobuf import json_format
from google.rpc import status_pb2

from ledger.config import LedgerConfig
from tests import loopback_http
from tests.api_support import LoopbackServer, api_config, make_tokens

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
# An empty export in each encoding: valid, records nothing.
EMPTY = {PROTOBUF: b"", JSON: b"{}"}
Body = bytes | Iterator[bytes]


def _post(base_url: str, encoding: str, token: str | None, content: Body) -> httpx.Response:
    headers = {"Content-Type": encoding}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return loopback_http.post(f"{base_url}/v1/traces", content=content, headers=headers, timeout=30)


def _status(response: httpx.Response, encoding: str, status: int, grpc_code: int) -> str:
    """The answer is OTLP's: the status, a google.rpc.Status in the request's encoding."""
    assert response.status_code == status, response.content[:300]
    assert response.headers["content-type"].startswith(encoding), response.headers
    if encoding == PROTOBUF:
        body = status_pb2.Status.FromString(response.content)
    else:
        body = json_format.Parse(response.content, status_pb2.Status())
    assert body.code == grpc_code and body.message
    assert "error" not in response.text[:20]  # not the /v1 envelope ({"error": {...}})
    return str(body.message)


def test_401_and_429_answer_in_the_otlp_form(ledger_config: LedgerConfig) -> None:
    config = api_config(ledger_config, rate_limit_rps=0.001, rate_limit_burst=1)
    tokens = make_tokens(config)
    with LoopbackServer(config) as server:
        for encoding in (PROTOBUF, JSON):
            for token in (None, "clt_not-a-token"):
                response = _post(server.base_url, encoding, token, EMPTY[encoding])
                _status(response, encoding, 401, 16)  # UNAUTHENTICATED
                assert response.headers["x-citeledger-error-code"] == "unauthorized"
        assert _post(server.base_url, PROTOBUF, tokens["writer"], b"").status_code == 200  # the burst
        for encoding in (PROTOBUF, JSON):
            response = _post(server.base_url, encoding, tokens["writer"], EMPTY[encoding])
            assert "rate limit" in _status(response, encoding, 429, 8)  # RESOURCE_EXHAUSTED
            assert int(response.headers["retry-after"]) >= 1


def test_a_deadline_passed_before_anything_was_written_is_503_with_retry_after(
    ledger_config: LedgerConfig,
) -> None:
    """The body arrives after the deadline: the wrapper answers before the route wrote anything,
    as 503 with Retry-After (an OTLP exporter retries a 503; it drops the batch on a 408)."""
    config = api_config(ledger_config, request_deadline_s=0.5)
    tokens = make_tokens(config)

    def slow_body() -> Iterator[bytes]:
        yield b""
        time.sleep(1.5)
        yield b"{}"

    with LoopbackServer(config) as server:
        before = loopback_http.get(
            f"{server.base_url}/v1/events",
            headers={"Authorization": f"Bearer {tokens['admin']}"},
            timeout=30,
        ).json()["events"]
        for encoding in (PROTOBUF, JSON):
            response = _post(server.base_url, encoding, tokens["writer"], slow_body())
            assert "deadline" in _status(response, encoding, 503, 14)  # UNAVAILABLE
            assert response.headers["retry-after"] == "1"
            assert response.headers["x-citeledger-error-code"] == "request_timeout"
        after = loopback_http.get(
            f"{server.base_url}/v1/events",
            headers={"Authorization": f"Bearer {tokens['admin']}"},
            timeout=30,
        ).json()["events"]
        assert after == before
