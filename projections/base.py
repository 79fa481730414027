"""What a read model is: tables, and a pure function from log events to rows.

A projection applies a batch of events inside a transaction the runner owns
(the same one that moves its tracking record), so it never commits on its
own. It raises `UnappliableEvent` for anything it cannot apply; the runner
then rolls the batch back and stops that projection at that position.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
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
class DigestColumn:
    """A column in the digest; `as_of` says how to read it as of log position p.

    `as_of`: None (immutable), "position" (value only if its position column <= p),
    or "exclude" (left out of as-of digests: ciphertext that a later scrub nulls).
    """

    name: str
    as_of: str | None = None
    position_column: str | None = None


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
    columns: tuple[DigestColumn, ...]
    position_column: str  # rows with this column <= p exist as of p


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

    @abstractmethod
    def table_ddl(self, store: Store) -> list[str]:
        """CREATE TABLE IF NOT EXISTS statements."""

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

    def truncate_statements(self, store: Store) -> list[str]:
        return [f"DELETE FROM {store.table(spec.name)}" for spec in self.tables]


def payload_field(event: RecordedEvent, name: str) -> Any:
    try:
        return event.payload[name]
    except (KeyError, TypeError):
        raise UnappliableEvent(event.position, f"{event.type} payload lacks {name!r}") from None
