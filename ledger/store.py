"""The persistence adapter: `eventsourcing`'s recorder plus our side tables.

The log itself is written through `eventsourcing`'s ApplicationRecorder (one
stream for the ledger, one for checkpoints). Side tables that must NOT be in
the log — data keys, which crypto-shredding destroys — live in the same
database, reached through the same `eventsourcing` datastore, so SQLite and
PostgreSQL share one connection configuration.
"""

from __future__ import annotations

import hashlib
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
        # Advisory locks are database-wide: one key per schema's log.
        digest = hashlib.sha256(f"citeledger-sequencer:{self.schema}.{self.events_table}".encode()).digest()
        self.sequencer_lock_id = int.from_bytes(digest[:8], "big", signed=True)
        self._lock_timeout_s = int(env.get("POSTGRES_LOCK_TIMEOUT", "0"))
        if self.dialect == "sqlite":
            # Overwrite freed pages so shredded key bytes do not linger in the file.
            with self.transaction(commit=True) as cursor:
                cursor.execute("PRAGMA secure_delete=ON")

    @property
    def placeholder(self) -> str:
        return "?" if self.dialect == "sqlite" else "%s"

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

    # -- the log-append transaction (see ledger/sequencing.py) -----------------
    @property
    def serialises_appends(self) -> bool:
        """True when `append_transaction` makes its holder the only writer of log positions
        (PostgreSQL); on SQLite writers still race and the uniqueness constraint decides."""
        return self.dialect == "postgres"

    @contextmanager
    def append_transaction(self) -> Iterator[Any]:
        """The transaction that appends log entries: commit on success, rollback on error.

        On PostgreSQL it first takes the log's sequencer lock, a transaction-scoped
        advisory lock (released by the commit or rollback, or by the server when the
        holder's connection dies), bounded by the store's lock timeout. Everything the
        holder reads afterwards, in this transaction, includes every entry committed
        by the previous holder, so positions it assigns are free and its chain is
        current. The transaction runs in pipeline mode: statements are sent as they
        come and only a fetch or the commit waits for the server, so a whole append
        (lock, head read, table lock, insert, commit) costs two round trips, which is
        what the lock's holder must keep short. A unique violation surfaces at the
        latest from the commit. On SQLite: a plain write transaction, as
        `insert_events` uses.
        """
        if self.dialect != "postgres":
            with self.transaction(commit=True) as cursor:
                yield cursor
            return
        with self.recorder.datastore.get_connection() as conn:
            with conn.pipeline(), conn.transaction():
                cursor = conn.cursor()
                cursor.execute(f"SET LOCAL lock_timeout = '{self._lock_timeout_s}s'")
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", (self.sequencer_lock_id,), prepare=True)
                yield cursor

    def read_stream(self, cursor: Any, stream_id: UUID, after: int, limit: int) -> list[tuple[int, bytes]]:
        """(version, state) of `stream_id` after `after`, in order, read in the caller's transaction."""
        table = self.table(self.events_table)
        key: Any = stream_id if self.dialect == "postgres" else stream_id.hex
        cursor.execute(
            self.sql(
                f"SELECT originator_version, state FROM {table} WHERE originator_id = ? "
                "AND originator_version > ? ORDER BY originator_version LIMIT ?"
            ),
            (key, after, limit),
        )
        return [(int(row["originator_version"]), bytes(row["state"])) for row in cursor.fetchall()]

    def insert_stored_events(self, cursor: Any, stored: Sequence[StoredEvent]) -> None:
        """eventsourcing's own insert (PostgreSQL: table lock, NOTIFY, insert), in the
        caller's transaction, so other rows can commit atomically with the entries."""
        if self.dialect == "postgres":
            self.recorder._insert_stored_events(cursor, stored)
        else:
            self.recorder._insert_events(cursor, stored)

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

    def rowcount(self, cursor: Any) -> int:
        """Rows touched by the last statement (eventsourcing wraps sqlite3's cursor)."""
        inner = getattr(cursor, "sqlite_cursor", cursor)
        return int(inner.rowcount)

    def close(self) -> None:
        self.app.close()
