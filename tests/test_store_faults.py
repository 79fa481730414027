"""A store that cannot be written, then can again: a real `citeledger serve` answers
503 `storage_unavailable` (retryable, with Retry-After) during the fault, writes again
after it without a restart, and logs the repeated failure once and then as counts.

SQLite: the data directory and its files are made read-only while the server runs
(the server runs without CAP_DAC_OVERRIDE, so modes bind it although it is root).
The old code kept connections SQLite had opened read-only during the fault in its
pool: most writes answered 500 until a restart, each with a traceback in the log.

PostgreSQL: the server's role is made read-only and its sessions are terminated (as
a failover to a standby, or a restart, does), then the role is writable again. The old
code kept the read-only sessions in its pool, answering 500 long after.
"""

from __future__ import annotations

import itertools
import subprocess
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ledger.config import LedgerConfig
from tests import loopback_http
from tests.conftest import PG_DSN, pg_connect
from tests.server_process import UNPRIVILEGED, ServerProcess, server_env

TOKEN = "faults-bootstrap-token-0123456789abcdef"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
REPEAT_INTERVAL_S = "1"
_counter = itertools.count()

Answer = tuple[int, str | None, str | None, bool | None]  # status, error code, Retry-After, retryable


def _write(base: str) -> Answer:
    n = next(_counter)
    response = loopback_http.post(
        f"{base}/v1/documents",
        headers=HEADERS,
        json={"path": f"faults/{n}.md", "text": f"# Doc {n}\n\nBody number {n}.\n"},
        timeout=30,
    )
    if response.status_code < 400:
        return response.status_code, None, None, None
    error = response.json()["error"]
    return response.status_code, error["code"], response.headers.get("retry-after"), error["retryable"]


def _read(base: str) -> int:
    return loopback_http.get(f"{base}/v1/events?limit=50", headers=HEADERS, timeout=30).status_code


def _load(base: str, rounds: int = 64) -> list[Answer]:
    """Writes mixed with concurrent reads (which make the pool open new connections)."""
    with ThreadPoolExecutor(32) as pool:
        jobs = [pool.submit(_write if i % 2 else _read, base) for i in range(rounds)]
        results = [job.result() for job in jobs]
    return [r for r in results if isinstance(r, tuple)]


def _warm(base: str, within_s: float = 60) -> None:
    """Before the fault: a whole round of the load answered 201. A cold server under 32
    threads (a new pool; on the shared test database, other tests' sessions) may refuse a few
    at first, and then only as the contract says (503, retryable, Retry-After)."""
    deadline = time.monotonic() + within_s
    while True:
        answers = _load(base)
        _assert_refusals_are_503(answers)
        if {a[0] for a in answers} == {201}:
            return
        assert time.monotonic() < deadline, f"the server never answered a whole round: {answers[-10:]}"
        time.sleep(0.5)


def _assert_refusals_are_503(answers: list[Answer]) -> None:
    for status, code, retry_after, retryable in answers:
        if status >= 400:
            assert (status, code, retryable) == (503, "storage_unavailable", True), answers
            assert retry_after is not None and int(retry_after) >= 1, answers


def _fault_answers(base: str, deadline_s: float = 60) -> list[Answer]:
    """Load until some writes were refused (connections are reopened under load)."""
    answers: list[Answer] = []
    deadline = time.monotonic() + deadline_s
    while sum(1 for a in answers if a[0] >= 400) < 5:
        assert time.monotonic() < deadline, f"the fault never showed: {answers[-10:]}"
        answers += _load(base)
    return answers


def _recovered(base: str, within_s: float = 20, streak: int = 30) -> list[Answer]:
    """Writes until `streak` in a row succeed; every refusal on the way must be a 503."""
    answers: list[Answer] = []
    run = 0
    deadline = time.monotonic() + within_s
    while run < streak:
        assert time.monotonic() < deadline, f"writes did not recover: {answers[-10:]}"
        answer = _write(base)
        answers.append(answer)
        run = run + 1 if answer[0] == 201 else 0
        if answer[0] != 201:
            time.sleep(0.05)
    return answers


def _serve_warm(config: LedgerConfig, log: Path, prefix: tuple[str, ...] = ()) -> tuple[ServerProcess, int]:
    """`serve` on `config`'s store logging to `log` (repeats counted every REPEAT_INTERVAL_S),
    warmed up; with how much of the log was written before any fault."""
    env = server_env(config, TOKEN, CITELEDGER_LOG_REPEAT_INTERVAL_S=REPEAT_INTERVAL_S)
    server = ServerProcess(config.data_dir, env, log_path=log, prefix=prefix).start()
    try:
        _warm(server.base_url)
    except BaseException:
        server.stop()
        raise
    return server, len(log.read_text(errors="replace"))


def _log_lines(log: Path, since: int) -> list[str]:
    return log.read_text(errors="replace")[since:].splitlines()


def _assert_logged_briefly(lines: list[str], during: list[Answer]) -> None:
    """The fault named, in about a line per ten refusals and at most two tracebacks."""
    refused = sum(1 for a in during if a[0] >= 400)
    assert any("storage unavailable" in line for line in lines), lines[:20]
    assert len(lines) <= 40 + refused // 10, (refused, lines[:60])
    assert sum(1 for line in lines if line.startswith("Traceback")) <= 2, lines[:60]


def _set_writable(data_dir: Path, writable: bool) -> None:
    for path in [data_dir, *sorted(data_dir.rglob("*"))]:
        mode = path.stat().st_mode & 0o777
        path.chmod(mode | 0o200 if writable else mode & ~0o222)


def test_sqlite_read_only_data_dir_answers_503_and_recovers_without_restart(tmp_path: Path) -> None:
    config = LedgerConfig(data_dir=tmp_path / "data", run_checkpointer=False)
    log = tmp_path / "serve.log"
    server, before = _serve_warm(config, log, UNPRIVILEGED)
    try:
        _set_writable(config.data_dir, False)
        try:
            during = _fault_answers(server.base_url)
            time.sleep(float(REPEAT_INTERVAL_S) * 2)  # the counts of the last interval are reported
        finally:
            _set_writable(config.data_dir, True)
        _assert_refusals_are_503(during)
        lines = _log_lines(log, before)
        after = _recovered(server.base_url)
        _assert_refusals_are_503(after)
        assert server.process is not None and server.process.poll() is None  # never restarted
    finally:
        server.stop()
    # Logged once, then counted: a bounded number of lines, no traceback per request.
    _assert_logged_briefly(lines, during)
    assert any("repeated" in line and "more times" in line for line in lines), lines[:40]


@pytest.fixture
def pg_role_schema() -> Iterator[tuple[str, str]]:
    """A schema owned by a role of its own, so the test can make that role read-only and
    end its sessions without touching anything else on the shared server."""
    name = "faults_" + uuid.uuid4().hex[:12]
    with pg_connect() as conn:
        conn.execute(f'CREATE ROLE "{name}" LOGIN')
        conn.execute(f'CREATE SCHEMA "{name}" AUTHORIZATION "{name}"')
    try:
        yield name, name
    finally:
        _terminate(name)
        _sql(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        _sql(f'DROP ROLE IF EXISTS "{name}"')


def _sql(statement: str, params: tuple[str, ...] = ()) -> None:
    with pg_connect() as conn:
        conn.execute(statement, params)  # type: ignore[arg-type]


def _terminate(role: str) -> None:
    """End every session of `role` (what a database restart does to them)."""
    _sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,))


def _role_dsn(role: str, schema: str) -> str:
    base = PG_DSN.split("://", 1)[1].split("@", 1)[1]  # host:port/db
    return f"postgresql://{role}@{base}?schema={schema}"


def test_postgres_read_only_and_dropped_sessions_answer_503_and_recover_without_restart(
    tmp_path: Path, pg_role_schema: tuple[str, str]
) -> None:
    role, schema = pg_role_schema
    config = LedgerConfig(data_dir=tmp_path / "data", database_url=_role_dsn(role, schema))
    log = tmp_path / "serve.log"
    server, before = _serve_warm(config, log)
    try:
        # As a failover to a read-only standby: every new session refuses writes.
        _sql(f'ALTER ROLE "{role}" SET default_transaction_read_only = on')
        try:
            _terminate(role)
            during = _fault_answers(server.base_url)
            time.sleep(float(REPEAT_INTERVAL_S) * 2)
        finally:
            # Writable again for new sessions only: the ones opened during the fault stay
            # read-only, and must not be used again.
            _sql(f'ALTER ROLE "{role}" RESET default_transaction_read_only')
        _assert_refusals_are_503(during)
        lines = _log_lines(log, before)
        _assert_refusals_are_503(_recovered(server.base_url))
        # A restart of the database: every session dropped at once, then back at once.
        _terminate(role)
        _assert_refusals_are_503(_recovered(server.base_url))
        assert server.process is not None and server.process.poll() is None
    finally:
        server.stop()
    _assert_logged_briefly(lines, during)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 48 MB filesystem (tmpfs) of its own, to fill up."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48m,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"this test needs to mount a tmpfs (root): {done.stderr}"
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk: Path) -> Path:
    filler = disk / "filler"
    with filler.open("wb") as handle:
        try:
            while True:
                handle.write(b"\0" * (1 << 20))
                handle.flush()
        except OSError:
            pass
    return filler


def test_sqlite_full_disk_answers_503_and_recovers_when_space_is_freed(
    tmp_path: Path, small_disk: Path
) -> None:
    config = LedgerConfig(data_dir=small_disk / "data", run_checkpointer=False)
    log = tmp_path / "serve.log"
    server, before = _serve_warm(config, log)
    try:
        filler = _fill(small_disk)
        try:
            during = _fault_answers(server.base_url)
            time.sleep(float(REPEAT_INTERVAL_S) * 2)
        finally:
            filler.unlink()
        _assert_refusals_are_503(during)
        lines = _log_lines(log, before)
        _assert_refusals_are_503(_recovered(server.base_url))
        assert server.process is not None and server.process.poll() is None
    finally:
        server.stop()
    _assert_logged_briefly(lines, during)
