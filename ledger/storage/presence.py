"""Whether a data directory (and, on PostgreSQL, a schema) holds a ledger.

Only `serve`, `demo` and `init` create a ledger. Every other command first asks
`require_ledger`, so a mistyped `--data-dir` or schema is refused as what it is
instead of silently becoming a new, empty ledger there.
"""

from __future__ import annotations

from ledger.config import LedgerConfig
from ledger.storage.adapters.core import EventStoreApp
from ledger.storage.adapters.postgres import pg_connect
from ledger.tlog.signing import KeyDirectory

# eventsourcing names the PostgreSQL events table after the application.
PG_EVENTS_TABLE = f"{EventStoreApp.name}_events"
INIT_HINT = (
    "check --data-dir / CITELEDGER_DATA_DIR (and CITELEDGER_DATABASE_URL), "
    "or create one with `citeledger init`"
)


class NoLedger(Exception):
    """The place named holds no ledger (or something that is not one). The message says
    what is missing and what to do."""


def require_ledger(config: LedgerConfig) -> None:
    """Raise `NoLedger` unless the configured store and key directory hold a ledger."""
    if config.database_url is None:
        if not config.sqlite_path.is_file():
            raise NoLedger(f"no ledger in {config.data_dir} (it has no ledger.sqlite); {INIT_HINT}")
    elif not _schema_state(config)[1]:
        raise NoLedger(f"no ledger in PostgreSQL schema {_schema(config)!r}; {INIT_HINT}")
    if not KeyDirectory(config.keys_dir).root_public_key_path.is_file():
        raise NoLedger(f"no ledger keys in {config.keys_dir} (no root.pub); {INIT_HINT}")


def check_creatable(config: LedgerConfig) -> None:
    """Before creating a ledger on PostgreSQL: the schema must exist and hold a ledger or
    nothing at all (never another application's tables)."""
    if config.database_url is None:
        return
    schema = _schema(config)
    exists, has_ledger, tables = _schema_state(config)
    if not exists:
        raise NoLedger(
            f"PostgreSQL schema {schema!r} does not exist; create it (CREATE SCHEMA) or name another"
        )
    if not has_ledger and tables:
        raise NoLedger(
            f"PostgreSQL schema {schema!r} holds {tables} table(s) that are not a ledger's; "
            "name an empty schema or a ledger's"
        )


def _schema(config: LedgerConfig) -> str:
    return config.eventsourcing_env()["POSTGRES_SCHEMA"]


def _schema_state(config: LedgerConfig) -> tuple[bool, bool, int]:
    """(schema exists, holds the ledger's events table, number of tables in it)."""
    schema = _schema(config)
    with pg_connect(config) as conn:
        row = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = %s), "
            "EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = %s), "
            "(SELECT count(*) FROM pg_tables WHERE schemaname = %s)",
            (schema, schema, PG_EVENTS_TABLE, schema),
        ).fetchone()
    assert row is not None
    return bool(row[0]), bool(row[1]), int(row[2])
