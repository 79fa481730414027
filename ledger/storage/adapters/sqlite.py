"""The embedded backend: one SQLite file, writers serialised by SQLite itself."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, ClassVar, Literal
from uuid import UUID

from eventsourcing import persistence
from eventsourcing.persistence import IntegrityError, StoredEvent

from ledger.storage.adapters.base import StoreAdapter
from ledger.storage.adapters.core import EventStoreApp, LogRow, driver_error
from ledger.storage.adapters.side_tables import RATE_TABLE
from ledger.storage.adapters.sqlite_pool import install_pool

# Primary result codes of a file that cannot be written or read now (it may be later):
# PERM, BUSY, LOCKED, NOMEM, READONLY, IOERR, FULL, CANTOPEN, PROTOCOL. Not SQLITE_ERROR
# ("no such table": the statement or the schema is wrong) nor CORRUPT (evidence).
_TRANSIENT_CODES = frozenset({3, 5, 6, 7, 8, 10, 13, 14, 15})


def _ensure_wal(database: Path, wait_s: float = 30.0) -> None:
    """Put the file in WAL mode (persistent) before eventsourcing opens it: switching needs
    an exclusive lock, and two processes opening a new store at once would otherwise race
    for it ("database is locked" is not retried by SQLite's busy handler there)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with contextlib.closing(sqlite3.connect(database, timeout=wait_s)) as conn:
                mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
                if str(mode).lower() != "wal":
                    conn.execute("PRAGMA journal_mode=WAL")
                return
        except sqlite3.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class SQLiteAdapter(StoreAdapter):
    name: ClassVar[Literal["sqlite", "postgres"]] = "sqlite"
    clustered_table: ClassVar[str] = " WITHOUT ROWID"
    blob: ClassVar[str] = "BLOB"
    real: ClassVar[str] = "REAL"
    # eventsourcing's SQLite datastore turns sqlite3.IntegrityError into its own.
    duplicate_errors: ClassVar[tuple[type[Exception], ...]] = (IntegrityError,)
    # eventsourcing wraps driver errors raised inside its transactions in its own classes:
    # "database is locked", "attempt to write a readonly database", "database or disk is
    # full", "disk I/O error"; a connection that cannot be opened is its InterfaceError.
    transient_errors: ClassVar[tuple[type[Exception], ...]] = (
        sqlite3.OperationalError,
        persistence.OperationalError,
        persistence.InterfaceError,
    )
    scale_out: ClassVar[bool] = False

    @classmethod
    def transient(cls, exc: BaseException) -> bool | None:
        driver = driver_error(exc, sqlite3.Error)
        if driver is None:
            return None
        code = getattr(driver, "sqlite_errorcode", None)
        if code is None:  # not from the library (e.g. a closed connection)
            return isinstance(driver, sqlite3.OperationalError)
        return code & 0xFF in _TRANSIENT_CODES

    def _open_app(self) -> EventStoreApp:
        data_dir = self.config.data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        data_dir.chmod(0o700)
        database = self.config.sqlite_path
        if not database.exists():
            # SQLite gives its -wal and -shm files the database file's mode: create it 0600.
            with contextlib.suppress(FileExistsError):  # another process just did
                os.close(os.open(database, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        database.chmod(0o600)
        _ensure_wal(database)
        app = EventStoreApp(env=self.env)
        # Connections kept and with a statement cache; each overwrites freed pages, so shredded
        # key bytes do not linger in the file (`sqlite_pool`).
        recorder: Any = app.recorder
        install_pool(recorder.datastore)
        return app

    def _pooled_connection(self, *, commit: bool) -> AbstractContextManager[Any]:
        return self.recorder.datastore.get_connection(commit=commit)  # type: ignore[no-any-return]

    def _transaction_on(self, connection: Any, *, commit: bool) -> AbstractContextManager[Any]:
        return connection.transaction(commit=commit)  # type: ignore[no-any-return]

    def table(self, name: str) -> str:
        return name

    def sql(self, statement: str) -> str:
        return statement

    def rowcount(self, cursor: Any) -> int:
        # eventsourcing wraps sqlite3's cursor; the wrapper has no rowcount.
        inner = getattr(cursor, "sqlite_cursor", cursor)
        return int(inner.rowcount)

    @contextmanager
    def ddl_guard(self) -> Iterator[None]:
        """An exclusive lock on a file beside the database, held across the DDL transaction.

        SQLite's own write lock is not enough: the transaction reads first (the schema version),
        and a deferred transaction that must then upgrade to write while another process writes
        fails at once with "database is locked" (SQLite skips its busy wait there, to avoid a
        deadlock). Two processes opening a new store together raced exactly so."""
        path = self.config.data_dir / "ledger.sqlite.lock"
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            yield  # a directory we cannot write to: the store's own open reports it
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def maintenance(self, statement: str) -> None:
        with self.recorder.datastore.get_connection(commit=True) as conn:
            conn.cursor().execute(statement)

    def insert_log(self, cursor: Any, stored: Sequence[StoredEvent]) -> list[int]:
        # The transaction already holds SQLite's write lock: rowids are in commit order.
        return [int(i) for i in self.recorder._insert_events(cursor, stored)]

    def stream_key(self, stream_id: UUID) -> str:
        return stream_id.hex

    def stream_param(self, stream_id: UUID) -> object:
        return stream_id.hex

    @contextmanager
    def relaxed_transaction(self) -> Iterator[Any]:
        """`synchronous=NORMAL` for this commit (WAL mode: no fsync per commit, still safe
        from corruption). It cannot change inside a transaction, so the pool's transaction
        is ended, the setting changed around our own, and restored before the connection
        goes back to the pool."""
        with self.transaction(commit=True) as cursor:
            connection = cursor.sqlite_cursor.connection
            cursor.execute("COMMIT")
            cursor.execute("PRAGMA synchronous")
            prior = int(cursor.fetchone()[0])
            try:
                if prior > 1:
                    cursor.execute("PRAGMA synchronous=NORMAL")
                cursor.execute("BEGIN")
                yield cursor
                cursor.execute("COMMIT")
            finally:
                if connection.in_transaction:
                    connection.rollback()
                cursor.execute(f"PRAGMA synchronous={prior}")
                cursor.execute("BEGIN")  # the pool's commit on the way out ends this empty one

    def table_exists(self, cursor: Any, name: str) -> bool:
        cursor.execute("SELECT 1 AS one FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
        return cursor.fetchone() is not None

    def log_page(self, cursor: Any, after: int, limit: int) -> list[LogRow]:
        cursor.execute(
            "SELECT rowid AS id, originator_id AS stream, originator_version AS version, topic, state "
            f"FROM {self.events_table} WHERE rowid > ? ORDER BY rowid LIMIT {int(limit)}",
            (after,),
        )
        return [
            LogRow(row["id"], row["stream"], row["version"], row["topic"], bytes(row["state"]))
            for row in cursor.fetchall()
        ]

    def purge_data_key_residue(self) -> None:
        # The WAL still holds old page images (with key bytes) until a checkpoint.
        self.maintenance("PRAGMA wal_checkpoint(TRUNCATE)")

    def _rate_bucket_statement(self) -> str:
        avail = "min(:burst, tokens + max(0, :now - updated) * :rate + :returned)"
        return (
            f"INSERT INTO {self.table(RATE_TABLE)} (bucket, tokens, updated, ok) "
            "VALUES (:bucket, :initial, :now, :want) "
            "ON CONFLICT (bucket) DO UPDATE SET "
            f"tokens = CASE WHEN {avail} >= :want THEN {avail} - :want "
            f"WHEN {avail} >= 1 THEN {avail} - 1 ELSE {avail} END, "
            f"ok = CASE WHEN {avail} >= :want THEN :want WHEN {avail} >= 1 THEN 1 ELSE 0 END, "
            "updated = :now RETURNING tokens, ok"
        )
