"""The adapter contract's core: one open database, its connections and transactions, the shape
of its statements (`sql()`, `table()`), how its errors are classified, and the log's own rows.
The side tables' statements build on it (`data_keys`, `side_tables`); `base.StoreAdapter` is
all of them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, ClassVar, Literal, NamedTuple, Protocol
from uuid import UUID

from eventsourcing import persistence
from eventsourcing.application import Application
from eventsourcing.persistence import StoredEvent

from ledger.config import LedgerConfig


class StoreUnavailable(persistence.OperationalError):
    """The database cannot serve this statement now (read-only, full, unreachable, restarting,
    busy): the same request may succeed later. The connection it failed on is not reused."""


def caused_by(exc: BaseException, errors: tuple[type[BaseException], ...]) -> bool:
    """Whether `exc`, or an exception it was raised from, is one of `errors` (eventsourcing
    re-raises driver errors as its own classes, `from` the driver's)."""
    current: BaseException | None = exc
    for _ in range(8):
        if current is None:
            return False
        if isinstance(current, errors):
            return True
        current = current.__cause__
    return False


def driver_error(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    """The first exception of `kind` in `exc`'s `from` chain (the driver's own error)."""
    current: BaseException | None = exc
    for _ in range(8):
        if current is None or isinstance(current, kind):
            return current
        current = current.__cause__
    return None


def generic_transient(exc: BaseException) -> bool:
    """For an error no driver raised: eventsourcing's pool (no connection to be had in
    time, a connection that could not be opened) or an already classified failure."""
    return caused_by(exc, (StoreUnavailable, persistence.OperationalError, persistence.InterfaceError))


def _first_line(exc: BaseException) -> str:
    """The driver's own words, first line only (no statement, no parameters), bounded."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:200]


class EventStoreApp(Application[UUID]):
    """Only used for its infrastructure: env-driven recorder construction."""

    name = "citeledger"


class LogRow(NamedTuple):
    """One row of the events table in commit order; `stream` is in the backend's own
    text form (compare with `StoreAdapter.stream_key`, no UUID parsing per row). A
    tuple, not a dataclass: a full verification builds one per log row."""

    notification_id: int
    stream: str
    version: int
    topic: str
    state: bytes


class AppendListener(Protocol):
    """Wakes a follower when the log may have grown (PostgreSQL LISTEN/NOTIFY)."""

    def wait(self, timeout: float) -> None: ...

    def close(self) -> None: ...


class AdapterCore(ABC):
    """One open database: eventsourcing's recorder, connections, statement shape and the log."""

    name: ClassVar[Literal["sqlite", "postgres"]]
    # Ends a CREATE TABLE whose rows live in their primary key's b-tree (SQLite: WITHOUT
    # ROWID; a PostgreSQL primary key is a covering index already): posting lists.
    clustered_table: ClassVar[str] = ""
    # Read models of a write applied under one savepoint with one tracking update for all
    # (`projections.write_apply`): it saves PostgreSQL's round trips (apply 0.55x), while on
    # SQLite one savepoint per projection measured cheaper (single commits 0.83x the CPU).
    read_models_together: ClassVar[bool] = False
    #: DDL type of a byte string column.
    blob: ClassVar[str]
    #: DDL type of a float column (time stamps as epoch seconds, token counts).
    real: ClassVar[str]
    #: What a write raises when a unique key (a log position, an idempotency key) is taken.
    duplicate_errors: ClassVar[tuple[type[Exception], ...]]
    #: What a lost connection or a busy database raises: worth a retry, not a failure
    #: (for `except` clauses; `transient` decides precisely, from the driver's error).
    transient_errors: ClassVar[tuple[type[Exception], ...]]
    #: Whether several processes may serve one store (API workers, projection workers);
    #: without it the embedded default runs one process that also applies read models.
    scale_out: ClassVar[bool]

    def __init__(self, config: LedgerConfig) -> None:
        self.config = config
        self.env = config.eventsourcing_env()
        self.app = self._open_app()
        self.recorder: Any = self.app.recorder
        self.schema: str = self.env.get("POSTGRES_SCHEMA", "public")
        self.events_table: str = getattr(self.recorder, "events_table_name", "stored_events")

    # -- connection and statement shape ---------------------------------------
    @abstractmethod
    def _open_app(self) -> EventStoreApp:
        """Build eventsourcing's application (and with it its tables) on this backend."""

    @abstractmethod
    def table(self, name: str) -> str:
        """The table name as SQL must spell it (schema-qualified where there are schemas)."""

    @abstractmethod
    def sql(self, statement: str) -> str:
        """A statement written with `?` placeholders, in this backend's paramstyle."""

    @abstractmethod
    def rowcount(self, cursor: Any) -> int:
        """Rows touched by the cursor's last statement."""

    @abstractmethod
    def ddl_guard(self) -> AbstractContextManager[None]:
        """Held while creating tables, so processes starting together do not race."""

    @abstractmethod
    def maintenance(self, statement: str) -> None:
        """Run a statement that must run outside a transaction (VACUUM, wal_checkpoint)."""

    @contextmanager
    def transaction(self, *, commit: bool) -> Iterator[Any]:
        """A cursor in one transaction on eventsourcing's pool (committed when `commit`).

        A transient failure (see `transient`) comes out as `StoreUnavailable`, and
        the connection it happened on is closed instead of going back to the pool: a
        connection can stay broken after the fault is gone (SQLite opened read-only, a
        PostgreSQL session of a read-only server), and a pool that kept it would fail
        every write that draws it until a restart."""
        with self._guarded_connection(commit=commit) as connection:
            with self._transaction_on(connection, commit=commit) as cursor:
                yield cursor

    def read_rows(self, statement: str, params: tuple[Any, ...]) -> list[Any]:
        """The rows of ONE read-only statement (in the backend's placeholders), run outside an
        explicit transaction: alone, it reads one consistent snapshot in autocommit mode, without
        a BEGIN and a ROLLBACK around it (two statements, or two round trips, per read)."""
        with self._guarded_connection(commit=False) as connection, connection.cursor() as cursor:
            cursor.execute(statement, params)
            return list(cursor.fetchall())

    @contextmanager
    def _guarded_connection(self, *, commit: bool) -> Iterator[Any]:
        """A pooled connection, with `transaction`'s handling of transient failures."""
        try:
            with self._pooled_connection(commit=commit) as connection:
                try:
                    yield connection
                except Exception as exc:
                    if self.unavailable(exc):
                        connection.close()  # the pool drops a closed connection
                    raise
        except StoreUnavailable:
            raise
        except Exception as exc:
            if not self.unavailable(exc):
                raise
            raise StoreUnavailable(_first_line(exc)) from exc

    @classmethod
    @abstractmethod
    def transient(cls, exc: BaseException) -> bool | None:
        """Whether this backend's driver error in `exc`'s chain says the database cannot
        serve now (read-only, full, unreachable, restarting, busy) rather than that the
        statement is wrong; None when no error of this driver is in the chain."""

    @classmethod
    def unavailable(cls, exc: BaseException) -> bool:
        verdict = cls.transient(exc)
        return generic_transient(exc) if verdict is None else verdict

    @abstractmethod
    def _pooled_connection(self, *, commit: bool) -> AbstractContextManager[Any]:
        """A connection from eventsourcing's pool, returned to it afterwards."""

    @abstractmethod
    def _transaction_on(self, connection: Any, *, commit: bool) -> AbstractContextManager[Any]:
        """A cursor in one transaction on `connection` (committed when `commit`)."""

    def create_tables(self, *statements: str) -> None:
        """Idempotent DDL in one transaction, under `ddl_guard`."""
        with self.ddl_guard(), self.transaction(commit=True) as cursor:
            for statement in statements:
                cursor.execute(statement)

    def close(self) -> None:
        self.app.close()

    # -- the log ---------------------------------------------------------------
    @abstractmethod
    def insert_log(self, cursor: Any, stored: Sequence[StoredEvent]) -> list[int]:
        """Insert log rows through the caller's transaction (so whatever must be atomic
        with them shares it); returns their notification ids, increasing. A taken
        (stream, version) raises one of `duplicate_errors` (at the latest on commit)."""

    # Whether `append_transaction` makes its holder the only writer of log positions.
    serialises_appends: ClassVar[bool] = False

    def append_transaction(self) -> AbstractContextManager[Any]:
        """The transaction that appends log entries (and what commits with them). Where
        `serialises_appends`, the sequencer is taken inside it by `take_sequencer`, as late
        as possible: what need not be serial is done in it before that call."""
        return self.transaction(commit=True)

    def await_sequencer(self, cursor: Any) -> None:
        """Wait until no writer holds the sequencer, without taking it (a head read while one
        commits is stale before it is signed at). Only a hint: `take_sequencer` checks."""
        return None

    def take_sequencer(
        self, cursor: Any, stream_id: UUID, head: int, stored: Sequence[StoredEvent]
    ) -> list[int] | None:
        """Become the only writer of log positions until the append transaction ends and, if
        nothing was appended to `stream_id` after `head` meanwhile, insert `stored` (signed at
        the positions after `head`): their notification ids. None, with nothing inserted, when
        the head moved: the caller catches up, signs again and inserts by `insert_log`. Where
        the database serialises writers itself there is nothing to take."""
        return self.insert_log(cursor, stored) if stored else []

    def read_stream(self, cursor: Any, stream_id: UUID, after: int, limit: int) -> list[tuple[int, bytes]]:
        """(version, state) of `stream_id` after `after`, in order, in the caller's transaction."""
        cursor.execute(
            self.sql(
                f"SELECT originator_version, state FROM {self.table(self.events_table)} "
                "WHERE originator_id = ? AND originator_version > ? ORDER BY originator_version LIMIT ?"
            ),
            (self.stream_param(stream_id), after, limit),
        )
        return [(int(row["originator_version"]), bytes(row["state"])) for row in cursor.fetchall()]

    @abstractmethod
    def relaxed_transaction(self) -> AbstractContextManager[Any]:
        """A write transaction whose commit need not wait for the disk (read models only:
        whatever it writes can be re-derived from the log)."""

    # From this many rows a batch goes in by `copy_rows` (a backend with a bulk path sets it).
    copy_from_rows: ClassVar[int | None] = None

    def insert_many(
        self,
        cursor: Any,
        table: str,
        columns: Sequence[str],
        rows: Sequence[tuple[Any, ...]],
        first_wins_on: str | None = None,
    ) -> None:
        """Insert `rows` (values in `columns` order; none: nothing) into `table` (a resolved
        name), in order; with `first_wins_on` (a unique key's columns) a row whose key is
        taken is skipped."""
        if not rows:
            return
        if self.copy_from_rows is not None and len(rows) >= self.copy_from_rows:
            self.copy_rows(cursor, table, ", ".join(columns), rows, first_wins_on)
            return
        conflict = f" ON CONFLICT ({first_wins_on}) DO NOTHING" if first_wins_on else ""
        marks = ", ".join("?" * len(columns))
        cursor.executemany(
            self.sql(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}){conflict}"), rows
        )

    def copy_rows(
        self, cursor: Any, table: str, names: str, rows: Sequence[tuple[Any, ...]], first_wins_on: str | None
    ) -> None:
        """`insert_many` by the backend's bulk path (`names`: the columns, joined)."""
        raise NotImplementedError

    def empty_tables(self, tables: Sequence[str]) -> list[str]:
        """Statements that remove every row of `tables` (resolved names) in the caller's
        transaction. SQLite's DELETE without WHERE is its truncate (and under `secure_delete`
        it must overwrite every page whatever the statement)."""
        return [f"DELETE FROM {table}" for table in tables]

    def index_exists(self, name: str) -> bool:
        """Whether an index exists, checked without a lock (False: create it idempotently)."""
        return False

    @abstractmethod
    def table_exists(self, cursor: Any, name: str) -> bool:
        """Whether this store has the table `name`, read from the catalog through `cursor`
        (the schema version's migrations: ledger/storage/adapters/migrations.py)."""

    @abstractmethod
    def stream_param(self, stream_id: UUID) -> object:
        """`stream_id` as a query parameter for the events table's originator_id."""

    @abstractmethod
    def stream_key(self, stream_id: UUID) -> str:
        """How `LogRow.stream` spells `stream_id` on this backend."""

    @abstractmethod
    def log_page(self, cursor: Any, after: int, limit: int) -> list[LogRow]:
        """Up to `limit` rows of the events table with notification id > `after`, in
        order (plain SQL: a full verification reads every row, and eventsourcing's
        Notification objects cost more than the check itself)."""

    def listen_appends(self) -> AppendListener | None:
        """A listener woken on every log insert, or None when the backend has no
        notifications (the follower then polls)."""
        return None
