"""The scale-out backend: PostgreSQL, one schema per ledger, many writer processes."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, ClassVar, Literal
from uuid import UUID

import psycopg
import psycopg.errors
from eventsourcing import persistence
from eventsourcing.persistence import IntegrityError, StoredEvent
from psycopg.errors import UniqueViolation

from ledger.config import LedgerConfig
from ledger.storage.adapters.base import StoreAdapter
from ledger.storage.adapters.core import EventStoreApp, LogRow, driver_error
from ledger.storage.adapters.data_keys import KEYS_TABLE
from ledger.storage.adapters.side_tables import RATE_TABLE


def pg_connect(config: LedgerConfig) -> psycopg.Connection[Any]:
    """A plain autocommit psycopg connection to the configured PostgreSQL (for
    what eventsourcing's pool does not do: advisory locks, LISTEN)."""
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
    is not safe when two processes start on an empty schema at once. One lock per
    schema: every object made is schema-qualified, so ledgers in different schemas
    of one server open side by side instead of queueing on each other's DDL."""
    key = "citeledger-ddl:" + config.eventsourcing_env()["POSTGRES_SCHEMA"]
    with pg_connect(config) as conn:
        conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (key,))
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))


class PgAppendListener:
    """LISTEN on the channel eventsourcing NOTIFYs on every insert: a follower's lag
    is one round trip, not a poll interval."""

    def __init__(self, config: LedgerConfig, channel: str) -> None:
        self._conn = pg_connect(config)
        self._conn.execute(f'LISTEN "{channel}"')

    def wait(self, timeout: float) -> None:
        for _ in self._conn.notifies(timeout=timeout, stop_after=1):
            pass

    def close(self) -> None:
        self._conn.close()


class PostgresAdapter(StoreAdapter):
    name: ClassVar[Literal["sqlite", "postgres"]] = "postgres"
    read_models_together: ClassVar[bool] = True
    blob: ClassVar[str] = "BYTEA"
    real: ClassVar[str] = "DOUBLE PRECISION"
    # psycopg raises its own UniqueViolation through eventsourcing's pipeline.
    duplicate_errors: ClassVar[tuple[type[Exception], ...]] = (IntegrityError, UniqueViolation)
    # eventsourcing wraps driver errors raised inside its transactions in its own classes.
    # A server restarting or a dropped connection is an OperationalError; a read-only server
    # (a standby after a failover, default_transaction_read_only) refuses each write.
    transient_errors: ClassVar[tuple[type[Exception], ...]] = (
        psycopg.OperationalError,
        psycopg.errors.ReadOnlySqlTransaction,
        persistence.OperationalError,
        persistence.InterfaceError,
    )
    scale_out: ClassVar[bool] = True

    @classmethod
    def transient(cls, exc: BaseException) -> bool | None:
        driver = driver_error(exc, psycopg.Error)
        if driver is None:
            return None
        # Connection lost or refused, server shutting down or out of resources, lock or
        # statement timeouts (OperationalError), and a read-only server's refusal.
        return isinstance(driver, (psycopg.OperationalError, psycopg.errors.ReadOnlySqlTransaction))

    def _open_app(self) -> EventStoreApp:
        with _ddl_lock(self.config):
            return EventStoreApp(env=self.env)

    def _pooled_connection(self, *, commit: bool) -> AbstractContextManager[Any]:
        return self.recorder.datastore.get_connection()  # type: ignore[no-any-return]

    @contextmanager
    def _transaction_on(self, connection: Any, *, commit: bool) -> Iterator[Any]:
        with connection.transaction(force_rollback=not commit):
            yield connection.cursor()

    def table(self, name: str) -> str:
        return f'"{self.schema}"."{name}"'

    def sql(self, statement: str) -> str:
        return statement.replace("?", "%s")

    def rowcount(self, cursor: Any) -> int:
        return int(cursor.rowcount)

    @contextmanager
    def ddl_guard(self) -> Iterator[None]:
        with _ddl_lock(self.config):
            yield

    def maintenance(self, statement: str) -> None:
        # psycopg connections from eventsourcing's pool are in autocommit mode.
        with self.recorder.datastore.get_connection() as conn:
            conn.execute(statement)

    def insert_log(self, cursor: Any, stored: Sequence[StoredEvent]) -> list[int]:
        # The rows go in as one multi-row statement with binary parameters (the library's
        # array of a composite type took ≈1 ms a row, under the sequencer).
        self._table_lock_and_notify(cursor)
        as_text = self.recorder.datastore.originator_id_type != "uuid"
        params: list[Any] = []
        for event in stored:
            stream = str(event.originator_id) if as_text else event.originator_id
            params.extend((stream, event.originator_version, event.topic, event.state))
        cursor.execute(
            f"INSERT INTO {self.table(self.events_table)} (originator_id, originator_version, topic, state) "
            f"VALUES {', '.join(['(%s, %s, %s, %s)'] * len(stored))} RETURNING notification_id",
            params,
            binary=True,
        )
        return [int(row["notification_id"]) for row in cursor.fetchall()]

    def stream_key(self, stream_id: UUID) -> str:
        return str(stream_id)

    def stream_param(self, stream_id: UUID) -> object:
        return stream_id

    serialises_appends: ClassVar[bool] = True

    @property
    def sequencer_lock_id(self) -> int:
        """Advisory locks are database-wide: one key per schema's log."""
        name = f"citeledger-sequencer:{self.schema}.{self.events_table}"
        return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)

    @property
    def lock_timeout_s(self) -> int:
        return int(self.env.get("POSTGRES_LOCK_TIMEOUT", "0"))

    # Where the adapter keeps each sequencer hold's duration (seconds) when a benchmark asks
    # (`scripts/bench_sequencer.py`): None, the default, measures nothing.
    sequencer_holds: list[float] | None = None
    # The holds of append transactions rolled back (another worker had moved the head).
    sequencer_rollbacks: list[float] | None = None
    # The hold so far: the server's span from the grant to the sequencer's last statement,
    # and the client's clock when that statement's results arrived.
    _held_in_server: float | None = None
    _held_since: float = 0.0
    # Whether the server compresses TOASTed values with lz4 (PostgreSQL ≥ 14 built with it).
    _lz4: bool | None = None

    @contextmanager
    def append_transaction(self) -> Iterator[Any]:
        """The append transaction; `take_sequencer` takes the log's sequencer lock in it: a
        transaction-scoped advisory lock (released by the commit or rollback, or by the server
        when the holder's connection dies). Everything the holder reads afterwards in this
        transaction includes every entry the previous holder committed, so the positions it
        signs are free and its chain is current: writers in several processes never sign a
        batch twice (they used to race for positions and the loser re-signed). The COMMIT is
        part of the hold: the lock is the transaction's, so it ends with the COMMIT's WAL flush
        (acknowledged = durable, `synchronous_commit` as configured)."""
        self._held_in_server = None
        committed = False
        try:
            with self.transaction(commit=True) as cursor:
                # A ≈2 KB log row is past PostgreSQL's TOAST threshold: pglz tried (and failed)
                # to compress each one under the sequencer, about half the insert's server time;
                # lz4 does it in a fraction. Readers see the same bytes either way.
                lz4 = "; SET LOCAL default_toast_compression = lz4" if self._has_lz4(cursor) else ""
                cursor.execute(f"SET LOCAL lock_timeout = '{self.lock_timeout_s}s'{lz4}")
                yield cursor
            committed = True
        finally:
            if self._held_in_server is not None and self.sequencer_holds is not None:
                # Server span up to the sequencer's last statement, then the client's clock from
                # its results to the COMMIT's (or ROLLBACK's) return, the holder's work included.
                held = self._held_in_server + time.perf_counter() - self._held_since
                into = self.sequencer_holds if committed else self.sequencer_rollbacks
                if into is not None:
                    into.append(held)

    def _has_lz4(self, cursor: Any) -> bool:
        if self._lz4 is None:
            cursor.execute(
                "SELECT coalesce(bool_or('lz4' = ANY(enumvals)), false) AS lz4 FROM pg_settings "
                "WHERE name = 'default_toast_compression'"
            )
            row = cursor.fetchone()
            self._lz4 = bool(row is not None and row["lz4"])
        return self._lz4

    def await_sequencer(self, cursor: Any) -> None:
        # A shared lock waits for an exclusive holder; taken in a savepoint rolled back at
        # once, it is released in the same round trip whatever happens (held until the
        # transaction's exclusive request, it would deadlock two writers).
        with cursor.connection.pipeline():
            cursor.execute("SAVEPOINT citeledger_await_sequencer")
            cursor.execute(
                "SELECT pg_advisory_xact_lock_shared(%s)::text AS waited", (self.sequencer_lock_id,)
            )
            cursor.execute("ROLLBACK TO SAVEPOINT citeledger_await_sequencer")
            cursor.execute("RELEASE SAVEPOINT citeledger_await_sequencer")

    def take_sequencer(
        self, cursor: Any, stream_id: UUID, head: int, stored: Sequence[StoredEvent]
    ) -> list[int] | None:
        """Take the sequencer and, if nothing was appended to `stream_id` after `head` since the
        caller signed `stored` there, insert them: their notification ids; None (nothing
        inserted) when the head moved. One round trip (pipelined statements, each with a
        snapshot taken after the grant) for the lock, eventsourcing's table lock and NOTIFY,
        and the check with the insert of a few rows; a bulk batch goes in by binary COPY after
        the check (half the server time of a multi-row INSERT) and its ids are read back."""
        conn = cursor.connection
        events = self.table(self.events_table)
        moved = f"EXISTS (SELECT 1 FROM {events} WHERE originator_id = %s AND originator_version > %s)"
        stream: object = stream_id if self.recorder.datastore.originator_id_type == "uuid" else str(stream_id)
        bulk = len(stored) >= (self.copy_from_rows or 0)
        measuring = self.sequencer_holds is not None
        with conn.pipeline():
            granted = conn.cursor()
            granted.execute(
                "SELECT pg_advisory_xact_lock(%s)::text AS locked, clock_timestamp() AS at",
                (self.sequencer_lock_id,),
            )
            self._table_lock_and_notify(cursor)
            check = conn.cursor()
            if bulk or not stored:
                check.execute(f"SELECT {moved} AS moved", (stream, head))
            else:
                params: list[Any] = []
                for event in stored:
                    params.extend((stream, event.originator_version, event.topic, event.state))
                params.extend((stream, head))
                check.execute(
                    f"INSERT INTO {events} (originator_id, originator_version, topic, state) "
                    f"SELECT * FROM (VALUES {', '.join(['(%s, %s::bigint, %s, %s)'] * len(stored))}) AS v "
                    f"WHERE NOT {moved} RETURNING notification_id",
                    params,
                    binary=True,
                )
            ended = conn.cursor()
            if measuring:
                ended.execute("SELECT clock_timestamp() AS at")
        at = granted.fetchone()["at"]
        if bulk or not stored:
            if check.fetchone()["moved"]:
                ids = None
            else:
                ids = (
                    self._copy_log(cursor, stream, head, stored, ended if measuring else None)
                    if stored
                    else []
                )
        else:
            found = [int(row["notification_id"]) for row in check.fetchall()]
            ids = found if found else None
        if measuring:
            self._held_in_server = (ended.fetchone()["at"] - at).total_seconds()
            self._held_since = time.perf_counter()
        return ids

    def _table_lock_and_notify(self, cursor: Any) -> None:
        # eventsourcing's table lock keeps notification ids in commit order, and its NOTIFY
        # wakes followers.
        recorder = self.recorder
        recorder._lock_table(cursor)
        recorder._notify_channel(cursor)

    def _copy_log(
        self, cursor: Any, stream: object, head: int, stored: Sequence[StoredEvent], clock: Any
    ) -> list[int]:
        """COPY `stored` and read their notification ids back (with the server's clock on
        `clock`, a cursor, when measuring: one round trip)."""
        events = self.table(self.events_table)
        columns = "originator_id, originator_version, topic, state"
        with cursor.copy(f"COPY {events} ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types([self.recorder.datastore.originator_id_type, "int8", "text", "bytea"])
            for event in stored:
                copy.write_row((stream, event.originator_version, event.topic, event.state))
        with cursor.connection.pipeline():
            cursor.execute(
                f"SELECT notification_id FROM {events} WHERE originator_id = %s AND originator_version > %s "
                "ORDER BY originator_version",
                (stream, head),
            )
            if clock is not None:
                clock.execute("SELECT clock_timestamp() AS at")
        return [int(row["notification_id"]) for row in cursor.fetchall()]

    @contextmanager
    def relaxed_transaction(self) -> Iterator[Any]:
        with self.transaction(commit=True) as cursor:
            cursor.execute("SET LOCAL synchronous_commit = off")
            yield cursor

    copy_from_rows: ClassVar[int | None] = 50  # fewer: one INSERT each, pipelined, is as quick

    def copy_rows(
        self, cursor: Any, table: str, names: str, rows: Sequence[tuple[Any, ...]], first_wins_on: str | None
    ) -> None:
        """COPY: the server takes the rows as one stream instead of planning and running one
        INSERT per row. With `first_wins_on` (a key of text columns), the rows whose key came
        earlier in the batch or is stored already are left out first, as the row-by-row
        INSERT ... ON CONFLICT DO NOTHING did: no other transaction writes these rows
        meanwhile (a read model's rows are written after its tracking row is taken)."""
        if first_wins_on is not None:
            rows = self._first_of_each_key(cursor, table, names, rows, first_wins_on)
        with cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)

    def _first_of_each_key(
        self, cursor: Any, table: str, names: str, rows: Sequence[tuple[Any, ...]], key: str
    ) -> list[tuple[Any, ...]]:
        columns = [name.strip() for name in names.split(",")]
        key_columns = [name.strip() for name in key.split(",")]
        at = [columns.index(name) for name in key_columns]
        first: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        for row in rows:
            first.setdefault(tuple(row[i] for i in at), row)
        keys = list(first)
        arrays = ", ".join("%s::text[]" for _ in key_columns)
        cursor.execute(
            f"SELECT {key} FROM {table} JOIN unnest({arrays}) AS batch ({key}) USING ({key})",
            [[k[i] for k in keys] for i in range(len(key_columns))],
        )
        for found in cursor.fetchall():
            first.pop(tuple(found[name] for name in key_columns), None)
        return list(first.values())

    def empty_tables(self, tables: Sequence[str]) -> list[str]:
        # Transactional here, and it frees the files at once: DELETE wrote a dead version of
        # every row for VACUUM to clear later.
        return [f"TRUNCATE {', '.join(tables)}"] if tables else []

    def index_exists(self, name: str) -> bool:
        # Checked in the catalog so a normal start takes no lock on the events table.
        with self.transaction(commit=False) as cursor:
            cursor.execute("SELECT to_regclass(%s) AS found", (f'"{self.schema}"."{name}"',))
            row = cursor.fetchone()
        return row is not None and row["found"] is not None

    def table_exists(self, cursor: Any, name: str) -> bool:
        cursor.execute("SELECT to_regclass(%s) AS found", (f'"{self.schema}"."{name}"',))
        row = cursor.fetchone()
        return row is not None and row["found"] is not None

    def log_page(self, cursor: Any, after: int, limit: int) -> list[LogRow]:
        cursor.execute(
            "SELECT notification_id AS id, originator_id::text AS stream, originator_version AS version, "
            f"topic, state FROM {self.table(self.events_table)} WHERE notification_id > %s "
            f"ORDER BY notification_id LIMIT {int(limit)}",
            (after,),
        )
        return [
            LogRow(row["id"], row["stream"], row["version"], row["topic"], bytes(row["state"]))
            for row in cursor.fetchall()
        ]

    def listen_appends(self) -> PgAppendListener:
        return PgAppendListener(self.config, self.recorder.channel_name)

    def purge_data_key_residue(self) -> None:
        # Dead tuples keep destroyed key bytes until the table is rewritten.
        self.maintenance(f"VACUUM FULL {self.table(KEYS_TABLE)}")

    def _rate_bucket_statement(self) -> str:
        avail = "LEAST(%(burst)s, rl.tokens + GREATEST(0, %(now)s - rl.updated) * %(rate)s + %(returned)s)"
        return (
            f"INSERT INTO {self.table(RATE_TABLE)} AS rl (bucket, tokens, updated, ok) "
            "VALUES (%(bucket)s, %(initial)s, %(now)s, %(want)s) "
            "ON CONFLICT (bucket) DO UPDATE SET "
            f"tokens = CASE WHEN {avail} >= %(want)s THEN {avail} - %(want)s "
            f"WHEN {avail} >= 1 THEN {avail} - 1 ELSE {avail} END, "
            f"ok = CASE WHEN {avail} >= %(want)s THEN %(want)s WHEN {avail} >= 1 THEN 1 ELSE 0 END, "
            "updated = %(now)s RETURNING tokens, ok"
        )
