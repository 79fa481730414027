"""State digests: one SHA-256 per read model over its rows in key order.

Rows are encoded as JSON arrays of plain values (text, integers, null), so a
SQLite and a PostgreSQL read model with the same content have the same digest.
`as_of=p` digests the model as it stood after position p (the prefix of the
log of size p), leaving out ciphertext columns that a later scrub erases.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from ledger.storage.store import Store
from projections.base import EarlierVersion, Projection, TableSpec

_PAGE = 5_000


def _select(spec: TableSpec, store: Store, as_of: int | None, after: tuple[Any, ...] | None) -> str:
    columns = [*spec.key, *(c.name for c in spec.digest_columns if c.name not in spec.key)]
    conditions = []
    if as_of is not None:
        conditions.append(f"{spec.position_column} <= ?")
    if after is not None:
        conditions.append(f"({', '.join(spec.key)}) > ({', '.join('?' * len(spec.key))})")
    where = f"WHERE {' AND '.join(conditions)} " if conditions else ""
    return store.sql(
        f"SELECT {', '.join(columns)} FROM {store.table(spec.name)} {where}"
        f"ORDER BY {', '.join(spec.key)} LIMIT {_PAGE}"
    )


def table_rows(spec: TableSpec, store: Store, as_of: int | None) -> Iterator[Any]:
    """The digested columns of the table's rows (as of the position), in key order."""
    after: tuple[Any, ...] | None = None
    while True:
        params: list[Any] = []
        if as_of is not None:
            params.append(as_of)
        if after is not None:
            params.extend(after)
        with store.transaction(commit=False) as cursor:
            cursor.execute(_select(spec, store, as_of, after), params)
            rows = cursor.fetchall()
        yield from rows
        if len(rows) < _PAGE:
            return
        after = tuple(rows[-1][k] for k in spec.key)


def _encode(spec: TableSpec, row: Any, as_of: int | None) -> bytes:
    values: list[Any] = []
    for column in spec.digest_columns:
        value = row[column.name]
        if as_of is not None and column.as_of == "exclude":
            continue
        if as_of is not None and column.as_of == "position":
            at = row[column.position_column or column.name]
            if at is None or at > as_of:
                value = None
        values.append(value)
    return orjson.dumps(values) + b"\n"


def table_digest(spec: TableSpec, store: Store, *, as_of: int | None = None) -> hashlib._Hash:
    return _rows_digest(spec, table_rows(spec, store, as_of), as_of)


def _rows_digest(spec: TableSpec, rows: Iterable[Any], as_of: int | None) -> hashlib._Hash:
    digest = hashlib.sha256(f"{spec.name}\n".encode())
    for row in rows:
        digest.update(_encode(spec, row, as_of))
    return digest


def projection_digest(projection: Projection, store: Store, *, as_of: int | None = None) -> str:
    """SHA-256 (hex) of every table of one read model."""
    outer = hashlib.sha256(f"{projection.name}@{projection.version}\n".encode())
    for spec in projection.tables:
        outer.update(table_digest(spec, store, as_of=as_of).digest())
    return outer.hexdigest()


def earlier_digest(
    projection: Projection, earlier: EarlierVersion, model: Store, log: Store, *, as_of: int | None = None
) -> str:
    """The digest that `earlier`, a version `projection` replaced, would have of the same log:
    its rows derived from the current version's in `model` and from `log`'s entries, digested
    as that version's code digested its own (`{name}@{version}`, its columns in its order)."""
    outer = hashlib.sha256(f"{projection.name}@{earlier.version}\n".encode())
    for spec in earlier.tables:
        outer.update(_rows_digest(spec, earlier.rows(spec, model, log, as_of), as_of).digest())
    return outer.hexdigest()


def digests(projections: list[Projection], store: Store, *, as_of: int | None = None) -> dict[str, str]:
    return {
        p.name: projection_digest(p, store, as_of=as_of)
        for p in projections
        if as_of is None or p.as_of_digest
    }
