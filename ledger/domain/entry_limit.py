"""The one bound every new log entry keeps: at most 65,535 bytes, the largest entry a C2SP
`tlog-tiles` entry bundle can carry (each entry is prefixed by a big-endian uint16 length),
so every bundle of the log can be served to a standard tiles client.

`prepare` checks a draft against it before anything is written, counting its envelope at
the largest position, time and key id it could be signed with; `sign_entry` checks the
signed bytes again, so no entry over the bound is ever appended whatever its type.
Entries of ledgers written before the bound may be larger: they still verify, and their
bundles answer 422 `entry_too_large`."""

from __future__ import annotations

import orjson

from ledger.domain.payloads import EventRejected
from ledger.tlog.canonical import MAX_SAFE_INTEGER

MAX_ENTRY_BYTES = 0xFFFF  # tlog-tiles: uint16 length prefix
LIMIT_TEXT = f"a log entry is at most {MAX_ENTRY_BYTES:,} bytes (C2SP tlog-tiles)"

# The envelope members whose size does not depend on the draft, at their largest.
_FIXED_MEMBERS = {
    "v": 1,
    "position": MAX_SAFE_INTEGER,
    "prev_hash": "0" * 64,
    "recorded_at": "0000-00-00T00:00:00.000000Z",
    "kid": "0" * 16,
    "signature": "A" * 88,
}
_FIXED_BYTES = len(orjson.dumps(_FIXED_MEMBERS))


class EntryTooLarge(EventRejected):
    """A draft whose signed entry would exceed `MAX_ENTRY_BYTES`: refused, nothing written."""

    def __init__(self, size: int) -> None:
        super().__init__("payload", f"entry of {size:,} bytes; {LIMIT_TEXT}")
        self.size = size


def envelope_bytes(
    payload_bytes: int,
    *,
    event_id: str,
    event_type: str,
    tenant_id: str,
    actor: str,
    run_id: str | None,
    trace_id: str | None,
) -> int:
    """An upper bound of the signed entry's size for a payload of `payload_bytes`."""
    variable = orjson.dumps(
        {
            "event_id": event_id,
            "type": event_type,
            "tenant_id": tenant_id,
            "actor": actor,
            "run_id": run_id,
            "trace_id": trace_id,
            "payload": None,
        }
    )
    # Two objects joined into one: drop one pair of braces, add one comma; `null` -> payload.
    return _FIXED_BYTES + len(variable) - 1 + payload_bytes - len(b"null")


def check_size(size: int) -> None:
    if size > MAX_ENTRY_BYTES:
        raise EntryTooLarge(size)
