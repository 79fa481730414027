"""The store's schema version and its migrations: explicit, ordered, idempotent.

A store records the migrations applied to it in `citeledger_schema_version` (one row per
version, with its name and when it was applied); its schema version is the highest. A store
made before that table existed (main at 53a1742 and earlier) is recognised as version 1 from
its tables. `MIGRATIONS` lists every version in order; the code's version is the last one.

Rules (docs/upgrades.md says them for contributors):
- A change to the layout, the storage or the entries appends one `Migration` here and
  commits a fixture ledger made by the code before it (tests/test_fixture_ledgers.py).
- A step is idempotent (`CREATE ... IF NOT EXISTS`, `ADD COLUMN IF NOT EXISTS`, updates that
  can run twice) and runs in one transaction with the row recording it: a crash leaves the
  store at the previous version or at the new one, never in between (PostgreSQL and SQLite
  DDL are transactional).
- A step never drops or rewrites what the log's evidence or a retry depends on: entries,
  checkpoints, data keys, idempotency records, tiles, cosignatures. Read models are the one
  thing that is rebuilt, from the log, by their own version (projections/runner.py).
- A store newer than the code is refused, never opened: old code would not know what the
  newer steps mean.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ledger.config import LedgerConfig
from ledger.storage.adapters.base import StoreAdapter
from ledger.storage.adapters.data_keys import KEYS_TABLE

VERSION_TABLE = "citeledger_schema_version"
UPGRADES_DOC = "docs/upgrades.md"


@dataclass(frozen=True)
class Migration:
    """One schema version: the DDL that makes it (from the adapter, so one entry serves both
    backends) and, when data must change too, a step run in the same transaction."""

    version: int
    name: str
    ddl: Callable[[StoreAdapter], list[str]] = field(default=lambda adapter: [])
    data: Callable[[StoreAdapter, Any], None] | None = None


def _v1_side_tables(adapter: StoreAdapter) -> list[str]:
    # The adapter-level side tables of v1. The log (eventsourcing's tables), the Merkle tiles,
    # the witnesses' records and the read models are created by their owners when opened.
    return [
        *adapter.data_keys_ddl(),
        *adapter.idempotency_ddl(),
        *adapter.claims_ddl(),
        *adapter.rate_bucket_ddl(),
        *adapter.tracking_ddl(),
    ]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "the v1 layout (main at 53a1742): log, data keys, idempotency, claims", _v1_side_tables),
    Migration(2, "the store records its schema version (citeledger_schema_version)"),
    # No table changes: entries may now omit a selected entry's score, carry unverifiable
    # citations (OTLP spans), and the log may hold ReportIssued entries (record-keeping
    # reports); code before this cannot read them, so the version moves and older code refuses.
    Migration(3, "receipts with absent scores and unverifiable citations; ReportIssued entries"),
    # No side-table changes: the question index is a read model (projections/question_index.py)
    # whose tables its projection creates and fills from the whole log when it first runs (the
    # backfill of an upgraded ledger); the log may hold ContentRead entries of question
    # searches (`searched_words`, possibly no positions), and an external receipt may name its
    # data source (an OTLP span's `gen_ai.data_source.id`), which code before this cannot read.
    Migration(
        4,
        "the question index read model; ContentRead entries of question searches; "
        "receipts naming their data source (data_source)",
    ),
    # No side-table changes: the receipts read model (projections/receipt_index.py, version 2)
    # refers to each receipt's log entries (position, parts) instead of keeping a second copy
    # of its payload, and is rebuilt from the log by its projection when it first runs. Code of
    # version 4 would read a `body` column the table no longer has, so the version moves.
    Migration(5, "the receipts read model refers to log positions instead of copying payloads"),
)
CODE_VERSION = MIGRATIONS[-1].version


class SchemaVersionError(Exception):
    """The store's schema version is not the code's; the message says what to do."""


class StoreTooNew(SchemaVersionError):
    pass


class StoreNeedsMigration(SchemaVersionError):
    pass


@dataclass(frozen=True)
class Outcome:
    """What opening did to the schema: `before` None for a store created now."""

    before: int | None
    after: int
    applied: tuple[Migration, ...] = ()

    def describe(self) -> str:
        if self.before is None:
            return f"created at schema version {self.after}"
        if self.applied:
            steps = "; ".join(f"{m.version}: {m.name}" for m in self.applied)
            return f"migrated from schema version {self.before} to {self.after} ({steps})"
        return f"at schema version {self.after} (nothing to migrate)"


def _version_ddl(adapter: StoreAdapter) -> str:
    return (
        f"CREATE TABLE IF NOT EXISTS {adapter.table(VERSION_TABLE)} ("
        "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )


def stored_version(adapter: StoreAdapter) -> int | None:
    """The store's schema version; None for a store that holds nothing yet (new)."""
    with adapter.transaction(commit=False) as cursor:
        if adapter.table_exists(cursor, VERSION_TABLE):
            cursor.execute(f"SELECT max(version) AS version FROM {adapter.table(VERSION_TABLE)}")
            row = cursor.fetchone()
            if row is not None and row["version"] is not None:
                return int(row["version"])
        cursor.execute(f"SELECT 1 AS one FROM {adapter.table(adapter.events_table)} LIMIT 1")
        # No version recorded: a v1 store holds entries or data keys; otherwise it is new.
        return 1 if cursor.fetchone() is not None or adapter.table_exists(cursor, KEYS_TABLE) else None


def check(adapter: StoreAdapter, *, upgrade: bool) -> Outcome:
    """Bring the store to the code's schema version, or refuse. A new store is created at it;
    an older one is migrated only when `upgrade` (else `StoreNeedsMigration`); a newer one is
    always refused (`StoreTooNew`)."""
    before = stored_version(adapter)
    if before is not None:
        _refuse_newer(before)
        if before == CODE_VERSION:
            return Outcome(before, before)
        if not upgrade:
            raise StoreNeedsMigration(
                f"the store is at schema version {before}, older than this citeledger's "
                f"({CODE_VERSION}): back it up, then run `citeledger migrate` ({UPGRADES_DOC}); "
                "nothing was changed"
            )
    with adapter.ddl_guard(), adapter.transaction(commit=True) as cursor:
        return _apply(adapter, cursor)


def _refuse_newer(version: int) -> None:
    if version > CODE_VERSION:
        raise StoreTooNew(
            f"the store is at schema version {version}, newer than this citeledger's "
            f"({CODE_VERSION}): run the citeledger version that wrote it, or a newer one; "
            "nothing was changed"
        )


def _apply(adapter: StoreAdapter, cursor: Any) -> Outcome:
    """Under the DDL guard, in one transaction: re-read the version (another process may have
    migrated meanwhile), then apply and record each missing step in order."""
    recorded = _recorded(adapter, cursor)
    before = max(recorded) if recorded else None
    if before is None:
        cursor.execute(f"SELECT 1 AS one FROM {adapter.table(adapter.events_table)} LIMIT 1")
        if cursor.fetchone() is not None or adapter.table_exists(cursor, KEYS_TABLE):
            before = 1
    if before is not None:
        _refuse_newer(before)
    cursor.execute(_version_ddl(adapter))
    now = dt.datetime.now(dt.UTC).isoformat()
    applied = []
    for migration in MIGRATIONS:
        if before is not None and migration.version <= before:
            if migration.version not in recorded:  # a v1 store recognised from its tables
                _record(adapter, cursor, migration, now, " (recognised from its tables, not applied)")
            continue
        for statement in migration.ddl(adapter):
            cursor.execute(statement)
        if migration.data is not None:
            migration.data(adapter, cursor)
        _record(adapter, cursor, migration, now)
        applied.append(migration)
    return Outcome(before, CODE_VERSION, tuple(applied) if before is not None else ())


def _recorded(adapter: StoreAdapter, cursor: Any) -> set[int]:
    if not adapter.table_exists(cursor, VERSION_TABLE):
        return set()
    cursor.execute(f"SELECT version FROM {adapter.table(VERSION_TABLE)}")
    return {int(row["version"]) for row in cursor.fetchall()}


def _record(adapter: StoreAdapter, cursor: Any, migration: Migration, at: str, note: str = "") -> None:
    cursor.execute(
        adapter.sql(
            f"INSERT INTO {adapter.table(VERSION_TABLE)} (version, name, applied_at) VALUES (?, ?, ?) "
            "ON CONFLICT (version) DO NOTHING"
        ),
        (migration.version, migration.name + note, at),
    )


def migrate_store(config: LedgerConfig, *, upgrade: bool) -> Outcome:
    """Open the configured store, bring it to the code's schema version (see `check`), close it."""
    from ledger.storage.adapters import open_adapter  # the package imports this module's siblings

    adapter = open_adapter(config)
    try:
        return check(adapter, upgrade=upgrade)
    finally:
        adapter.close()
