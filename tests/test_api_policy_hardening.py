"""A hostile policy bundle must not take a tenant down, and a request that answers 408 has
written nothing, then or later. Every test runs a real server on loopback over a real
store (SQLite file and PostgreSQL schema): each hostile bundle is refused (422 naming the
limit) with the log unchanged and search still answering; a write past its deadline leaves
nothing behind; a write that claimed its deadline is answered truthfully, never 408; a
hostile bundle an older version let into the store fails closed (503, naming the rule)
instead of hanging search or start-up, and a new valid bundle replaces it."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest

from ledger.config import LedgerConfig
from ledger.domain.entries import EventDraft
from ledger.domain.events import PolicyBundlePublished
from ledger.writing.application import Ledger
from tests import loopback_http
from tests.api_support import LoopbackServer, api_config, make_tokens

# The 342-byte "billion laughs" of the attack: nine levels of nine aliases.
LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{b}: &{b} [{','.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi", strict=True)
)
# Catastrophic for a backtracking glob (k lazy globstars: O(n^k) on an n-segment path), and
# within every limit: it must be accepted and matched in linear time.
BACKTRACKING_GLOB = "/".join(["**", "a"] * 7) + "/b"
DEEP_PATH = "a/" * 80 + "deep.md"
SIXTY_PATTERNS = ", ".join(f"p{j}/**" for j in range(60))
VALID = "version: deny-hr\nrules:\n  - id: no-hr\n    action: deny\n    match: {paths: ['hr/**']}\n"
HOSTILE = {
    "billion_laughs": (LAUGHS, "no_aliases"),
    "anchor_only": ("rules: &r []\n", "no_aliases"),
    "deep_nesting": ("a: " + "[" * 5_000 + "]" * 5_000 + "\n", "max_depth"),
    "huge_scalar": ("version: " + "x" * 10_000 + "\n", "max_scalar_chars"),
    "too_many_keys": ("{" + ", ".join(f"k{i}: 1" for i in range(200)) + "}\n", "max_keys"),
    "too_many_nodes": ("x: [" + ",".join("1" for _ in range(25_000)) + "]\n", "max_nodes"),
    "too_many_rules": (
        "rules:\n" + "".join(f"  - {{id: r{i}, action: deny}}\n" for i in range(501)),
        "max_rules",
    ),
    "too_many_patterns": (
        "rules:\n"
        + "".join(
            f"  - {{id: r{i}, action: deny, match: {{paths: [{SIXTY_PATTERNS}]}}}}\n" for i in range(40)
        ),
        "max_patterns",
    ),
    "glob_too_long": (
        f"rules: [{{id: g, action: deny, match: {{paths: ['{'a' * 300}']}}}}]\n",
        "max_glob_chars",
    ),
    "glob_too_many_segments": (
        f"rules: [{{id: g, action: deny, match: {{paths: ['{'/'.join(['**', 'a'] * 9)}']}}}}]\n",
        "max_glob_segments",
    ),
    "glob_too_many_wildcards": (
        f"rules: [{{id: g, action: deny, match: {{paths: ['{'*a' * 17}']}}}}]\n",
        "max_glob_wildcards",
    ),
    "glob_class": ("rules: [{id: g, action: deny, match: {paths: ['hr/[a-z]*']}}]\n", "glob_syntax"),
    "invalid_rule": ("rules: [{id: g, action: explode}]\n", "rules[0].action"),
}


class Running:
    """A real server on loopback and a client with the test tokens."""

    def __init__(self, config: Any, tokens: dict[str, str]) -> None:
        self.config = config
        self.tokens = tokens
        self.loopback = LoopbackServer(config).__enter__()
        self.client = loopback_http.client(base_url=self.loopback.base_url, timeout=60)

    @property
    def ledger(self) -> Ledger:
        ledger: Ledger = self.loopback.app.state.services.ledger
        return ledger

    def headers(self, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens['admin']}", **extra}

    def post(self, route: str, body: dict[str, Any], **headers: str) -> httpx.Response:
        return self.client.post(route, json=body, headers=self.headers(**headers))

    def publish(self, bundle: str) -> httpx.Response:
        return self.post("/v1/policy-bundles", {"bundle_yaml": bundle})

    def search(self, query: str = "salary bands") -> httpx.Response:
        body = {"task_id": "t-1", "deadline_ms": 5_000, "input": {"query": query, "top_k": 5}}
        return self.post("/v1/search", body)

    def head(self) -> int:
        self.ledger.sync()
        return self.ledger.size

    def stop(self) -> None:
        self.client.close()
        self.loopback.__exit__(None, None, None)


def _start(config: Any, tokens: dict[str, str]) -> Running:
    return Running(config, tokens)


@pytest.fixture
def setup(ledger_config: LedgerConfig) -> Iterator[tuple[Any, dict[str, str]]]:
    config = api_config(ledger_config, request_deadline_s=5.0)
    yield config, make_tokens(config)


@pytest.fixture
def server(setup: tuple[Any, dict[str, str]]) -> Iterator[Running]:
    running = _start(*setup)
    for path, text in {
        "hr/salaries.md": "# Salaries\n\nSalary bands for engineers are reviewed yearly.\n",
        "handbook/salary.md": "# Salary\n\nSalary bands are published every January.\n",
        DEEP_PATH: "# Deep\n\nSalary bands of a folder nested eighty levels deep.\n",
    }.items():
        assert running.post("/v1/documents", {"path": path, "text": text}).status_code == 201
    yield running
    running.stop()


def _searches(server: Running) -> dict[str, Any]:
    response = server.search()
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert body["status"] == "ok" and body["output"]["citations"], body
    return body


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_bundle_is_refused_naming_its_limit_and_nothing_is_written(
    server: Running, kind: str
) -> None:
    bundle, limit = HOSTILE[kind]
    head = server.head()
    response = server.publish(bundle)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_policy_bundle" and limit in error["message"], error
    assert server.head() == head  # the log's head is unchanged
    time.sleep(0.5)
    assert server.head() == head  # and stays so: nothing was left running to commit later
    assert _searches(server)["policy_version"] == "none"


def test_a_glob_that_backtracks_elsewhere_is_matched_in_linear_time(server: Running) -> None:
    bundle = (
        "version: deep-globs\nrules:\n  - id: deep\n    action: downrank\n"
        f"    factor: '0.5'\n    match: {{paths: ['{BACKTRACKING_GLOB}']}}\n"
    )
    published = server.publish(bundle)
    assert published.status_code == 201, published.text
    body = _searches(server)  # judging the 81-segment path: a 408 if the glob backtracked
    assert body["policy_version"] == "deep-globs"
    assert DEEP_PATH in [citation["path"] for citation in body["output"]["citations"]]


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("/v1/policy-bundles", {"bundle_yaml": VALID}),
        ("/v1/documents", {"path": "late/doc.md", "text": "# Late\n\nWritten after its deadline.\n"}),
        ("/v1/search", {"task_id": "t-late", "input": {"query": "salary bands"}}),
    ],
)
def test_a_write_past_its_deadline_leaves_nothing_in_the_log(
    setup: tuple[Any, dict[str, str]], route: str, body: dict[str, Any]
) -> None:
    config, tokens = setup
    server = _start(replace(config, request_deadline_s=0.5), tokens)
    try:
        assert (
            server.post("/v1/documents", {"path": "hr/a.md", "text": "# A\n\nSalary bands.\n"}).status_code
            == 201
        )
        head = server.head()
        with server.ledger._lock:  # another writer holds the log past the request's deadline
            response = server.post(route, body, **{"Idempotency-Key": "late-1"})
            assert response.status_code == 408, response.text
            time.sleep(0.3)
        time.sleep(1.0)  # the queued write reaches the store now, and must be refused there
        assert server.head() == head
        again = server.post(route, body, **{"Idempotency-Key": "late-1"})
        assert again.status_code in (200, 201) and again.json()["dedup"] is False, again.text
        assert server.head() == head + 1
    finally:
        server.stop()


def test_a_write_that_claimed_its_deadline_is_answered_not_408(setup: tuple[Any, dict[str, str]]) -> None:
    config, tokens = setup
    server = _start(replace(config, request_deadline_s=0.5), tokens)
    slow = threading.Event()

    def slow_commit(_cursor: Any, _entries: Any) -> None:
        if slow.is_set():
            time.sleep(1.2)  # runs after the write claimed its deadline, before COMMIT

    try:
        server.ledger.in_transaction(slow_commit)
        head = server.head()
        slow.set()
        response = server.publish(VALID)
        slow.clear()
        assert response.status_code == 201, response.text  # committed: its answer, late, never a 408
        assert float(response.headers["x-request-duration-ms"]) > 500
        assert server.head() == head + 1 and response.json()["position"] == head + 1
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("legacy", "rule"),
    [
        (LAUGHS, "no_aliases"),
        (
            f"rules: [{{id: g, action: deny, match: {{paths: ['{'/'.join(['**', 'a'] * 12)}']}}}}]\n",
            "max_glob",
        ),
    ],
)
def test_a_legacy_hostile_bundle_fails_closed_and_a_new_bundle_replaces_it(
    server: Running, setup: tuple[Any, dict[str, str]], legacy: str, rule: str
) -> None:
    server.stop()
    # What an older version let in: the entry appended without the use case's checks.
    with Ledger(setup[0].ledger) as old_version:
        old_version.append(
            EventDraft.of(
                PolicyBundlePublished(
                    policy_version="legacy-1",
                    bundle_sha256=hashlib.sha256(legacy.encode()).hexdigest(),
                    bundle_yaml=legacy,
                ),
                tenant_id="acme",
                actor="old-version",
            ),
            tenant_id="acme",
        )
    restarted = _start(*setup)  # start-up does not hang on it
    try:
        started = time.monotonic()
        refused = restarted.search()
        assert time.monotonic() - started < 3.0  # fails fast (not the 5 s deadline)
        assert refused.status_code == 503, refused.text
        error = refused.json()["error"]
        assert error["code"] == "policy_unloadable" and rule in error["message"] and not error["retryable"]
        assert restarted.client.get("/v1/healthz").status_code == 200
        # The operator's way out: publishing a valid bundle still works and takes over.
        assert restarted.publish(VALID).status_code == 201
        body = _searches(restarted)
        assert body["policy_version"] == "deny-hr"
        assert all(not c["path"].startswith("hr/") for c in body["output"]["citations"])
    finally:
        restarted.stop()
