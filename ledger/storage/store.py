"""The store: `eventsourcing`'s recorder plus our side tables, on one database.

The log itself is written through `eventsourcing`'s ApplicationRecorder (one
stream for the ledger, one for checkpoints). Side tables that must NOT be in
the log — data keys, which crypto-shredding destroys — live in the same
database, reached through the same `eventsourcing` datastore, so SQLite and
PostgreSQL share one connection configuration.

Everything that differs between the two backends lives in `ledger.storage.adapters`
(one module per backend); `Store(config)` picks the adapter and exposes it as
`store.adapter`. The methods below delegate to it, so callers written against
`Store` did not change.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from ledger.config import LedgerConfig
from ledger.domain.entries import EVENT_TOPIC_PREFIX
from ledger.storage.adapters import EventStoreApp, StoreAdapter, open_adapter
from ledger.storage.adapters.migrations import Outcome, check
from ledger.storage.adapters.postgres import pg_connect

# Stream ids are fixed: the whole ledger is one totally ordered stream, so the
# stream version *is* the gap-free log position (notification ids are not:
# PostgreSQL's bigserial skips numbers after a rolled-back insert).
LEDGER_STREAM_ID = UUID("6c6f672d-6369-7465-6c65-646765720001")
CHECKPOINT_STREAM_ID = UUID("6c6f672d-6369-7465-6c65-646765720002")
CHECKPOINT_TOPIC = "citeledger:checkpoint"
KEY_TOPIC = EVENT_TOPIC_PREFIX + "SigningKeyRotated"
# A partial index over the few key entries: opening a ledger finds the key chain
# without scanning the log. The topic is a constant, so it is inlined into the
# SQL (both SQLite and PostgreSQL use a partial index only for a literal match).
KEY_INDEX = "citeledger_key_entries"

__all__ = [
    "CHECKPOINT_STREAM_ID",
    "CHECKPOINT_TOPIC",
    "EVENT_TOPIC_PREFIX",
    "LEDGER_STREAM_ID",
    "EventStoreApp",
    "Store",
    "pg_connect",
]


# Bound parameters per statement are limited (SQLite's default is 32,766, PostgreSQL's
# 65,535): a long `IN (...)` list goes in batches of this many.
IN_BATCH = 500


def in_batches(values: Sequence[Any], size: int = IN_BATCH) -> Iterator[tuple[Sequence[Any], str]]:
    """`values` in batches for an `IN (...)` condition, each with its `?, ?, ...` marks."""
    for start in range(0, len(values), size):
        batch = values[start : start + size]
        yield batch, ", ".join("?" * len(batch))


class Store:
    """One open database: the eventsourcing recorder and side-table access."""

    def __init__(self, config: LedgerConfig) -> None:
        self.config = config
        self.adapter: StoreAdapter = open_adapter(config)
        try:
            # A new store is created at the code's schema version; an older or newer one is
            # refused here (`citeledger migrate`, or `serve`/`init` on SQLite, upgrade it first).
            self.schema_outcome: Outcome = check(self.adapter, upgrade=False)
        except BaseException:
            self.adapter.close()
            raise
        self.app = self.adapter.app
        self.recorder: Any = self.adapter.recorder
        self.schema = self.adapter.schema
        self.events_table: str = self.adapter.events_table

    @property
    def dialect(self) -> Literal["sqlite", "postgres"]:
        """The backend's name, for messages and metrics. Behaviour that differs
        belongs in an adapter method, not in a branch on this."""
        return self.adapter.name

    def table(self, name: str) -> str:
        """Qualified table name (PostgreSQL tables live in the configured schema)."""
        return self.adapter.table(name)

    def sql(self, statement: str) -> str:
        """Write statements with `?` placeholders; adapted here per backend."""
        return self.adapter.sql(statement)

    @contextmanager
    def transaction(self, *, commit: bool) -> Iterator[Any]:
        with self.adapter.transaction(commit=commit) as cursor:
            yield cursor

    def rows(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        """One read-only query (`?` placeholders): one statement, one consistent snapshot."""
        return self.adapter.read_rows(self.sql(statement), tuple(params))

    def create_tables(self, *statements: str) -> None:
        """Idempotent DDL, serialised across processes on PostgreSQL."""
        self.adapter.create_tables(*statements)

    def create_table(self, name: str, columns: str) -> str:
        """`create_tables` for one table `name` with `columns` (its SQL column list);
        its resolved name."""
        table = self.table(name)
        self.create_tables(f"CREATE TABLE IF NOT EXISTS {table} ({columns})")
        return table

    def maintenance(self, statement: str) -> None:
        """A statement that must run outside a transaction (VACUUM, wal_checkpoint)."""
        self.adapter.maintenance(statement)

    def insert_log(self, cursor: Any, stored: Sequence[StoredEvent]) -> list[int]:
        """Insert log rows through the caller's transaction (so whatever must be atomic
        with them shares it); returns their notification ids."""
        return self.adapter.insert_log(cursor, stored)

    def rowcount(self, cursor: Any) -> int:
        """Rows touched by the last statement."""
        return self.adapter.rowcount(cursor)

    def ensure_key_index(self) -> None:
        """Create the partial index on key entries once (built on first open of an
        older store; checked in the catalog first so a normal start takes no lock
        on the events table)."""
        if self.adapter.index_exists(KEY_INDEX):
            return
        self.create_tables(
            f"CREATE INDEX IF NOT EXISTS {KEY_INDEX} ON {self.table(self.events_table)} "
            f"(originator_id, originator_version) WHERE topic = '{KEY_TOPIC}'"
        )

    def key_entries(self, up_to: int) -> list[tuple[int, bytes]]:
        """(position, entry bytes) of every SigningKeyRotated entry at or before `up_to`."""
        stream = self.adapter.stream_param(LEDGER_STREAM_ID)
        rows = self.rows(
            f"SELECT originator_version, state FROM {self.table(self.events_table)} "
            f"WHERE originator_id = ? AND topic = '{KEY_TOPIC}' AND originator_version <= ? "
            "ORDER BY originator_version",
            (stream, up_to),
        )
        return [(int(row["originator_version"]), bytes(row["state"])) for row in rows]

    def log_entries(self, after: int, last: int, limit: int) -> list[tuple[int, bytes]]:
        """(position, entry bytes) of up to `limit` log entries with `after` < position <=
        `last`, in order: plain SQL, for a pass over a million entries (eventsourcing's
        StoredEvent objects cost more than what the pass does with each)."""
        stream = self.adapter.stream_param(LEDGER_STREAM_ID)
        rows = self.rows(
            f"SELECT originator_version, state FROM {self.table(self.events_table)} "
            "WHERE originator_id = ? AND originator_version > ? AND originator_version <= ? "
            f"ORDER BY originator_version LIMIT {int(limit)}",
            (stream, after, last),
        )
        return [(int(row["originator_version"]), bytes(row["state"])) for row in rows]

    def log_entries_at(self, positions: Sequence[int]) -> list[tuple[int, bytes]]:
        """(position, entry bytes) of the log entries at `positions` that exist, by the log's
        key: one statement per `IN_BATCH` positions."""
        stream = self.adapter.stream_param(LEDGER_STREAM_ID)
        found: list[tuple[int, bytes]] = []
        for batch, marks in in_batches(positions):
            rows = self.rows(
                f"SELECT originator_version, state FROM {self.table(self.events_table)} "
                f"WHERE originator_id = ? AND originator_version IN ({marks})",
                (stream, *batch),
            )
            found += [(int(row["originator_version"]), bytes(row["state"])) for row in rows]
        return found

    def close(self) -> None:
        self.adapter.close()
