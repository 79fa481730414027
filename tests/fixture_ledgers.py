"""Restoring a committed fixture ledger (tests/fixtures/ledgers/<version>/<store>/) into a
temporary place, as an operator restores a backup: the SQLite data directory copied, or the
PostgreSQL dump replayed with `psql` into a fresh schema plus the keys and tokens beside it.
Files get 0600 and directories 0700 here (git keeps no such modes)."""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.config import LedgerConfig
from tests.conftest import PG_DSN, pg_connect

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "ledgers"
STORES = ("sqlite", "postgres")
# Answer fields a later run may legitimately change (per request or per build).
# scripts/make_fixture_ledger.py records answers through `stable` and `verdict` below.
VOLATILE = ("run_id", "trace_id", "server_version", "policy_version", "metrics")


def fixture_versions() -> list[str]:
    """Every committed fixture directory (one per storage version that was ever released)."""
    return sorted(path.name for path in FIXTURES.iterdir() if (path / "sqlite" / "manifest.json").is_file())


@dataclass
class Restored:
    config: LedgerConfig
    manifest: dict[str, Any]
    schema: str | None

    @property
    def data_dir(self) -> Path:
        return self.config.data_dir


def _private_copy(source: Path, target: Path) -> None:
    shutil.copytree(source, target)
    target.chmod(0o700)
    for path in target.rglob("*"):
        path.chmod(0o700 if path.is_dir() else 0o600)


@contextlib.contextmanager
def restore(version: str, store: str, root: Path) -> Iterator[Restored]:
    """The fixture `version` on `store`, restored under `root` (a PostgreSQL schema is dropped
    afterwards). Its idempotency records are aged as if written just now (see `_age`)."""
    source = FIXTURES / version / store
    manifest = json.loads((source / "manifest.json").read_text(encoding="utf-8"))
    data_dir = root / "data"
    _private_copy(source / "data", data_dir)
    if store == "sqlite":
        config = LedgerConfig(data_dir=data_dir)
        _age_sqlite(config, manifest)
        yield Restored(config, manifest, None)
        return
    schema = "fx_" + uuid.uuid4().hex[:16]
    dump = (source / "dump.sql").read_text(encoding="utf-8").replace(manifest["schema_token"], schema)
    try:
        done = subprocess.run(
            ["psql", "-q", "-v", "ON_ERROR_STOP=1", "-d", PG_DSN, "-f", "-"],
            input=dump,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        config = LedgerConfig(data_dir=data_dir, database_url=f"{PG_DSN}?schema={schema}")
        _age_postgres(schema, manifest)
        yield Restored(config, manifest, schema)
    finally:
        with pg_connect() as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _shift(manifest: dict[str, Any]) -> tuple[str, str, float]:
    """The server forgets idempotency records after 24 h; a fixture is older than that. Its
    records are moved forward by the fixture's age, as if the upgrade ran right after it was
    made (what a retry within the window must see). The manifest names where its layout
    keeps them."""
    where = manifest["idempotency"]
    return where["table"], where["created_at"], time.time() - float(manifest["made_at"])


def _age_sqlite(config: LedgerConfig, manifest: dict[str, Any]) -> None:
    table, column, shift = _shift(manifest)
    with contextlib.closing(sqlite3.connect(config.sqlite_path)) as conn, conn:
        conn.execute(f"UPDATE {table} SET {column} = {column} + ?", (shift,))


def _age_postgres(schema: str, manifest: dict[str, Any]) -> None:
    table, column, shift = _shift(manifest)
    with pg_connect() as conn:
        conn.execute(f'UPDATE "{schema}"."{table}" SET {column} = {column} + %s', (shift,))


def stable(body: Any) -> Any:
    """`body` without the fields a later run may legitimately change."""
    if isinstance(body, dict):
        return {key: stable(value) for key, value in body.items() if key not in VOLATILE}
    if isinstance(body, list):
        return [stable(item) for item in body]
    return body


def verdict(status: int, body: dict[str, Any]) -> dict[str, Any]:
    """What a replay answer says that must not change (as the fixture script recorded it)."""
    if status >= 400:
        return {"status": status, "error": body["error"]["code"]}
    reason = body.get("integrity_reason") or {}
    found: dict[str, Any] = {"status": status, "integrity": body["integrity"], "cause": reason.get("cause")}
    if body.get("entries") is not None:
        found["fates"] = [entry.get("status") for entry in body["entries"]]
    return found


__all__ = ["PG_DSN", "STORES", "Restored", "fixture_versions", "restore", "stable", "verdict"]
