"""The client's core decides without I/O: an answer read chunk by chunk under its size cap,
the retry and breaker decisions of one call, paging — driven here by hand, no server needed
(the same decisions over real servers: tests/test_client_contract.py)."""

from __future__ import annotations

import pytest

from client._core.calls import ClientCore
from client._core.http import Answer, ClientSettings, make_call
from client._core.retry import Attempts, CircuitBreaker
from client.errors import BadResponse, CircuitOpen, RateLimited, Refused, Unavailable

SETTINGS = ClientSettings(base_url="http://ledger.invalid", token="t", max_attempts=3, max_response_bytes=10)
CALL = make_call("GET", "/v1/keys", "read", trace_id="trace-1")


def test_an_answer_is_refused_once_it_declares_or_grows_past_the_cap() -> None:
    with pytest.raises(BadResponse) as declared:
        Answer(CALL, SETTINGS, 200, {"content-length": "11"})
    assert declared.value.code == "response_too_large" and not declared.value.retryable
    answer = Answer(CALL, SETTINGS, 200, {})
    answer.feed(b'{"a":')
    with pytest.raises(BadResponse, match="response_too_large"):
        answer.feed(b"123456")
    fits = Answer(CALL, SETTINGS, 200, {})
    fits.feed(b'{"a":1}')
    assert fits.data() == {"a": 1}
    limited = Answer(CALL, SETTINGS, 429, {"retry-after": "7"})
    with pytest.raises(RateLimited) as slow_down:
        limited.data()
    assert slow_down.value.retry_after_s == 7.0  # type: ignore[attr-defined]


def test_retries_stop_at_a_refusal_or_the_last_attempt_and_outages_open_the_breaker() -> None:
    breaker = CircuitBreaker(threshold=2, cooldown_s=60)
    down = Unavailable("unreachable", "down", retryable=True)
    attempts = Attempts(SETTINGS, breaker, CALL)
    attempts.start()
    assert attempts.failed(down) is not None  # retry after a backoff
    attempts.start()
    assert attempts.failed(down) is not None and breaker.state == "open"
    with pytest.raises(CircuitOpen):
        attempts.start()  # the breaker refuses the third attempt before it is made
    fresh = Attempts(SETTINGS, CircuitBreaker(5, 60), CALL)
    for _ in range(2):
        fresh.start()
        assert fresh.failed(down) is not None
    fresh.start()
    assert fresh.failed(down) is None  # the last attempt: final
    refusing = CircuitBreaker(5, 60)
    refused = Attempts(SETTINGS, refusing, CALL)
    refused.start()
    refusing.failure()
    assert refused.failed(Refused("bad_request", "no", status=400)) is None  # never retried
    assert refusing.state == "closed"  # it answered: not an outage


def test_paging_follows_the_cursor_until_there_is_none() -> None:
    params: dict[str, object] = {"limit": 2}
    assert ClientCore.next_page(params, "c1") and params == {"limit": 2, "cursor": "c1"}
    assert not ClientCore.next_page(params, None)
