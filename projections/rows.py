"""The rows of the read models (written by `store.adapter.insert_many`): one
mapping from a row to the dataclass a query answers with: each field
is read from the column of the same name, `int` and `bool` fields converted (the drivers
answer integers and booleans in their own types), the rest as stored; a field whose
value is derived (JSON text, an as-of view, another column name) is given by the caller.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, TypeVar

import orjson

T = TypeVar("T")
_CONVERT: dict[Any, Any] = {int: int, bool: bool}


_COLUMNS: dict[type[Any], tuple[tuple[str, Any], ...]] = {}


def _columns(cls: type[Any]) -> tuple[tuple[str, Any], ...]:
    """(field, converter or None) of a dataclass, worked out once per class."""
    found = _COLUMNS.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        found = tuple((f.name, _CONVERT.get(hints[f.name])) for f in dataclasses.fields(cls))
        _COLUMNS[cls] = found
    return found


def from_row(cls: type[T], row: Any, **derived: Any) -> T:
    """`cls` from `row` (a mapping by column name); `derived` gives the fields not read as is."""
    values = dict(derived)
    for name, convert in _columns(cls):
        if name not in values:
            value = row[name]
            values[name] = convert(value) if convert is not None and value is not None else value
    return cls(**values)


def json_column(text: str | None) -> Any:
    """A JSON text column; SQL NULL reads as None."""
    return None if text is None else orjson.loads(text)
