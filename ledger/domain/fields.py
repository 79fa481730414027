"""The limits and field types every event payload is built from.

Each is one constraint in one place: the event schemas (`ledger.domain.events`), the request
models (`ledger.schemas`) and the surfaces that check paths and headers all name these, so a
limit changes once. Values are what `ledger.tlog.canonical` encodes exactly: no floats (scores
are decimal strings), bounded integers and sizes.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from ledger.tlog.canonical import MAX_SAFE_INTEGER

# --- limits ---------------------------------------------------------------
MAX_ENVELOPE_BYTES = 1024 * 1024
MAX_CHUNKS_PER_DOCUMENT = 5_000
MAX_SELECTED_ENTRIES = 200
MAX_FILTERS_APPLIED = 1_000
MAX_SEALED_TEXT_BYTES = 64 * 1024  # plaintext per sealed field
MAX_SEALED_CIPHERTEXT_B64 = MAX_SEALED_TEXT_BYTES * 3 // 2  # its base64 with the GCM tag, and room to spare
MAX_BUNDLE_YAML_CHARS = 256 * 1024
MAX_RETENTION_DAYS = 36_500
MAX_DEADLINE_MS = 600_000
MAX_AUTH_SCOPES = 32
MAX_SCORE_COMPONENTS = 16
MAX_TOP_K = 50
MAX_TARGET_ROOTS = 32
MAX_CONTENT_READ = 500  # entries read in plain per ContentRead (a page of the lists)
MAX_SEARCHED_WORDS = 8  # words of one question search (`q`, ledger/retrieval/question_words.py)

MAX_IDENTIFIER_CHARS = 128

SYSTEM_TENANT = "_ledger"

# --- scalar types -----------------------------------------------------------
TenantId = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")]
EnvelopeTenantId = Annotated[str, StringConstraints(pattern=r"^(_ledger|[a-z0-9][a-z0-9_-]{0,62})$")]
# Ids of documents, chunks, receipts, holds, actors, runs, traces: also what the API
# accepts in paths and correlation headers (one pattern, used everywhere).
IDENTIFIER_CHARS = "A-Za-z0-9._:@-"
IDENTIFIER_PATTERN = rf"^[A-Za-z0-9][{IDENTIFIER_CHARS}]{{0,{MAX_IDENTIFIER_CHARS - 1}}}$"
Identifier = Annotated[str, StringConstraints(pattern=IDENTIFIER_PATTERN)]
Hex64 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
Base64 = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9+/]*={0,2}$")]
KeyId = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{16}$")]
Timestamp = Annotated[str, StringConstraints(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$")]
Decimal = Annotated[str, StringConstraints(pattern=r"^-?\d{1,12}(\.\d{1,9})?$")]
# A score an external engine gave, as the decimal text it carried: a double's shortest form
# can take more places than the ledger's own 9, or an exponent (`1e-05`).
SCORE_PATTERN = r"^-?\d{1,17}(\.\d{1,24})?([eE][-+]?\d{1,3})?$"
ScoreDecimal = Annotated[str, StringConstraints(pattern=SCORE_PATTERN)]
# Paths are metadata, not document text, but still bounded and free of control characters.
SourcePath = Annotated[str, StringConstraints(min_length=1, max_length=1024, pattern=r"^[^\x00-\x1f\x7f]+$")]
SafeInt = Annotated[int, Field(ge=0, le=MAX_SAFE_INTEGER)]
KeyRef = Annotated[
    str,
    StringConstraints(
        pattern=rf"^(tenant|document|subject|expiry)/[{IDENTIFIER_CHARS}]{{1,{MAX_IDENTIFIER_CHARS}}}"
        rf"(/[{IDENTIFIER_CHARS}]{{1,160}})?$"
    ),
]

RetentionDays = Annotated[int, Field(ge=1, le=MAX_RETENTION_DAYS)]
DeadlineMs = Annotated[int, Field(ge=1, le=MAX_DEADLINE_MS)]

Sensitivity = Literal["public", "internal", "restricted"]
RemovalReason = Literal["source_deleted", "withdrawn"]
RuleOrigin = Literal["source", "front_matter", "default"]
ScoreComponentName = Literal[
    "bm25",
    "title_boost",
    "heading_boost",
    "filename_boost",
    "position",
    "policy",
    "external",
    "file_bm25",
    "change_log",
]
FilterAction = Literal["deny", "redact", "allow", "downrank", "boost"]
RetrievalStatus = Literal["ok", "no_hit", "denied", "timeout", "error"]
ScrubReason = Literal["retention_expired", "governance_scrub", "erasure_request"]
