"""What a read model is: tables, and a pure function from log events to rows.

A projection applies a batch of events inside a transaction the runner owns
(the same one that moves its tracking record), so it never commits on its
own. It raises `UnappliableEvent` for anything it cannot apply; the runner
then rolls the batch back and stops that projection at that position.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

from ledger.domain.entries import RecordedEvent
from ledger.domain.payloads import PAYLOAD_MODELS
from ledger.storage.store import Store

KNOWN_EVENT_TYPES = frozenset(PAYLOAD_MODELS)


class UnappliableEvent(RuntimeError):
    """An event a projection cannot apply (unknown type, malformed payload, a bug)."""

    def __init__(self, position: int, message: str) -> None:
        super().__init__(f"position {position}: {message}")
        self.position = position


@dataclass(frozen=True)
class Column:
    """A read-model column, declared once: its SQL type, and how the state digest reads it.

    `as_of`: None (immutable), "position" (value only if its position column <= p),
    or "exclude" (left out of as-of digests: ciphertext that a later scrub nulls).
    `digest=False`: not in the digest at all (current-state models leave their key out).
    `inserted=False`: filled in later by an UPDATE, not by the batch insert.
    """

    name: str
    sql_type: str
    as_of: str | None = None
    position_column: str | None = None
    digest: bool = True
    inserted: bool = True


# The digest reads immutable columns first, then the excluded ones, then those read as of a position.
_DIGEST_ORDER = {None: 0, "exclude": 1, "position": 2}


@dataclass(frozen=True)
class IndexSpec:
    """A secondary index. `deferrable` ones serve queries only, so a rebuild drops
    them and creates them once at the end (bulk loading is much faster without);
    the others are used by the projection's own UPDATEs and always stay."""

    name: str
    table: str
    columns: str
    unique: bool = False
    deferrable: bool = True

    def create(self, store: Store) -> str:
        unique = "UNIQUE " if self.unique else ""
        return f"CREATE {unique}INDEX IF NOT EXISTS {self.name} ON {store.table(self.table)} ({self.columns})"

    def drop(self, store: Store) -> str:
        return f"DROP INDEX IF EXISTS {store.table(self.name)}"


@dataclass(frozen=True)
class TableSpec:
    name: str
    key: tuple[str, ...]
    columns: tuple[Column, ...]  # in table order
    position_column: str  # rows with this column <= p exist as of p

    @property
    def digest_columns(self) -> tuple[Column, ...]:
        """The digested columns, in digest order (stable within each kind)."""
        digested = [c for c in self.columns if c.digest]
        return tuple(sorted(digested, key=lambda c: _DIGEST_ORDER[c.as_of]))

    @property
    def insert_columns(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if c.inserted)

    def index(self, suffix: str, columns: str, *, unique: bool = False, deferrable: bool = True) -> IndexSpec:
        """An index on this table, named after it."""
        return IndexSpec(f"{self.name}_{suffix}", self.name, columns, unique, deferrable)

    def create(self, store: Store) -> str:
        columns = ", ".join(f"{c.name} {c.sql_type}" for c in self.columns)
        return (
            f"CREATE TABLE IF NOT EXISTS {store.table(self.name)} "
            f"({columns}, PRIMARY KEY ({', '.join(self.key)}))"
        )


@dataclass(frozen=True)
class EarlierVersion:
    """A version of a read model that the current one replaced, kept so that digests signed
    over it (projection checkpoints issued by earlier code) stay verifiable: its tables' shape
    (for the digest only, never created) and `rows(spec, model, log, as_of)`: that table's
    rows in key order as that version held them as of the position, derived from the current
    version's rows in the store `model` and the log of the store `log`."""

    version: int
    tables: tuple[TableSpec, ...]
    rows: Callable[[TableSpec, Store, Store, int | None], Iterable[Mapping[str, Any]]]


def declare_table(
    name: str,
    columns: str,
    *,
    key: tuple[str, ...],
    position_column: str,
    excluded: tuple[str, ...] = (),
    later: Mapping[str, str] | None = None,
    undigested: tuple[str, ...] = (),
    uninserted: tuple[str, ...] = (),
) -> TableSpec:
    """A table from its columns as SQL (`"name TYPE [NOT NULL], ..."`, in table order) and what
    the digest and the batch insert make of some of them: `excluded` from as-of digests; `later`
    (column -> its position column) filled in by an UPDATE and read as of that position;
    `undigested` left out of the digest; `uninserted` filled in by an UPDATE, digested as is."""
    later = dict(later or {})
    declared = []
    for part in columns.split(","):
        column, _, sql_type = part.strip().partition(" ")
        declared.append(
            Column(
                column,
                sql_type,
                as_of="position" if column in later else "exclude" if column in excluded else None,
                position_column=later.get(column),
                digest=column not in undigested,
                inserted=column not in later and column not in uninserted,
            )
        )
    unknown = {*key, *excluded, *later, *undigested, *uninserted} - {c.name for c in declared}
    if unknown:
        raise ValueError(f"{name}: no column {sorted(unknown)}")
    return TableSpec(name, key, tuple(declared), position_column)


def json_text(value: Any) -> str | None:
    """Compact, key-sorted JSON for a column (None stays SQL NULL)."""
    if value is None:
        return None
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


class Projection(ABC):
    """One read model. Subclasses list their tables and apply events in order."""

    name: ClassVar[str]
    version: ClassVar[int]  # bump when the table shape or the mapping changes: forces a rebuild
    tables: ClassVar[tuple[TableSpec, ...]]
    indexes: ClassVar[tuple[IndexSpec, ...]] = ()
    # False for current-state models (rows updated in place): no as-of digest exists for them.
    as_of_digest: ClassVar[bool] = True
    # Every version this one replaced, newest first: a checkpoint may have signed any of them.
    earlier_versions: ClassVar[tuple[EarlierVersion, ...]] = ()

    def table_ddl(self, store: Store) -> list[str]:
        """CREATE TABLE IF NOT EXISTS statements, from the tables' column declarations."""
        return [spec.create(store) for spec in self.tables]

    def ddl(self, store: Store) -> list[str]:
        return [*self.table_ddl(store), *(index.create(store) for index in self.indexes)]

    def deferred_index_drops(self, store: Store) -> list[str]:
        return [index.drop(store) for index in self.indexes if index.deferrable]

    @abstractmethod
    def apply(self, cursor: Any, store: Store, events: Sequence[RecordedEvent]) -> None:
        """Write the effect of `events` (in position order) through `cursor`."""

    def check_known(self, event: RecordedEvent) -> str:
        """The event's type, if this code knows it."""
        event_type = event.envelope["type"]
        if event_type not in KNOWN_EVENT_TYPES:
            raise UnappliableEvent(event.position, f"unknown event type {event_type!r}")
        return str(event_type)

    def drop_statements(self, store: Store) -> list[str]:
        return [f"DROP TABLE IF EXISTS {store.table(spec.name)}" for spec in self.tables]


def payload_field(event: RecordedEvent, name: str) -> Any:
    try:
        return event.payload[name]
    except (KeyError, TypeError):
        raise UnappliableEvent(event.position, f"{event.type} payload lacks {name!r}") from None


def close_rows(
    cursor: Any, store: Store, table: str, event: RecordedEvent, key: str, *, end: str, **also: Any
) -> None:
    """End at the event's position the rows of its tenant still open (`end` NULL) whose `key`
    column holds the payload's value of that name (first close wins); `also`: columns set with it."""
    extra = "".join(f", {column}=?" for column in also)
    cursor.execute(
        store.sql(
            f"UPDATE {store.table(table)} SET {end}=?{extra} WHERE tenant_id=? AND {key}=? AND {end} IS NULL"
        ),
        (event.position, *also.values(), event.tenant_id, payload_field(event, key)),
    )
