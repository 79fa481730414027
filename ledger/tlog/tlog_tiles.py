"""C2SP `tlog-tiles` paths and entry bundles (pure): `tile/<L>/<N>[.p/<W>]` and
`tile/entries/<N>[.p/<W>]`, with N in the spec's zero-padded `x001/x234/067` form."""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass

TILE_WIDTH = 256
MAX_LEVEL = 63
MAX_BUNDLED_ENTRY = 0xFFFF  # entries are uint16 length-prefixed
_LEVEL_RE = re.compile(r"0|[1-9][0-9]?")
_WIDTH_RE = re.compile(r"[1-9][0-9]{0,2}")
_INDEX_ELEMENT_RE = re.compile(r"[0-9]{3}")


@dataclass(frozen=True)
class TilePath:
    level: int | None  # None: an entry bundle
    index: int
    width: int  # TILE_WIDTH for a full tile


def encode_index(index: int) -> str:
    """1234067 -> x001/x234/067 (all but the last element start with x)."""
    if index < 0:
        raise ValueError("tile index must not be negative")
    elements = []
    while True:
        elements.append(f"{index % 1000:03d}")
        index //= 1000
        if index == 0:
            break
    return "/".join([*("x" + e for e in reversed(elements[1:])), elements[0]])


def tile_path(level: int | None, index: int, width: int = TILE_WIDTH) -> str:
    head = "entries" if level is None else str(level)
    suffix = "" if width == TILE_WIDTH else f".p/{width}"
    return f"tile/{head}/{encode_index(index)}{suffix}"


def parse_tile_path(path: str) -> TilePath | None:
    """The tile a `tile/...`-relative path names, or None when it is not one (in its
    canonical form only: one URL per resource, so caches never hold two copies)."""
    parts = path.split("/")
    if len(parts) < 2 or len(parts) > 12:
        return None
    head, rest = parts[0], parts[1:]
    if head == "entries":
        level = None
    elif _LEVEL_RE.fullmatch(head) and int(head) <= MAX_LEVEL:
        level = int(head)
    else:
        return None
    width = TILE_WIDTH
    if len(rest) >= 2 and rest[-2].endswith(".p"):
        if not _WIDTH_RE.fullmatch(rest[-1]) or int(rest[-1]) >= TILE_WIDTH:
            return None
        width = int(rest[-1])
        rest = [*rest[:-2], rest[-2][: -len(".p")]]
    *upper, last = rest
    if not _INDEX_ELEMENT_RE.fullmatch(last):
        return None
    digits = []
    for element in upper:
        if not element.startswith("x") or not _INDEX_ELEMENT_RE.fullmatch(element[1:]):
            return None
        digits.append(element[1:])
    index = int("".join([*digits, last]))
    if encode_index(index) != "/".join(rest):
        return None  # e.g. x000/067 for 67
    return TilePath(level, index, width)


def entry_bundle(entries: Iterable[bytes]) -> bytes:
    """Entries as big-endian uint16 length-prefixed records; ValueError when one is too
    long for the format (the spec's 64 KiB limit)."""
    out = bytearray()
    for entry in entries:
        if len(entry) > MAX_BUNDLED_ENTRY:
            raise ValueError(f"an entry of {len(entry)} bytes does not fit an entry bundle (64 KiB max)")
        out += struct.pack(">H", len(entry)) + entry
    return bytes(out)
