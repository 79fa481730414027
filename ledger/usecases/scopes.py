"""Token scopes: what a caller may ask of the use cases.

`SCOPES` are the ones something checks (an HTTP route guard, or the
read-back of restricted chunks). `RESERVED_SCOPES` are checked by nothing
yet (no use case writes raw events), but earlier token files
may hold them, so they stay loadable and grant nothing.
"""

from __future__ import annotations

RESTRICTED_SCOPE = "knowledge.restricted.read"
# Plain reads of sealed fields (queries, snippets, heading paths); every such read is recorded.
CONTENT_SCOPE = "audit.content"
SCOPES = (
    "ingest.write",
    "retrieval.write",
    "audit.read",
    CONTENT_SCOPE,
    RESTRICTED_SCOPE,
    "replay.run",
    "admin",
)
RESERVED_SCOPES = ("events.write",)
KNOWN_SCOPES = frozenset(SCOPES + RESERVED_SCOPES)
