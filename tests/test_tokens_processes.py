"""Revocation reaches every worker within the stated bound (README: about a second), with
real `citeledger serve` processes: on SQLite a server and the CLI in another process, on
PostgreSQL two servers sharing the data directory and the schema, the token revoked over
HTTP on one and refused by the other. A revoked token's console session ends too."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.auth import create_operator_token, digest, read_token_file
from ledger.config import LedgerConfig
from ledger.domain.timestamps import parse_timestamp
from tests import loopback_http
from tests.conftest import PG_DSN, fresh_schema
from tests.server_process import ServerProcess, run_cli, server_env

BOOTSTRAP = "tokens-process-bootstrap-0123456789"
BOUND_S = 1.0  # what README and docs/security.md promise: no request sent later is accepted
CLOCK_SLACK_S = 0.05  # the file's mtime against this process's clock
SLACK_S = 0.5  # for a token just made to be picked up: the bound and a request


def _console_session(base: str, bearer: str) -> httpx.Client:
    client = loopback_http.client(base_url=base, follow_redirects=False, timeout=10)
    signed = client.post(
        "/console/sign-in", data={"token": bearer, "next": "/console/"}, headers={"Origin": base}
    )
    assert signed.status_code == 303, signed.text
    assert client.get("/console/").status_code == 200
    return client


def _latest_acceptance(base: str, bearer: str, console: httpx.Client, tokens_file: Path) -> float:
    """How long after the revocation (its record's `revoked_at`, stamped as the tokens file is
    replaced) a request was still accepted by the API or the console, at the latest (when it
    was sent, so a slow answer on a busy machine does not count); polls until both refuse."""
    token_id = bearer.split("_")[1]
    record = next(r for r in read_token_file(tokens_file) if r.token_id == token_id)
    assert record.revoked_at is not None
    revoked_at = parse_timestamp(record.revoked_at).timestamp()
    headers = {"Authorization": f"Bearer {bearer}"}
    latest, api_refused, page_refused = 0.0, False, False
    while not (api_refused and page_refused):
        assert time.time() - revoked_at < 10, "never refused"
        sent = time.time()
        if not api_refused:
            status = loopback_http.get(f"{base}/v1/receipts", headers=headers, timeout=10).status_code
            assert status in (200, 401), status
            api_refused = status == 401
            latest = latest if api_refused else max(latest, sent - revoked_at)
        sent = time.time()
        if not page_refused:
            page = console.get("/console/")
            assert page.status_code == 200 or page.is_redirect, page.status_code
            page_refused = page.is_redirect
            if page_refused:
                assert page.headers["location"].startswith("/console/sign-in")
            latest = latest if page_refused else max(latest, sent - revoked_at)
        time.sleep(0.02)
    return latest


def _history(base: str, count: int) -> list[dict[str, Any]]:
    """The token entries of tenant `default`'s history, once the server's read model has the
    `count` written (another process wrote them: it follows the log within moments)."""
    deadline = time.monotonic() + 15
    while True:
        events: list[dict[str, Any]] = loopback_http.get(
            f"{base}/v1/events?type=TokenIssued&type=TokenRevoked&order=asc",
            headers={"Authorization": f"Bearer {BOOTSTRAP}"},
        ).json()["events"]
        if len(events) >= count or time.monotonic() > deadline:
            return events
        time.sleep(0.1)


def _cli_refusals(data_dir: Path, token_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The quick checks, in process (the command line's own code, without a second start-up)."""
    from typer.testing import CliRunner

    from cli.main import app

    monkeypatch.setenv("CITELEDGER_DATA_DIR", str(data_dir))  # the command sets it; restored after
    runner, where = CliRunner(), ["--data-dir", str(data_dir)]
    table = runner.invoke(app, ["tokens", "list", *where])
    assert table.exit_code == 0 and "bootstrap" in table.stdout
    assert next(line for line in table.stdout.splitlines() if token_id in line).split()[1] == "revoked"
    again = runner.invoke(app, ["tokens", "revoke", token_id, *where])
    assert again.exit_code == 0 and "already revoked" in again.stdout
    unknown = runner.invoke(app, ["tokens", "revoke", "nope", *where])
    assert unknown.exit_code == 2 and "no token 'nope'" in unknown.stderr
    for option, value in (("--expires-in", "soon"), ("--expires-at", "2001-01-01T00:00:00Z")):
        create = ["tokens", "create", "--tenant", "default", "--scopes", "audit.read"]
        bad = runner.invoke(app, [*create, option, value, *where])
        assert bad.exit_code == 2 and option in bad.stderr, bad.stderr


def test_cli_revocation_reaches_a_running_sqlite_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir = tmp_path / "data"
    env = server_env(LedgerConfig(data_dir=data_dir), BOOTSTRAP)
    with ServerProcess(data_dir, env, log_path=tmp_path / "server.log") as server:
        made = run_cli(
            [
                *("tokens", "create", "--tenant", "default", "--scopes", "audit.read"),
                *("--expires-in", "1d", "--actor", "ops:alice", "--data-dir", str(data_dir)),
            ],
            env,
        )
        assert made.returncode == 0, made.stderr
        bearer = made.stdout.strip()
        token_id = bearer.split("_")[1]
        time.sleep(BOUND_S + SLACK_S)  # picked up by the running server within the bound
        console = _console_session(server.base_url, bearer)

        listed = run_cli(["tokens", "list", "--json", "--data-dir", str(data_dir)], env)
        assert listed.returncode == 0, listed.stderr
        assert bearer not in listed.stdout and digest(bearer) not in listed.stdout
        assert digest(BOOTSTRAP) not in listed.stdout
        row = next(t for t in json.loads(listed.stdout)["tokens"] if t["token_id"] == token_id)
        assert row["status"] == "active" and row["expires_at"] and row["last_used_at"]
        revoked = run_cli(["tokens", "revoke", token_id, "--data-dir", str(data_dir)], env)
        assert revoked.returncode == 0, revoked.stderr
        took = _latest_acceptance(server.base_url, bearer, console, data_dir / "tokens.json")
        assert took <= BOUND_S + CLOCK_SLACK_S, took
        print(f"accepted at most {took:.2f} s after the revocation")
        _cli_refusals(data_dir, token_id, monkeypatch)

        history = _history(server.base_url, 2)
        assert [(e["type"], e["actor"], e["payload"]["token_id"]) for e in history] == [
            ("TokenIssued", "ops:alice", token_id),
            ("TokenRevoked", history[1]["actor"], token_id),
        ]
        assert history[1]["actor"].startswith("cli:")
    verified = run_cli(["verify", "--deep", "--data-dir", str(data_dir)], env)
    assert verified.returncode == 0, verified.stdout + verified.stderr


@pytest.fixture
def pg_schema() -> Iterator[str]:
    with fresh_schema() as name:
        yield name


def test_http_revocation_on_one_postgres_server_reaches_the_other(tmp_path: Path, pg_schema: str) -> None:
    data_dir = tmp_path / "data"
    env = server_env(LedgerConfig(data_dir=data_dir, database_url=f"{PG_DSN}?schema={pg_schema}"), BOOTSTRAP)
    first = ServerProcess(data_dir, env, log_path=tmp_path / "a.log").start()
    try:
        operator = create_operator_token(data_dir / "tokens.json")
        second = ServerProcess(data_dir, env, log_path=tmp_path / "b.log").start()
        try:
            op = {"Authorization": f"Bearer {operator}"}
            created = loopback_http.post(
                f"{first.base_url}/v1/operator/tokens",
                json={"tenant": "default", "scopes": ["audit.read"]},
                headers=op,
                timeout=30,
            )
            assert created.status_code == 201, created.text
            bearer, token_id = created.json()["bearer"], created.json()["token"]["token_id"]
            time.sleep(BOUND_S + SLACK_S)
            console = _console_session(second.base_url, bearer)
            tenant = loopback_http.get(
                f"{second.base_url}/v1/operator/tokens", headers={"Authorization": f"Bearer {bearer}"}
            )
            assert tenant.status_code == 403

            gone = loopback_http.delete(
                f"{first.base_url}/v1/operator/tokens/{token_id}", headers=op, timeout=30
            )
            assert gone.status_code == 200, gone.text
            took = _latest_acceptance(second.base_url, bearer, console, data_dir / "tokens.json")
            assert took <= BOUND_S + CLOCK_SLACK_S, took
            print(f"accepted at most {took:.2f} s after the revocation")
            assert (
                loopback_http.get(
                    f"{first.base_url}/v1/receipts", headers={"Authorization": f"Bearer {bearer}"}
                ).status_code
                == 401
            )

            listed = loopback_http.get(f"{second.base_url}/v1/operator/tokens", headers=op).json()["tokens"]
            assert next(t for t in listed if t["token_id"] == token_id)["status"] == "revoked"
            history = _history(second.base_url, 2)
            operator_actor = "token:" + operator.split("_")[1]
            assert [(e["type"], e["actor"]) for e in history] == [
                ("TokenIssued", operator_actor),
                ("TokenRevoked", operator_actor),
            ]
        finally:
            second.stop()
    finally:
        first.stop()
    verified = run_cli(["verify", "--deep", "--data-dir", str(data_dir)], env)
    assert verified.returncode == 0, verified.stdout + verified.stderr
