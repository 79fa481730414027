"""The OpenAPI document is a contract tools can trust: schemathesis drives a real loopback
server from `/schema/openapi.json` with every check enabled, in every phase (the examples, the
coverage cases, fuzzing, and stateful runs that follow the document's links so receipts,
citations, bundles and erasures get real 2xx answers), seeded and bounded. Zero failures.

One deliberate setting: `positive_data_acceptance` also accepts 422. The contract separates
400 (the request breaks a rule of the schema) from 422 (well formed, refused by a rule of the
ledger no schema can state: a snippet that is not in its chunk, a YAML text that is not a
mapping, a cursor this API never issued). A schema-valid request answered 400 still fails.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import schemathesis
from schemathesis.config import SchemathesisConfig

from ledger.config import LedgerConfig
from tests.api_support import LoopbackServer, api_config, make_tokens

SEED = 8675309
MAX_EXAMPLES = 12  # per operation and phase
MAX_STEPS = 80  # per stateful walk
POSITIVE_STATUSES = ["2xx", "401", "403", "404", "409", "422", "429"]
# Schemathesis's own list of rejections, plus 413: a request refused for its size (a multipart
# body with too many parts) is rejected too.
NEGATIVE_STATUSES = [
    "400",
    "401",
    "403",
    "404",
    "405",
    "406",
    "409",
    "413",
    "415",
    "422",
    "428",
    "429",
    "5xx",
]
_auth: dict[str, str] = {}
_seen: dict[str, dict[str, set[int]]] = {}  # phase -> operation -> statuses


@schemathesis.deserializer("application/x-ndjson")
def _ndjson(ctx: Any, response: Any) -> Any:
    """The export: every line one JSON object (a line that is not fails the run)."""
    lines = [orjson.loads(line) for line in response.content.splitlines() if line.strip()]
    assert all(isinstance(line, dict) for line in lines)
    return response.content.decode()


def _config(base_url: str, token: str, seed: int = SEED, stateful_only: bool = False) -> SchemathesisConfig:
    return SchemathesisConfig.from_dict(
        {
            "seed": seed,
            "suppress-health-check": ["all"],
            "base-url": base_url,
            "headers": {"Authorization": f"Bearer {token}"},
            "request-timeout": 10,
            "generation": {"mode": "all", "max-examples": MAX_EXAMPLES, "database": "none"},
            "checks": {
                "positive_data_acceptance": {"expected-statuses": POSITIVE_STATUSES},
                "negative_data_rejection": {"expected-statuses": NEGATIVE_STATUSES},
            },
            "phases": {
                "examples": {"enabled": not stateful_only},
                "coverage": {"enabled": not stateful_only},
                "fuzzing": {"enabled": not stateful_only},
                "stateful": {"enabled": True, "max-steps": MAX_STEPS},
            },
        }
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LoopbackServer, str]]:
    data_dir: Path = tmp_path_factory.mktemp("schemathesis") / "data"
    config = api_config(LedgerConfig(data_dir=data_dir, run_checkpointer=False), request_deadline_s=5.0)
    tokens = make_tokens(config)
    _auth["Authorization"] = f"Bearer {tokens['admin']}"
    with LoopbackServer(config) as live:
        yield live, tokens["admin"]


def header(response: Any, name: str) -> str:
    value = response.headers.get(name) or response.headers.get(name.title()) or ""
    return str(value[0] if isinstance(value, list) else value)


@schemathesis.check
def citeledger_envelope(ctx: Any, response: Any, case: Any) -> bool | None:
    """Beyond schemathesis' own checks: ids and duration on every answer, no 5xx, and an error's
    envelope carries the response's run id and says retryable only for 408/429/503."""
    phase = case.meta.phase.name.value if case.meta is not None else "stateful"
    _seen.setdefault(phase, {}).setdefault(case.operation.label, set()).add(response.status_code)
    if response.status_code >= 500:
        raise AssertionError(f"server error {response.status_code}")
    if not (header(response, "x-request-duration-ms") and header(response, "x-run-id")):
        raise AssertionError("missing x-request-duration-ms or x-run-id")
    if response.status_code >= 400:
        body = response.json()
        if body["run_id"] != header(response, "x-run-id"):
            raise AssertionError("envelope run_id differs from X-Run-Id")
        if body["error"]["retryable"] is not (response.status_code in (408, 429, 503)):
            raise AssertionError(f"retryable is {body['error']['retryable']} for {response.status_code}")
    return None


@pytest.fixture(scope="module")
def run(server: tuple[LoopbackServer, str]) -> dict[str, Any]:
    """One schemathesis run over the whole document, as `st run --checks all` would do it."""
    live, token = server
    _seen.clear()
    failures: list[str] = []
    phases: dict[str, str] = {}
    started = time.monotonic()
    url = f"{live.base_url}/schema/openapi.json"
    first = _config(live.base_url, token)
    _execute(schemathesis.openapi.from_url(url, config=first), failures, phases)
    # A walk follows links at random: which linked route it reaches with a 2xx depends on the
    # bodies it drew (a citation needs a snippet found in its chunk). Walks from further fixed
    # seeds until every linked route below was reached (at most three; their checks count too).
    for extra in range(1, 4):
        if not _unreached():
            break
        config = _config(live.base_url, token, seed=SEED + extra, stateful_only=True)
        _execute(schemathesis.openapi.from_url(url, config=config), failures, {})
    return {"failures": failures, "phases": phases, "seen": _seen, "seconds": time.monotonic() - started}


LINKED = (
    "POST /v1/documents",
    "POST /v1/retrievals",
    "GET /v1/receipts/{receipt_id}",
    "GET /v1/receipts/{receipt_id}/bundle",
    "GET /v1/citations/{citation_id}",
    "POST /v1/erasures",
)


def _unreached() -> list[str]:
    stateful = _seen.get("stateful", {})
    ok = {label for label, statuses in stateful.items() if any(200 <= s < 300 for s in statuses)}
    return [label for label in LINKED if label not in ok]


def _execute(schema: Any, failures: list[str], phases: dict[str, str]) -> None:
    from schemathesis.engine import Status, events, from_schema

    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished) and event.status in (Status.FAILURE, Status.ERROR):
            for case_id, checks in event.recorder.checks.items():
                for check in checks:
                    if check.status == Status.FAILURE and check.failure_info is not None:
                        failure = check.failure_info.failure
                        case = event.recorder.cases[case_id].value
                        sample = check.failure_info.code_sample[:600]
                        failures.append(
                            f"{event.phase.value} {case.operation.label}: {check.name}: "
                            f"{failure.title}: {failure.message[:300]}\n    {sample}"
                        )
        elif isinstance(event, events.NonFatalError | events.FatalError):
            failures.append(f"error in {getattr(event, 'label', '?')}: {event.info.format()[:600]}")
        elif isinstance(event, events.PhaseFinished):
            phases[event.phase.name.value] = event.status.value


def test_zero_failures_in_every_phase(run: dict[str, Any]) -> None:
    assert run["failures"] == [], "\n".join(sorted(set(run["failures"])))
    for phase in ("examples", "coverage", "fuzzing", "stateful"):
        assert run["phases"].get(phase) == "success", run["phases"]


def test_every_operation_was_driven(run: dict[str, Any]) -> None:
    driven = set().union(*(set(ops) for ops in run["seen"].values()))
    assert len(driven) >= 23, sorted(driven)


def test_links_reach_receipts_citations_bundles_and_erasures(run: dict[str, Any]) -> None:
    """The stateful phase followed the document's links to real 2xx answers."""
    stateful = run["seen"].get("stateful", {})
    ok = {label for label, statuses in stateful.items() if any(200 <= s < 300 for s in statuses)}
    for label in LINKED:
        assert label in ok, (label, sorted(ok))
