"""`citeledger migrate`: bring a store to this version's schema, as one deliberate step.

On PostgreSQL it is the only command that changes a store's schema version: several API and
projection workers share one schema and are upgraded one by one, so the schema moves once,
under the DDL lock, before the new code's workers start (`serve` refuses an older schema and
says to run this). On SQLite `init`, `serve` and `demo` run it themselves: one process owns
the file, and the embedded default promises nothing else to run. See docs/upgrades.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from cli.common import ledger_config
from cli.options import DataDir

if TYPE_CHECKING:
    from ledger.config import LedgerConfig


def where(config: LedgerConfig) -> str:
    """The store, as a message names it."""
    if config.is_postgres:
        return f"PostgreSQL schema {config.eventsourcing_env()['POSTGRES_SCHEMA']!r}"
    return str(config.sqlite_path)


def migrate(data_dir: DataDir = None) -> None:
    """Apply this version's schema migrations to the ledger's store, in order (idempotent;
    back the store up first). A store newer than this version is refused (exit 3)."""
    from ledger.storage.adapters.migrations import migrate_store

    config = ledger_config(data_dir, run_checkpointer=False)  # refuses a place with no ledger
    outcome = migrate_store(config, upgrade=True)
    typer.echo(f"{where(config)}: {outcome.describe()}")


def register(app: typer.Typer) -> None:
    app.command()(migrate)
