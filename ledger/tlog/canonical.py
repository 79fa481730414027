"""Canonical JSON (RFC 8785) for everything that is signed or hashed.

`rfc8785` is the reference encoder but canonicalises only ~20k events/s in
pure Python. orjson with sorted keys produces the same bytes for every value
our event schemas allow: no floats (scores travel as decimal strings), ASCII
object keys only (RFC 8785 sorts keys by UTF-16 code units, orjson by code
points; the two orders agree on ASCII), integers within +/-(2**53 - 1).
`tests/test_canonical.py` proves the equivalence with hypothesis over that
domain; `canonical_json` refuses anything outside it rather than guess.
"""

from __future__ import annotations

from typing import Any

import orjson
import rfc8785

MAX_SAFE_INTEGER = 2**53 - 1


class NotCanonicalisable(ValueError):
    """A value outside the domain on which the fast encoder is proven exact."""


def _check(value: Any, path: str) -> None:
    if isinstance(value, str) or value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            raise NotCanonicalisable(f"{path}: integer outside the I-JSON safe range")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str) or not key.isascii():
                raise NotCanonicalisable(f"{path}: object keys must be ASCII strings")
            _check(item, f"{path}.{key}")
        return
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]")
        return
    raise NotCanonicalisable(f"{path}: {type(value).__name__} is not allowed in signed JSON")


def canonical_json(value: Any, *, checked: bool = True) -> bytes:
    """RFC 8785 bytes of `value`.

    `checked=False` skips the domain walk for values that a pydantic event
    model has already validated (the hot append path).
    """
    if checked:
        _check(value, "$")
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def reference_canonical_json(value: Any) -> bytes:
    """The reference implementation, used by tests and `verify --strict`."""
    return bytes(rfc8785.dumps(value))
