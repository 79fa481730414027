"""Acceptance: an idempotent retry after a crash, on a real `citeledger serve`
killed with SIGKILL under load, on SQLite and on PostgreSQL.

Client threads post retrievals, each with its own `Idempotency-Key` and body
(the key is also the body's `task.task_id`, so every ledger entry can be traced
back to its request). The server's whole process group is SIGKILLed right
after an answer arrives (the other members of that group commit are then
committed but not yet answered). After a restart on the same store, every
request that got no 201 is retried with the same key and body, plus a few that
did, as a control. Each retry must answer at once with 200/201: the original
answer (`dedup: true`, same receipt and position) if its entry had been
committed, else a fresh write. In the end each request is in the log exactly
once and `citeledger verify --deep` passes.

The kill cycle (load, kill, restart, retry) repeats, within a bounded number
of cycles and seconds, until at least one retried request had been committed
before the kill; the test fails if that never happened, as it would otherwise
prove nothing about the committed-but-unanswered case.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from ledger.config import LedgerConfig
from ledger.storage.store import LEDGER_STREAM_ID, Store
from tests import loopback_http
from tests.api_support import DOC
from tests.client_support import post_document
from tests.conftest import fresh_config
from tests.server_process import ServerProcess, run_cli, server_env

pytestmark = pytest.mark.slow

TOKEN = "crash-retry-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CLIENT_THREADS = 16
MAX_POSTS_PER_THREAD = 60  # per kill cycle; the kill normally lands long before
# One per cycle: where in the load the kill lands.
ACKS_BEFORE_KILL = (25, 40, 15, 55, 30, 20, 35, 10, 45, 28, 18, 50) * 2
LOAD_TIMEOUT_S = 10.0  # a load request's own timeout (the API's deadline is 10 s)
RETRY_BUDGET_S = 5.0  # a retry must answer within this, all included
CONTROL_RETRIES = 4  # answered requests retried per cycle, as a control
# No new kill cycle starts after this (one cycle: ~3 s SQLite, ~7 s PostgreSQL). The loop stops at
# the first cycle whose kill lands between a commit and its answer; on a loaded machine that can
# take many cycles, so the budget is generous and costs nothing when the kill lands early.
CYCLES_BUDGET_S = 200.0


@dataclass
class Attempt:
    key: str
    body: dict[str, Any]
    status: int | None = None  # None: no answer at all (connection reset, timeout)
    answer: dict[str, Any] | None = None
    error: str | None = None

    @property
    def acked(self) -> bool:
        return self.status == 201 and self.answer is not None and self.answer.get("dedup") is False

    def describe(self) -> str:
        if self.status is None:
            return f"no answer ({self.error})"
        return f"HTTP {self.status} {_short(self.answer)}"


def _short(answer: dict[str, Any] | None) -> str:
    if not answer:
        return ""
    error = answer.get("error")
    if isinstance(error, dict):
        return f"{error.get('code')}: {error.get('message')}"
    return f"receipt {answer.get('receipt_id')} position {answer.get('position')} dedup {answer.get('dedup')}"


def _body(key: str, doc: dict[str, Any], n: int) -> dict[str, Any]:
    index = n % len(doc["chunks"])
    chunk = doc["chunks"][index]
    return {
        "query": f"crash retry {key}",
        "engine": "external:crash-retry",
        "task": {"task_id": key, "deadline_ms": 1500},
        "selected_entries": [
            {
                "document_id": doc["document_id"],
                "chunk_id": chunk["chunk_id"],
                "score": "1.5",
                # Each chunk's own text: snippets must occur in the cited chunk.
                "snippet": ("Audit logs are kept for 180 days.", "Restricted documents need a scope.")[index],
            }
        ],
    }


def _post(http: httpx.Client, attempt: Attempt) -> tuple[int, dict[str, Any]]:
    response = http.post("/v1/retrievals", json=attempt.body, headers={"Idempotency-Key": attempt.key})
    try:
        answer = response.json()
    except ValueError:
        answer = {"error": {"code": "not_json", "message": response.text[:200]}}
    return response.status_code, answer


def recorded_by_task(config: LedgerConfig) -> dict[str, list[tuple[str, int]]]:
    """task_id -> [(receipt_id, position)] of every RetrievalRecorded entry in the store."""
    store = Store(LedgerConfig(**{**config.__dict__, "run_checkpointer": False}))
    try:
        rows = store.recorder.select_events(LEDGER_STREAM_ID)
    finally:
        store.close()
    found: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for row in rows:
        if not row.topic.endswith("RetrievalRecorded"):
            continue
        payload = orjson.loads(bytes(row.state))["payload"]
        task_id = (payload.get("task") or {}).get("task_id")
        if task_id:
            found[task_id].append((payload["receipt_id"], int(row.originator_version)))
    return found


def _load_until_killed(
    server: ServerProcess, doc: dict[str, Any], cycle: int, kill_after: int
) -> list[Attempt]:
    """CLIENT_THREADS threads post with unique keys; the thread whose answer is the
    `kill_after`-th SIGKILLs the server's process group the moment it arrives."""
    attempts: list[Attempt] = []
    lock = threading.Lock()
    stop = threading.Event()
    acks = 0
    run = uuid.uuid4().hex[:6]

    def client(index: int) -> None:
        nonlocal acks
        with loopback_http.client(base_url=server.base_url, headers=AUTH, timeout=LOAD_TIMEOUT_S) as http:
            for n in range(MAX_POSTS_PER_THREAD):
                if stop.is_set():
                    return
                key = f"cr-{run}-c{cycle}-t{index}-n{n}"
                attempt = Attempt(key, _body(key, doc, n))
                with lock:
                    attempts.append(attempt)
                try:
                    attempt.status, attempt.answer = _post(http, attempt)
                except httpx.HTTPError as exc:
                    attempt.error = f"{type(exc).__name__}: {exc}"[:160]
                    continue
                if attempt.acked:
                    with lock:
                        acks += 1
                        if acks == kill_after:
                            server.signal_now()  # SIGKILL the group, right now
                            stop.set()

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(CLIENT_THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=LOAD_TIMEOUT_S * 3)
    if not stop.is_set():  # the load ended before the kill: kill anyway, the test still holds
        server.signal_now()
        stop.set()
    server.kill()  # wait until every process of the group is gone
    assert not any(t.is_alive() for t in threads), "a load thread is still running after the kill"
    return attempts


def _retry(base_url: str, attempt: Attempt) -> tuple[Attempt, float]:
    """The same key and body again, on a fresh connection, with a hard time budget."""
    again = Attempt(attempt.key, attempt.body)
    started = time.monotonic()
    try:
        with loopback_http.client(base_url=base_url, headers=AUTH, timeout=RETRY_BUDGET_S) as http:
            again.status, again.answer = _post(http, attempt)
    except httpx.HTTPError as exc:
        again.error = f"{type(exc).__name__}: {exc}"[:160]
    return again, time.monotonic() - started


def _check_retry(
    original: Attempt, retry: Attempt, elapsed: float, stored: list[tuple[str, int]]
) -> str | None:
    """None if the retry is right, else what is wrong with it."""
    where = f"key {original.key} (first try: {original.describe()}; committed before the kill: {stored})"
    if elapsed > RETRY_BUDGET_S:
        return f"{where}: retry took {elapsed:.1f} s (budget {RETRY_BUDGET_S} s)"
    if retry.status not in (200, 201) or retry.answer is None:
        return f"{where}: retry answered {retry.describe()}"
    got = (retry.answer.get("receipt_id"), retry.answer.get("position"))
    if len(stored) > 1:
        return f"{where}: recorded {len(stored)} times before the retry"
    if stored:
        if retry.answer.get("dedup") is not True or got != stored[0]:
            return f"{where}: retry of a committed request answered {retry.describe()}, not the original"
        if original.acked and original.answer is not None:
            first = (original.answer["receipt_id"], original.answer["position"])
            if got != first:
                return f"{where}: retry answered {got}, the original answer was {first}"
    elif retry.status != 201 or retry.answer.get("dedup") is not False:
        return f"{where}: retry of a request that was never stored answered {retry.describe()}"
    return None


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_retry_after_sigkill_answers_at_once_and_records_once(backend: str, tmp_path: Path) -> None:
    with fresh_config(backend, tmp_path) as config:
        env = server_env(config, TOKEN)
        server = ServerProcess(
            config.data_dir,
            env,
            workers=2 if config.database_url else 1,
            log_path=tmp_path / "serve.log",
        )
        everything: dict[str, Attempt] = {}  # key -> first try
        retried: dict[str, Attempt] = {}  # key -> its retry
        failures: list[str] = []
        committed_unanswered_retried: list[str] = []
        cycles = 0
        started = time.monotonic()
        try:
            server.start()
            doc = post_document(server.base_url, TOKEN, "handbook/retention.md", DOC)
            assert len(doc.get("chunks", [])) >= 2, doc
            for kill_after in ACKS_BEFORE_KILL:
                cycles += 1
                attempts = _load_until_killed(server, doc, cycles, kill_after)
                everything.update((a.key, a) for a in attempts)
                stored = recorded_by_task(config)
                unanswered = [a for a in attempts if not a.acked]
                controls = [a for a in attempts if a.acked][:CONTROL_RETRIES]
                committed = [a.key for a in unanswered if stored.get(a.key)]
                server.start()  # same store, new process
                with ThreadPoolExecutor(8) as pool:
                    results = list(pool.map(lambda a: _retry(server.base_url, a), [*unanswered, *controls]))
                for original, (retry, elapsed) in zip([*unanswered, *controls], results, strict=True):
                    retried[original.key] = retry
                    problem = _check_retry(original, retry, elapsed, stored.get(original.key, []))
                    if problem:
                        failures.append(f"cycle {cycles}: {problem}")
                committed_unanswered_retried += committed
                print(
                    f"[{backend}] cycle {cycles}: {len(attempts)} requests, "
                    f"{len(attempts) - len(unanswered)} answered 201, {len(unanswered)} not answered "
                    f"(of which {len(committed)} committed), {len(controls)} control retries"
                )
                if committed_unanswered_retried or time.monotonic() - started > CYCLES_BUDGET_S:
                    break
        finally:
            server.stop()

        # Every logical request is in the log exactly once: a first try that was answered
        # 201, or (unanswered) committed before the kill, or written by its retry.
        final = recorded_by_task(config)
        for key, first in everything.items():
            entries = final.get(key, [])
            again = retried.get(key)
            history = f"first try: {first.describe()}" + (f"; retry: {again.describe()}" if again else "")
            if len(entries) > 1:
                failures.append(f"key {key} recorded {len(entries)} times {entries} ({history})")
            elif not entries:
                failures.append(f"key {key} never recorded ({history})")
        strays = sorted(set(final) - set(everything))
        if strays:
            failures.append(f"entries for task ids no request used: {strays[:10]}")

        head = (
            f"[{backend}] {len(failures)} problem(s) after {cycles} kill cycle(s), "
            f"{len(committed_unanswered_retried)} retried request(s) committed but unanswered "
            f"{committed_unanswered_retried[:10]}:\n"
        )
        # Retries of committed requests first, then the other retries, then the log's counts.
        failures.sort(key=lambda line: 0 if "kill: [(" in line else 1 if line.startswith("cycle") else 2)
        assert not failures, head + "\n".join(failures[:40])
        assert committed_unanswered_retried, (
            f"[{backend}] in {cycles} kill cycles the kill never landed between a commit and its "
            "answer, so no retry of a committed-but-unanswered request was exercised"
        )
        verify = run_cli(["verify", "--deep", "--data-dir", str(config.data_dir)], env)
        assert verify.returncode == 0, verify.stdout[-2000:] + verify.stderr[-2000:]
