"""The store adapter contract: every primitive the ledger needs from its database.

Why one class per backend: SQLite and PostgreSQL differ in placeholders, column
types, how a notification id comes back from an insert, how a cursor reports
its row count, how space is reclaimed, and how a multi-process DDL race is
avoided. Before, each caller branched on the dialect; now each difference has
exactly one home (`ledger/storage/adapters/sqlite.py`, `ledger/storage/adapters/postgres.py`)
and `tests/test_store_contract.py` runs the same behavioural suite against
both, as `eventsourcing` does for its recorders.

SQL that is the same text on both backends is written once here, in the base
class, through `sql()` and `table()`; a backend overrides only what differs.
Table names are constants, never input; every value is a bound parameter.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, NamedTuple, Protocol
from uuid import UUID

from eventsourcing import persistence
from eventsourcing.application import Application
from eventsourcing.persistence import StoredEvent

from ledger.config import LedgerConfig

KEYS_TABLE = "citeledger_data_keys"
IDEMPOTENCY_TABLE = "citeledger_idempotency"
CLAIMS_TABLE = "citeledger_document_claims"
RATE_TABLE = "citeledger_api_rate_limits"
TRACKING_TABLE = "citeledger_projection_tracking"

# `find` reads idempotency records in chunks so one statement never binds too many parameters.
_IDEMPOTENCY_CHUNK = 500


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


@dataclass(frozen=True)
class DataKeyRow:
    """A data key as stored: `wrapped` is None once destroyed (or for a tombstone)."""

    tenant_id: str
    wrapped: bytes | None
    destroyed: bool


@dataclass(frozen=True)
class IdempotencyRow:
    """One recorded answer: the request fingerprint and the response it got."""

    tenant_id: str
    idem_key: str
    fingerprint: str
    status_code: int
    response: bytes


@dataclass(frozen=True)
class IdempotencyRecord:
    """What a write records with its entries (inserted in the entries' transaction)."""

    tenant_id: str
    idem_key: str
    fingerprint: str
    status_code: int
    response: bytes
    position: int
    created_at: float


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


class StoreAdapter(ABC):
    """One open database: eventsourcing's recorder plus the ledger's side tables."""

    name: ClassVar[Literal["sqlite", "postgres"]]
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
        self._bucket_sql = self._rate_bucket_statement()

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
        try:
            with self._pooled_connection(commit=commit) as connection:
                try:
                    with self._transaction_on(connection, commit=commit) as cursor:
                        yield cursor
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
        """The transaction that appends log entries (and what commits with them)."""
        return self.transaction(commit=True)

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

    # -- data keys (crypto-shredding; never in the log) -------------------------
    def data_keys_ddl(self) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS {self.table(KEYS_TABLE)} ("
            "key_ref TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, "
            f"wrapped {self.blob}, created_at TEXT NOT NULL, "
            # scrub_position: where the RetentionScrubbed entry recording this
            # destruction sits; NULL until recorded, so a crash in between is redone.
            "destroyed_at TEXT, destroy_reason TEXT, scrub_position BIGINT)"
        ]

    def data_key_get(self, key_ref: str) -> DataKeyRow | None:
        """The stored key, or None when the ref was never created nor tombstoned."""
        with self.transaction(commit=False) as cursor:
            cursor.execute(
                self.sql(
                    f"SELECT tenant_id, wrapped, destroyed_at FROM {self.table(KEYS_TABLE)} WHERE key_ref=?"
                ),
                (key_ref,),
            )
            row = cursor.fetchone()
        if row is None:
            return None
        wrapped = None if row["wrapped"] is None else bytes(row["wrapped"])
        return DataKeyRow(row["tenant_id"], wrapped, row["destroyed_at"] is not None)

    def data_keys_get_many(self, key_refs: Sequence[str]) -> dict[str, DataKeyRow]:
        """`data_key_get` for many refs at once; refs never created nor tombstoned are absent."""
        return {
            row["key_ref"]: DataKeyRow(
                row["tenant_id"],
                None if row["wrapped"] is None else bytes(row["wrapped"]),
                row["destroyed_at"] is not None,
            )
            for row in self._key_rows("key_ref, tenant_id, wrapped, destroyed_at", "", key_refs)
        }

    def data_key_destructions(self, key_refs: Sequence[str]) -> dict[str, tuple[str, str]]:
        """(destroyed_at, reason) of the destroyed refs among `key_refs` (live or unknown: absent)."""
        rows = self._key_rows(
            "key_ref, destroyed_at, destroy_reason", "destroyed_at IS NOT NULL AND ", key_refs
        )
        return {row["key_ref"]: (str(row["destroyed_at"]), str(row["destroy_reason"] or "")) for row in rows}

    def _key_rows(self, columns: str, condition: str, key_refs: Sequence[str]) -> list[Any]:
        """Rows of the key table for `key_refs` (each once), 500 refs a statement."""
        rows: list[Any] = []
        refs = list(dict.fromkeys(key_refs))
        for start in range(0, len(refs), 500):
            part = refs[start : start + 500]
            with self.transaction(commit=False) as cursor:
                cursor.execute(
                    self.sql(  # `columns` and `condition` are this module's constants, never input
                        f"SELECT {columns} FROM {self.table(KEYS_TABLE)} "
                        f"WHERE {condition}key_ref IN ({', '.join('?' * len(part))})"
                    ),
                    tuple(part),
                )
                rows.extend(cursor.fetchall())
        return rows

    def data_key_create(self, key_ref: str, tenant_id: str, wrapped: bytes, created_at: str) -> bool:
        """Store a new key unless the ref exists (live, destroyed or tombstoned: a
        concurrent creator won, or the ref was shredded). True when this call stored it."""
        with self.transaction(commit=True) as cursor:
            cursor.execute(
                self.sql(
                    f"INSERT INTO {self.table(KEYS_TABLE)} (key_ref, tenant_id, wrapped, created_at) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT (key_ref) DO NOTHING"
                ),
                (key_ref, tenant_id, wrapped, created_at),
            )
            return self.rowcount(cursor) == 1

    def data_keys_create_many(self, rows: Sequence[tuple[str, str, bytes]], created_at: str) -> None:
        """`data_key_create` for many (key_ref, tenant_id, wrapped) in one transaction.

        Its commit does not wait for the disk (`relaxed_transaction`): the keys are made for
        entries about to be appended, and the append's own commit, which waits for the disk,
        makes them durable too (SQLite's WAL and PostgreSQL's WAL are written in order, and a
        synced commit syncs everything before it). A power cut before that append loses the
        keys and the unacknowledged append alike; nothing durable was ever sealed under them."""
        with self.relaxed_transaction() as cursor:
            cursor.executemany(
                self.sql(
                    f"INSERT INTO {self.table(KEYS_TABLE)} (key_ref, tenant_id, wrapped, created_at) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT (key_ref) DO NOTHING"
                ),
                [(key_ref, tenant_id, wrapped, created_at) for key_ref, tenant_id, wrapped in rows],
            )

    def data_key_destroy(self, key_ref: str, tenant_id: str, reason: str, now: str) -> bool:
        """Shred a key; a ref never used gets a tombstone so it can never be created
        later. False when it was already destroyed (idempotent)."""
        table = self.table(KEYS_TABLE)
        with self.transaction(commit=True) as cursor:
            cursor.execute(
                self.sql(
                    f"INSERT INTO {table} "
                    "(key_ref, tenant_id, wrapped, created_at, destroyed_at, destroy_reason) "
                    "VALUES (?, ?, NULL, ?, ?, ?) ON CONFLICT (key_ref) DO NOTHING"
                ),
                (key_ref, tenant_id, now, now, reason),
            )
            created_tombstone = self.rowcount(cursor)
            cursor.execute(
                self.sql(
                    f"UPDATE {table} SET wrapped=NULL, destroyed_at=?, destroy_reason=? "
                    "WHERE key_ref=? AND tenant_id=? AND destroyed_at IS NULL"
                ),
                (now, reason, key_ref, tenant_id),
            )
            return bool(created_tombstone or self.rowcount(cursor))

    def data_keys_unrecorded(self, tenant_id: str | None = None) -> list[tuple[str, str, str]]:
        """(key_ref, tenant_id, reason) destroyed but not yet recorded in the log."""
        statement = (
            f"SELECT key_ref, tenant_id, destroy_reason FROM {self.table(KEYS_TABLE)} "
            "WHERE destroyed_at IS NOT NULL AND scrub_position IS NULL"
        )
        params: tuple[str, ...] = ()
        if tenant_id is not None:
            statement += " AND tenant_id=?"
            params = (tenant_id,)
        with self.transaction(commit=False) as cursor:
            cursor.execute(self.sql(statement + " ORDER BY key_ref"), params)
            return [(row["key_ref"], row["tenant_id"], row["destroy_reason"]) for row in cursor.fetchall()]

    def data_keys_mark_recorded(self, key_refs: Sequence[str], position: int) -> None:
        """Note where the log records these destructions (first recording wins)."""
        with self.transaction(commit=True) as cursor:
            for key_ref in key_refs:
                cursor.execute(
                    self.sql(
                        f"UPDATE {self.table(KEYS_TABLE)} SET scrub_position=? "
                        "WHERE key_ref=? AND scrub_position IS NULL"
                    ),
                    (position, key_ref),
                )

    def data_keys_live(self, tenant_id: str, prefix: str, below: str, limit: int = 10_000) -> list[str]:
        """Undestroyed key refs of a tenant with `prefix <= ref < below`, in order (bounded)."""
        with self.transaction(commit=False) as cursor:
            cursor.execute(
                self.sql(
                    f"SELECT key_ref FROM {self.table(KEYS_TABLE)} "
                    "WHERE tenant_id=? AND destroyed_at IS NULL AND key_ref >= ? AND key_ref < ? "
                    f"ORDER BY key_ref LIMIT {int(limit)}"
                ),
                (tenant_id, prefix, below),
            )
            return [row["key_ref"] for row in cursor.fetchall()]

    @abstractmethod
    def purge_data_key_residue(self) -> None:
        """Push destroyed key bytes out of the database's files (old page images,
        dead tuples), so shredding is not undone by reading the raw files."""

    # -- idempotency records -----------------------------------------------------
    def idempotency_ddl(self) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS {self.table(IDEMPOTENCY_TABLE)} ("
            "tenant_id TEXT NOT NULL, idem_key TEXT NOT NULL, fingerprint TEXT NOT NULL, "
            f"status_code INTEGER NOT NULL, response {self.blob} NOT NULL, position BIGINT NOT NULL, "
            f"created_at {self.real} NOT NULL, PRIMARY KEY (tenant_id, idem_key))"
        ]

    def idempotency_find(
        self, cursor: Any, keys: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], IdempotencyRow]:
        """Recorded answers for (tenant, key) pairs, read through the caller's transaction."""
        found: dict[tuple[str, str], IdempotencyRow] = {}
        by_tenant: dict[str, list[str]] = {}
        for tenant_id, key in sorted(set(keys)):
            by_tenant.setdefault(tenant_id, []).append(key)
        table = self.table(IDEMPOTENCY_TABLE)
        # One IN list per tenant (an index range on the primary key): an OR of hundreds of
        # (tenant, key) pairs is planned slowly by PostgreSQL and grew with the table.
        for tenant_id, wanted in by_tenant.items():
            for start in range(0, len(wanted), _IDEMPOTENCY_CHUNK):
                part = wanted[start : start + _IDEMPOTENCY_CHUNK]
                cursor.execute(
                    self.sql(
                        "SELECT tenant_id, idem_key, fingerprint, status_code, response "
                        f"FROM {table} WHERE tenant_id=? AND idem_key IN ({', '.join('?' * len(part))})"
                    ),
                    (tenant_id, *part),
                )
                for row in cursor.fetchall():
                    found[(row["tenant_id"], row["idem_key"])] = IdempotencyRow(
                        tenant_id=row["tenant_id"],
                        idem_key=row["idem_key"],
                        fingerprint=row["fingerprint"],
                        status_code=int(row["status_code"]),
                        response=bytes(row["response"]),
                    )
        return found

    def idempotency_lookup(self, tenant_id: str, key: str) -> IdempotencyRow | None:
        """One recorded answer, in a read-only transaction (the fast path before any work)."""
        with self.transaction(commit=False) as cursor:
            return self.idempotency_find(cursor, [(tenant_id, key)]).get((tenant_id, key))

    def idempotency_insert(self, cursor: Any, records: Sequence[IdempotencyRecord]) -> None:
        """Record answers inside the transaction that inserts their entries; a key
        already recorded raises one of `duplicate_errors`."""
        if not records:
            return
        cursor.executemany(
            self.sql(
                f"INSERT INTO {self.table(IDEMPOTENCY_TABLE)} "
                "(tenant_id, idem_key, fingerprint, status_code, response, position, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)"
            ),
            [
                (r.tenant_id, r.idem_key, r.fingerprint, r.status_code, r.response, r.position, r.created_at)
                for r in records
            ],
        )

    # -- the rate-limit bucket ---------------------------------------------------
    def rate_bucket_ddl(self) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS {self.table(RATE_TABLE)} ("
            f"bucket TEXT PRIMARY KEY, tokens {self.real} NOT NULL, updated {self.real} NOT NULL, "
            "ok INTEGER NOT NULL)"
        ]

    @abstractmethod
    def _rate_bucket_statement(self) -> str:
        """The one atomic upsert that refills, credits and draws (named parameters:
        bucket, burst, initial, now, rate, returned, want; returns tokens, ok).
        `ok` holds how many tokens the last draw granted (0 = refused); the tokens
        available are those refilled since `updated` plus the credited lease
        remainder, capped at the burst."""

    def rate_bucket_take(
        self, bucket: str, *, want: int, returned: int, rate: float, burst: int, now: float
    ) -> tuple[float, int]:
        """Credit `returned`, refill since the last draw, then draw `want` tokens (or 1
        when fewer are left): (tokens left, tokens granted; 0 = refused). A new bucket
        starts full. One statement, so every process draws from the same bucket."""
        params = {
            "bucket": bucket,
            "burst": float(burst),
            "initial": float(burst) - want,
            "now": now,
            "rate": rate,
            "returned": float(max(0, returned)),
            "want": want,
        }
        with self.transaction(commit=True) as cursor:
            cursor.execute(self._bucket_sql, params)
            row = cursor.fetchone()
        return float(row["tokens"]), int(row["ok"])

    # -- document claims ------------------------------------------------------------
    def claims_ddl(self) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS {self.table(CLAIMS_TABLE)} (tenant_id TEXT NOT NULL, "
            "document_id TEXT NOT NULL, owner TEXT NOT NULL, claimed_at DOUBLE PRECISION NOT NULL, "
            "PRIMARY KEY (tenant_id, document_id))"
        ]

    def claim_take(
        self, tenant_id: str, document_id: str, owner: str, *, now: float, stale_before: float
    ) -> bool:
        """Take the claim if it is free or its holder's claim is older than
        `stale_before` (a holder that died); the primary key is the arbiter."""
        return bool(self.claim_take_many(tenant_id, [document_id], owner, now=now, stale_before=stale_before))

    def claim_take_many(
        self, tenant_id: str, document_ids: Sequence[str], owner: str, *, now: float, stale_before: float
    ) -> list[str]:
        """`claim_take` for many documents in one transaction; the ids taken."""
        taken = []
        with self.transaction(commit=True) as cursor:
            for document_id in document_ids:
                cursor.execute(
                    self.sql(
                        f"INSERT INTO {self.table(CLAIMS_TABLE)} AS c "
                        "(tenant_id, document_id, owner, claimed_at) "
                        "VALUES (?, ?, ?, ?) ON CONFLICT (tenant_id, document_id) DO UPDATE SET "
                        "owner=excluded.owner, claimed_at=excluded.claimed_at WHERE c.claimed_at < ?"
                    ),
                    (tenant_id, document_id, owner, now, stale_before),
                )
                if self.rowcount(cursor) == 1:
                    taken.append(document_id)
        return taken

    def claim_release_many(self, tenant_id: str, document_ids: Sequence[str], owner: str) -> None:
        with self.transaction(commit=True) as cursor:
            cursor.executemany(
                self.sql(
                    f"DELETE FROM {self.table(CLAIMS_TABLE)} WHERE tenant_id=? AND document_id=? AND owner=?"
                ),
                [(tenant_id, document_id, owner) for document_id in document_ids],
            )

    def claim_release(self, tenant_id: str, document_id: str, owner: str) -> None:
        """Give the claim up, only if `owner` still holds it (not after a takeover)."""
        self.claim_release_many(tenant_id, [document_id], owner)

    # -- projection tracking ---------------------------------------------------------
    def tracking_ddl(self) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS {self.table(TRACKING_TABLE)} ("
            "projection TEXT PRIMARY KEY, version INTEGER NOT NULL, notification_id BIGINT NOT NULL, "
            "position BIGINT NOT NULL, status TEXT NOT NULL, error TEXT, failed_position BIGINT, "
            "updated_at TEXT NOT NULL)"
        ]

    def tracking_advance(
        self,
        cursor: Any,
        projection: str,
        *,
        expected_notification_id: int,
        notification_id: int,
        position: int,
        updated_at: str,
    ) -> bool:
        """Compare-and-set, in the caller's transaction: move a running projection's
        tracking from `expected_notification_id` to `notification_id`. False when
        another runner moved it first (or it stopped). Run it before any read-model
        write: it takes the write lock, so the race is decided before work is done."""
        cursor.execute(
            self.sql(
                f"UPDATE {self.table(TRACKING_TABLE)} SET notification_id=?, position=?, updated_at=? "
                "WHERE projection=? AND notification_id=? AND status='running'"
            ),
            (notification_id, position, updated_at, projection, expected_notification_id),
        )
        return self.rowcount(cursor) == 1
