"""The store's schema version (ledger/storage/adapters/migrations.py), on both stores: a new store is
created at the code's version and says so; a v1 store (no version recorded, main at 53a1742)
is recognised from its tables and migrated by `citeledger migrate` (on SQLite also by `init`
and `serve`, which report it; on PostgreSQL `serve` refuses until it is run); a store newer
than the code is refused by every command, nothing changed; adding a migration is one entry.

On 53a1742 none of this existed: no `migrate` command, no version anywhere, and any store
opened whatever wrote it (these tests fail there at the first `migrate` or version check)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.config import LedgerConfig
from ledger.storage.adapters import migrations, open_adapter
from ledger.storage.adapters.migrations import MIGRATIONS, VERSION_TABLE, Migration, StoreTooNew
from ledger.writing.application import Ledger
from tests.fixture_ledgers import restore
from tests.server_process import ServerProcess, run_cli, server_env

TOKEN = "migration-test-bootstrap-token-0123456789"
V1 = "v1-53a1742"


def _run(config: LedgerConfig, *args: str) -> tuple[int, str]:
    done = run_cli([*args, "--data-dir", str(config.data_dir)], server_env(config, TOKEN), timeout=60)
    return done.returncode, done.stdout + done.stderr


def _recorded(config: LedgerConfig) -> list[tuple[int, str]]:
    adapter = open_adapter(config)
    try:
        with adapter.transaction(commit=False) as cursor:
            if not adapter.table_exists(cursor, VERSION_TABLE):
                return []
            cursor.execute(f"SELECT version, name FROM {adapter.table(VERSION_TABLE)} ORDER BY version")
            return [(int(row["version"]), str(row["name"])) for row in cursor.fetchall()]
    finally:
        adapter.close()


@pytest.fixture
def v1_store(backend: str, tmp_path: Path) -> Iterator[LedgerConfig]:
    with restore(V1, backend, tmp_path) as restored:
        yield restored.config


def test_the_migration_list_is_ordered_from_one() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    assert migrations.CODE_VERSION == MIGRATIONS[-1].version


def test_a_new_store_is_created_at_the_code_version(ledger_config: LedgerConfig) -> None:
    code, out = _run(ledger_config, "init")
    assert code == 0 and f"created at schema version {migrations.CODE_VERSION}" in out, out
    assert [version for version, _ in _recorded(ledger_config)] == [m.version for m in MIGRATIONS]
    code, out = _run(ledger_config, "init")
    assert code == 0 and f"at schema version {migrations.CODE_VERSION} (nothing to migrate)" in out, out
    code, out = _run(ledger_config, "migrate")
    assert code == 0 and "nothing to migrate" in out, out


def test_a_v1_store_is_recognised_and_migrated_only_when_asked(v1_store: LedgerConfig) -> None:
    assert _recorded(v1_store) == []
    # Any other command on the old store refuses and names the step; nothing changes.
    code, out = _run(v1_store, "verify")
    assert code == 3 and "schema version 1" in out and "citeledger migrate" in out, out
    assert _recorded(v1_store) == []
    with pytest.raises(migrations.StoreNeedsMigration):
        Ledger(v1_store)

    code, out = _run(v1_store, "migrate")
    assert code == 0 and f"migrated from schema version 1 to {migrations.CODE_VERSION}" in out, out
    recorded = dict(_recorded(v1_store))
    assert recorded[1].endswith("(recognised from its tables, not applied)")
    assert set(recorded) == {m.version for m in MIGRATIONS}
    code, out = _run(v1_store, "migrate")  # idempotent
    assert code == 0 and "nothing to migrate" in out, out
    assert dict(_recorded(v1_store)) == recorded
    assert _run(v1_store, "verify")[0] == 0


def test_sqlite_serve_migrates_a_v1_store_and_says_so(tmp_path: Path) -> None:
    with restore(V1, "sqlite", tmp_path) as restored:
        log = tmp_path / "serve.log"
        env = server_env(restored.config, TOKEN)
        with ServerProcess(restored.data_dir, env, log_path=log):
            pass
        assert f"store: migrated from schema version 1 to {migrations.CODE_VERSION}" in log.read_text()
        code, out = _run(restored.config, "init")
        assert code == 0 and f"at schema version {migrations.CODE_VERSION} (nothing to migrate)" in out, out


def test_postgres_serve_refuses_a_v1_schema_until_migrate(tmp_path: Path) -> None:
    with restore(V1, "postgres", tmp_path) as restored:
        code, out = _run(restored.config, "serve", "--port", "1")
        assert code == 3 and "older than this citeledger" in out and "citeledger migrate" in out, out
        assert _recorded(restored.config) == []  # refused before anything was written
        code, out = _run(restored.config, "init")
        assert code == 3 and "citeledger migrate" in out, out
        assert _run(restored.config, "migrate")[0] == 0
        assert _run(restored.config, "verify")[0] == 0


def test_a_store_newer_than_the_code_is_refused(ledger_config: LedgerConfig) -> None:
    assert _run(ledger_config, "init")[0] == 0
    adapter = open_adapter(ledger_config)
    try:
        with adapter.transaction(commit=True) as cursor:
            cursor.execute(
                adapter.sql(f"INSERT INTO {adapter.table(VERSION_TABLE)} VALUES (?, ?, ?)"),
                (migrations.CODE_VERSION + 7, "a later version's step", "2030-01-01T00:00:00+00:00"),
            )
    finally:
        adapter.close()
    before = _recorded(ledger_config)
    for command in (["serve", "--port", "1"], ["migrate"], ["verify"]):
        code, out = _run(ledger_config, *command)
        assert code == 3, (command, out)
        assert f"schema version {migrations.CODE_VERSION + 7}, newer than this citeledger" in out, out
        assert "Traceback" not in out
    with pytest.raises(StoreTooNew):
        Ledger(ledger_config)
    assert _recorded(ledger_config) == before


def test_adding_a_side_table_is_one_migration_entry(
    ledger_config: LedgerConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What another engineer's new side table needs: one `Migration` appended (its DDL from
    the adapter, so both backends); older stores then need `migrate`, which adds it once."""
    Ledger(ledger_config).close()
    table = "citeledger_test_findings"

    def ddl(adapter: Any) -> list[str]:
        return [f"CREATE TABLE IF NOT EXISTS {adapter.table(table)} (evidence TEXT PRIMARY KEY)"]

    added = (*MIGRATIONS, Migration(migrations.CODE_VERSION + 1, "durable findings (test)", ddl))
    monkeypatch.setattr(migrations, "MIGRATIONS", added)
    monkeypatch.setattr(migrations, "CODE_VERSION", added[-1].version)
    with pytest.raises(migrations.StoreNeedsMigration):
        Ledger(ledger_config)
    outcome = migrations.migrate_store(ledger_config, upgrade=True)
    assert outcome.applied == (added[-1],) and outcome.before == added[-1].version - 1
    assert migrations.migrate_store(ledger_config, upgrade=True).applied == ()
    adapter = open_adapter(ledger_config)
    try:
        with adapter.transaction(commit=False) as cursor:
            assert adapter.table_exists(cursor, table)
    finally:
        adapter.close()
    Ledger(ledger_config).close()
