"""Property-based contract check: schemathesis drives every operation of
`/schema` with generated requests (bounded) against a real loopback server.
No 5xx, and every error is the envelope."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from ledger.config import LedgerConfig
from tests.api_support import LoopbackServer, api_config, make_tokens

_state: dict[str, Any] = {}


@pytest.fixture(scope="module")
def live_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    data_dir: Path = tmp_path_factory.mktemp("schemathesis") / "data"
    config = api_config(LedgerConfig(data_dir=data_dir, run_checkpointer=False), request_deadline_s=5.0)
    tokens = make_tokens(config)
    _state["auth"] = {"Authorization": f"Bearer {tokens['admin']}"}
    with LoopbackServer(config) as server:
        yield schemathesis.openapi.from_url(f"{server.base_url}/schema/openapi.json")


def header(response: Any, name: str) -> str:
    value = response.headers.get(name) or response.headers.get(name.title()) or ""
    return str(value[0] if isinstance(value, list) else value)


def check(case: Any) -> None:
    response = case.call(headers=_state["auth"], timeout=10)
    where = (case.method, case.path, response.status_code, response.text[:300])
    assert response.status_code < 500, where
    assert header(response, "x-request-duration-ms"), where
    assert header(response, "x-run-id") and header(response, "x-trace-id"), where
    if response.status_code >= 400:
        body = response.json()
        assert set(body["error"]) == {"code", "message", "retryable"}, where
        assert body["run_id"] == header(response, "x-run-id"), where
        assert "Traceback" not in response.text, where
    elif header(response, "content-type").startswith("application/json"):
        body = response.json()
        assert "server_version" in body and "policy_version" in body, where


def test_no_server_errors_and_every_error_is_an_envelope(live_schema: Any) -> None:
    operations = [result.ok() for result in live_schema.get_all_operations()]
    assert len(operations) >= 15
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def run(case: Any) -> None:
            check(case)

        run()
