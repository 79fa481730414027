"""The persistence adapter: `eventsourcing`'s recorder plus our side tables.

The log itself is written through `eventsourcing`'s ApplicationRecorder (one
stream for the ledger, one for checkpoints). Side tables that must NOT be in
the log — data keys, which crypto-shredding destroys — live in the same
database, reached through the same `eventsourcing` datastore, so SQLite and
PostgreSQL share one connection configuration.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal
from uuid import UUID

from eventsourcing.application import Application
from eventsourcing.persistence import StoredEvent

from ledger.config import LedgerConfig

# Stream ids are fixed: the whole ledger is one totally ordered stream, so the
# stream version *is* the gap-free log position (notification ids are not:
# PostgreSQL's bigserial skips numbers after a rolled-back insert).
LEDGER_STREAM_ID = UUID("6c6f672d-6369-7465-6c65-646765720001")
CHECKPOINT_STREAM_ID = UUID("6c6f672d-6369-7465-6c65-646765720002")
EVENT_TOPIC_PREFIX = "citeledger:event:"
CHECKPOINT_TOPIC = "citeledger:checkpoint"
KEY_TOPIC = EVENT_TOPIC_PREFIX + "SigningKeyRotated"
# A partial index over the few key entries: opening a ledger finds the key chain
# without scanning the log. The topic is a constant, so it is inlined into the
# SQL (both SQLite and PostgreSQL use a partial index only for a literal match).
KEY_INDEX = "citeledger_key_entries"


class EventStoreApp(Application[UUID]):
    """Only used for its infrastructure: env-driven recorder construction."""

    name = "citeledger"


def pg_connect(config: LedgerConfig) -> Any:
    """A plain autocommit psycopg connection to the configured PostgreSQL (for
    what eventsourcing's pool does not do: advisory locks, LISTEN)."""
    import psycopg

    env = config.eventsourcing_env()
    return psycopg.connect(
        dbname=env["POSTGRES_DBNAME"],
        host=env["POSTGRES_HOST"],
        port=int(env["POSTGRES_PORT"]),
        user=env["POSTGRES_USER"],
        password=env["POSTGRES_PASSWORD"],
        autocommit=True,
        connect_timeout=10,
    )


@contextmanager
def _ddl_lock(config: LedgerConfig) -> Iterator[None]:
    """Serialise table creation across processes: eventsourcing's CREATE TYPE
    is not safe when two processes start on an empty schema at once."""
    with pg_connect(config) as conn:
        conn.execute("SELECT pg_advisory_lock(hashtext('citeledger-ddl'))")
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext('citeledger-ddl'))")


class Store:
    """One open database: the eventsourcing recorder and side-table access."""

    def __init__(self, config: LedgerConfig) -> None:
        self.config = config
        if not config.is_postgres:
            config.data_dir.mkdir(parents=True, exist_ok=True)
            self.app = EventStoreApp(env=config.eventsourcing_env())
        else:
            with _ddl_lock(config):
                self.app = EventStoreApp(env=config.eventsourcing_env())
        self.recorder: Any = self.app.recorder
        self.dialect: Literal["sqlite", "postgres"] = "postgres" if config.is_postgres else "sqlite"
        env = config.eventsourcing_env()
        self.schema = env.get("POSTGRES_SCHEMA", "public")
        self.events_table: str = getattr(self.recorder, "events_table_name", "stored_events")
        if self.dialect == "sqlite":
            # Overwrite freed pages so shredded key bytes do not linger in the file.
            with self.transaction(commit=True) as cursor:
                cursor.execute("PRAGMA secure_delete=ON")

    def table(self, name: str) -> str:
        """Qualified table name (PostgreSQL tables live in the configured schema)."""
        if self.dialect == "postgres":
            return f'"{self.schema}"."{name}"'
        return name

    def sql(self, statement: str) -> str:
        """Write statements with `?` placeholders; adapted here per dialect."""
        return statement if self.dialect == "sqlite" else statement.replace("?", "%s")

    @contextmanager
    def transaction(self, *, commit: bool) -> Iterator[Any]:
        with self.recorder.datastore.transaction(commit=commit) as cursor:
            yield cursor

    def create_tables(self, *statements: str) -> None:
        """Idempotent DDL, serialised across processes on PostgreSQL."""
        if self.dialect == "postgres":
            with _ddl_lock(self.config), self.transaction(commit=True) as cursor:
                for statement in statements:
                    cursor.execute(statement)
        else:
            with self.transaction(commit=True) as cursor:
                for statement in statements:
                    cursor.execute(statement)

    def maintenance(self, statement: str) -> None:
        """A statement that must run outside a transaction (VACUUM, wal_checkpoint)."""
        if self.dialect == "postgres":
            with self.recorder.datastore.get_connection() as conn:
                conn.execute(statement)
        else:
            with self.recorder.datastore.get_connection(commit=True) as conn:
                conn.cursor().execute(statement)

    def insert_log(self, cursor: Any, stored: Sequence[StoredEvent]) -> list[int]:
        """Insert log rows through the caller's transaction (so whatever must be atomic
        with them shares it); returns their notification ids.

        PostgreSQL: eventsourcing's insert takes the table lock that keeps notification
        ids in commit order, and notifies listeners; SQLite serialises writers itself."""
        if self.dialect == "postgres":
            self.recorder._insert_stored_events(cursor, stored)
            return [int(row["notification_id"]) for row in cursor.fetchall()]
        return [int(i) for i in self.recorder._insert_events(cursor, stored)]

    def rowcount(self, cursor: Any) -> int:
        """Rows touched by the last statement (eventsourcing wraps sqlite3's cursor)."""
        inner = getattr(cursor, "sqlite_cursor", cursor)
        return int(inner.rowcount)

    def ensure_key_index(self) -> None:
        """Create the partial index on key entries once (built on first open of an
        older store; checked in the catalog first so a normal start takes no lock
        on the events table)."""
        if self.dialect == "postgres":
            with self.transaction(commit=False) as cursor:
                cursor.execute("SELECT to_regclass(%s) AS found", (f'"{self.schema}"."{KEY_INDEX}"',))
                row = cursor.fetchone()
            if row is not None and row["found"] is not None:
                return
        self.create_tables(
            f"CREATE INDEX IF NOT EXISTS {KEY_INDEX} ON {self.table(self.events_table)} "
            f"(originator_id, originator_version) WHERE topic = '{KEY_TOPIC}'"
        )

    def key_entries(self, up_to: int) -> list[tuple[int, bytes]]:
        """(position, entry bytes) of every SigningKeyRotated entry at or before `up_to`."""
        stream: object = LEDGER_STREAM_ID.hex if self.dialect == "sqlite" else LEDGER_STREAM_ID
        with self.transaction(commit=False) as cursor:
            cursor.execute(
                self.sql(
                    f"SELECT originator_version, state FROM {self.table(self.events_table)} "
                    f"WHERE originator_id = ? AND topic = '{KEY_TOPIC}' AND originator_version <= ? "
                    "ORDER BY originator_version"
                ),
                (stream, up_to),
            )
            return [(int(row["originator_version"]), bytes(row["state"])) for row in cursor.fetchall()]

    def close(self) -> None:
        self.app.close()
