"""Every command answers an expected failure with one line and its documented exit code
(README, Commands: 1 invalid evidence, 2 bad usage or unreadable input, 3 no ledger there,
4 store unusable), never a Python traceback; and only `init`, `serve` and `demo` create a
ledger: a mistyped `--data-dir` or PostgreSQL schema is refused, and nothing is created.

Each case runs the real command line in a subprocess on real files and the real
PostgreSQL server. On the old code these printed tracebacks, and the read commands
created an empty ledger where the mistyped directory pointed.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.config import LedgerConfig
from tests.conftest import PG_DSN, fresh_schema, pg_connect
from tests.server_process import UNPRIVILEGED, run_cli, server_env

TOKEN = "cli-failures-token-0123456789abcdef"


def _env(database_url: str | None = None, **extra: str) -> dict[str, str]:
    config = LedgerConfig(data_dir=Path("unused"), database_url=database_url)
    return server_env(config, TOKEN, **extra)


def _one_line(result: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    """The command failed with `code` and said so in one line on stderr (no traceback)."""
    told = result.stderr.strip().splitlines()
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert len(told) == 1 and "Traceback" not in result.stderr, result.stderr
    for word in words:
        assert word in told[0], told[0]
    return told[0]


# Every command that works on an existing ledger, with whatever else it needs to run.
READ_COMMANDS: list[list[str]] = [
    ["lag"],
    ["digest"],
    ["verify"],
    ["verify", "--deep", "--json"],
    ["checkpoint"],
    ["export", "--out", "{tmp}/out.jsonl"],
    ["export", "--tenant", "default", "--out", "{tmp}/out.jsonl"],
    ["bundle", "1"],
    ["rotate-key"],
    ["rebuild"],
    ["verify-projections"],
    ["projection-checkpoint"],
    ["project"],
    ["replay", "some-receipt"],
    ["retention", "run"],
    ["tokens", "create", "--tenant", "acme", "--scopes", "audit.read"],
    ["tokens", "create", "--operator"],
    ["sources", "list"],
    ["sources", "add", "notes", "{tmp}"],
    ["sources", "remove", "notes"],
    ["sources", "sync", "notes"],
]


@pytest.mark.parametrize("command", READ_COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_a_mistyped_data_dir_is_refused_and_nothing_is_created(tmp_path: Path, command: list[str]) -> None:
    typo = tmp_path / "citeledger-dta"
    args = [part.replace("{tmp}", str(tmp_path)) for part in command]
    result = run_cli([*args, "--data-dir", str(typo)], _env(), timeout=60)
    _one_line(result, 3, "no ledger", str(typo), "citeledger init")
    assert not typo.exists()


def test_an_empty_data_dir_is_refused_and_left_empty(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for command in (["lag"], ["verify"], ["digest"]):
        _one_line(run_cli([*command, "--data-dir", str(empty)], _env()), 3, "no ledger")
    assert list(empty.iterdir()) == []


def test_init_creates_a_ledger_once_and_read_commands_then_work(tmp_path: Path) -> None:
    data = tmp_path / "data"
    made = run_cli(["init", "--data-dir", str(data)], _env())
    assert made.returncode == 0 and "created a ledger" in made.stdout, made.stderr
    assert (data / "ledger.sqlite").is_file() and (data / "keys" / "root.pub").is_file()
    again = run_cli(["init", "--data-dir", str(data)], _env())
    assert again.returncode == 0 and "already exists" in again.stdout, again.stderr
    assert run_cli(["verify", "--data-dir", str(data)], _env()).returncode == 0


@pytest.fixture
def pg_schema() -> Iterator[str]:
    with fresh_schema("clif_", 12) as name:
        yield name


def _tables(schema: str) -> int:
    with pg_connect() as conn:
        row = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = %s", (schema,)).fetchone()
    assert row is not None
    return int(row[0])


def test_a_postgres_schema_without_a_ledger_is_refused_and_left_empty(tmp_path: Path, pg_schema: str) -> None:
    env = _env(f"{PG_DSN}?schema={pg_schema}")
    for command in (["lag"], ["verify"], ["checkpoint"], ["tokens", "create", "--operator"]):
        result = run_cli([*command, "--data-dir", str(tmp_path / "keys-here")], env)
        _one_line(result, 3, "no ledger", pg_schema)
    assert _tables(pg_schema) == 0
    assert not (tmp_path / "keys-here").exists()


def test_serve_refuses_a_postgres_schema_that_is_not_a_ledgers(tmp_path: Path, pg_schema: str) -> None:
    with pg_connect() as conn:
        conn.execute(f'CREATE TABLE "{pg_schema}".customers (id int)')
    env = _env(f"{PG_DSN}?schema={pg_schema}")
    served = run_cli(["serve", "--data-dir", str(tmp_path / "d"), "--port", "1"], env, timeout=60)
    _one_line(served, 3, pg_schema, "not a ledger's")
    assert _tables(pg_schema) == 1
    missing = _env(f"{PG_DSN}?schema={pg_schema}_nope")
    inited = run_cli(["init", "--data-dir", str(tmp_path / "d")], missing, timeout=60)
    _one_line(inited, 3, "does not exist")


def test_an_unreachable_postgres_is_exit_4(tmp_path: Path) -> None:
    env = _env("postgresql://postgres@127.0.0.1:1/test?schema=nowhere")
    _one_line(run_cli(["lag", "--data-dir", str(tmp_path)], env, timeout=60), 4, "PostgreSQL is reachable")


def test_serve_on_a_read_only_data_dir_is_one_line_and_exit_4(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert run_cli(["init", "--data-dir", str(data)], _env()).returncode == 0
    for path in [data, *data.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    try:
        result = run_cli(["serve", "--data-dir", str(data), "--port", "1"], _env(), 60, UNPRIVILEGED)
    finally:
        for path in [data, *data.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
    _one_line(result, 4, str(data))


def test_bad_arguments_and_unreadable_inputs_are_exit_2(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert run_cli(["init", "--data-dir", str(data)], _env()).returncode == 0
    root_pub = str(data / "keys" / "root.pub")
    env = _env()
    _one_line(
        run_cli(["retention", "run", "--now", "yesterday-ish", "--data-dir", str(data)], env), 2, "--now"
    )
    missing = str(tmp_path / "no-such-bundle.json")
    _one_line(run_cli(["verify-bundle", missing, "--public-key", root_pub], env), 2, missing)
    not_a_key = tmp_path / "not-a-key.pub"
    not_a_key.write_text("this is not a key\n")
    binary_key = tmp_path / "binary.pub"
    binary_key.write_bytes(bytes(range(256)))
    broken_pem = tmp_path / "broken.pem"
    broken_pem.write_text("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
    bundle = tmp_path / "bundle.json"
    bundle.write_text("{}")
    for key in (not_a_key, binary_key, broken_pem):
        _one_line(run_cli(["verify-bundle", str(bundle), "--public-key", str(key)], env), 2, str(key))
    _one_line(run_cli(["verify-bundle", str(bundle), "--public-key", str(tmp_path / "none.pub")], env), 2)
    held = str(tmp_path / "no-note")
    _one_line(run_cli(["verify", "--held-checkpoint", held, "--data-dir", str(data)], env), 2, held)
    export = str(tmp_path / "no-export.jsonl")
    _one_line(run_cli(["verify", "--export", export, "--public-key", root_pub], env), 2, export)
    bad_setting = _env(CITELEDGER_CHECKPOINT_INTERVAL_S="soon")
    _one_line(run_cli(["lag", "--data-dir", str(data)], bad_setting), 2, "CITELEDGER_CHECKPOINT_INTERVAL_S")
    # `bundle` takes a receipt id or a position: neither is bad usage (2), an unknown id is 1.
    _one_line(
        run_cli(["bundle", "../etc/x", "--data-dir", str(data)], env), 2, "receipt id or a log position"
    )
    _one_line(run_cli(["bundle", "no-such-receipt", "--data-dir", str(data)], env), 1, "no receipt")


def test_invalid_evidence_is_exit_1_not_2(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert run_cli(["init", "--data-dir", str(data)], _env()).returncode == 0
    root_pub = str(data / "keys" / "root.pub")
    bundle = tmp_path / "bundle.json"
    bundle.write_text("not json at all")
    result = run_cli(["verify-bundle", str(bundle), "--public-key", root_pub], _env())
    assert result.returncode == 1 and "FAILED" in result.stderr and "Traceback" not in result.stderr
    _one_line(run_cli(["bundle", "99", "--data-dir", str(data)], _env()), 1, "position 99")
