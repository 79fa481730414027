"""Token scopes: what a caller may ask of the use cases.

`SCOPES` are the ones something checks (an HTTP route guard, or the
read-back of restricted chunks). `RESERVED_SCOPES` are checked by nothing
yet (no use case writes raw events or runs replays), but earlier token files
may hold them, so they stay loadable and grant nothing.
"""

from __future__ import annotations

RESTRICTED_SCOPE = "knowledge.restricted.read"
SCOPES = (
    "ingest.write",
    "retrieval.write",
    "audit.read",
    RESTRICTED_SCOPE,
    "admin",
)
RESERVED_SCOPES = ("events.write", "replay.run")
KNOWN_SCOPES = frozenset(SCOPES + RESERVED_SCOPES)
