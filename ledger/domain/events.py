"""Domain events: the payload schema of every event type, and the envelope.

Every field that can hold document text or personal data is a `Sealed`
value (see `ledger.writing.sealing`): the log, its signatures and its Merkle tree
only ever see ciphertext and a salted commitment, so crypto-shredding a data
key erases the text without breaking any signature.

Schemas admit only values that `ledger.tlog.canonical` encodes exactly: no floats
(scores are decimal strings), ASCII keys, bounded integers and sizes.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from ledger.domain.fields import (
    MAX_AUTH_SCOPES,
    MAX_BUNDLE_YAML_CHARS,
    MAX_CHUNKS_PER_DOCUMENT,
    MAX_CONTENT_READ,
    MAX_FILTERS_APPLIED,
    MAX_SCORE_COMPONENTS,
    MAX_SEALED_CIPHERTEXT_B64,
    MAX_SEARCHED_WORDS,
    MAX_SELECTED_ENTRIES,
    MAX_TARGET_ROOTS,
    MAX_TOP_K,
    Base64,
    DeadlineMs,
    Decimal,
    FilterAction,
    Hex64,
    Identifier,
    KeyId,
    KeyRef,
    RemovalReason,
    RetentionDays,
    RetrievalStatus,
    RuleOrigin,
    SafeInt,
    ScoreComponentName,
    ScoreDecimal,
    ScrubReason,
    Sensitivity,
    SourcePath,
    TenantId,
    Timestamp,
)
from ledger.tlog.canonical import MAX_SAFE_INTEGER


class Schema(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Sealed(Schema):
    """AES-256-GCM ciphertext under data keys kept outside the log.

    With `extra_key_refs` the AES key is derived (HKDF) from every listed data
    key, so destroying any one of them shreds the text: a citation snapshot is
    sealed under its document's key *and* its retention-expiry key.
    """

    alg: Literal["A256GCM"]
    key_ref: KeyRef
    extra_key_refs: Annotated[list[KeyRef], Field(max_length=3)] = []
    nonce: Annotated[Base64, StringConstraints(min_length=16, max_length=16)]
    ciphertext: Annotated[Base64, StringConstraints(min_length=24, max_length=MAX_SEALED_CIPHERTEXT_B64)]
    commitment: Hex64


# --- payloads ----------------------------------------------------------------
class Locator(Schema):
    start_line: Annotated[int, Field(ge=1, le=10_000_000)]
    end_line: Annotated[int, Field(ge=1, le=10_000_000)]
    heading_path: Sealed | None = None


class Chunk(Schema):
    chunk_id: Identifier
    ordinal: Annotated[int, Field(ge=0, le=MAX_CHUNKS_PER_DOCUMENT)]
    locator: Locator
    text: Sealed


class DocumentVersionFields(Schema):
    """What every entry of a document version carries, its head and each continuation alike: what
    the read models key a chunk by (the version, its source, path, rules and sealed title), so
    every entry reads on its own."""

    document_id: Identifier
    version_id: Identifier
    version: Annotated[int, Field(ge=1, le=MAX_SAFE_INTEGER)]
    source: Identifier
    path: SourcePath
    title: Sealed | None = None
    content_sha256: Hex64
    sensitivity: Sensitivity
    retention_days: RetentionDays | None = None
    # Which rule set the sensitivity and the retention of a synced file (absent on documents
    # posted directly, and on those recorded before sources had rules).
    sensitivity_origin: RuleOrigin | None = None
    retention_origin: RuleOrigin | None = None


class DocumentIngested(DocumentVersionFields):
    supersedes_version_id: Identifier | None = None
    subject_id: Identifier | None = None
    chunks: Annotated[list[Chunk], Field(max_length=MAX_CHUNKS_PER_DOCUMENT)]
    # How many log entries the version takes: this one and `parts - 1` `DocumentContinued`
    # entries after it in the same commit (absent: the version is this entry alone).
    parts: Annotated[int, Field(ge=2, le=MAX_CHUNKS_PER_DOCUMENT)] | None = None


class DocumentContinued(DocumentVersionFields):
    """Further chunks of a document version too large for one entry (a C2SP tlog-tiles
    entry is at most 65,535 bytes): `part` 2..`parts` of the version its `DocumentIngested`
    head starts, in the same commit."""

    part: Annotated[int, Field(ge=2, le=MAX_CHUNKS_PER_DOCUMENT)]
    chunks: Annotated[list[Chunk], Field(min_length=1, max_length=MAX_CHUNKS_PER_DOCUMENT)]


# The entries that carry a document version's chunks.
DOCUMENT_CHUNK_TYPES = frozenset({"DocumentIngested", "DocumentContinued"})
# A head's lists that its continuations extend (`part` 2.. at the positions right after it).
CONTINUED_LISTS = ("chunks", "selected_entries", "filters_applied")
CONTINUATION_OF = {"DocumentContinued": "DocumentIngested", "RetrievalContinued": "RetrievalRecorded"}


class DocumentRemoved(Schema):
    document_id: Identifier
    reason: RemovalReason


class PolicyBundlePublished(Schema):
    policy_version: Identifier
    bundle_sha256: Hex64
    bundle_yaml: Annotated[str, StringConstraints(max_length=MAX_BUNDLE_YAML_CHARS)]


class TaskEnvelope(Schema):
    trace_id: Identifier | None = None
    task_id: Identifier | None = None
    deadline_ms: DeadlineMs | None = None
    auth_scope: Annotated[list[Identifier], Field(max_length=MAX_AUTH_SCOPES)] = []


class PolicySnapshot(Schema):
    """The policy in force when a retrieval ran; the null pair means 'no bundle active'."""

    bundle_hash: Hex64 | None
    bundle_yaml: Annotated[str, StringConstraints(max_length=MAX_BUNDLE_YAML_CHARS)] | None
    captured_at: Timestamp


class ScoreComponent(Schema):
    component: ScoreComponentName
    value: Decimal


class Span(Schema):
    """Character offsets [start, end) of a cited snippet within its chunk's text."""

    start: SafeInt
    end: SafeInt


class SelectedEntry(Schema):
    citation_id: Identifier
    document_id: Identifier
    version_id: Identifier | None = None
    chunk_id: Identifier
    # The cited document's source (absent from the signed JSON on entries recorded before
    # sources were named): the same path in two sources is two documents.
    source: Identifier | None = None
    path: SourcePath
    locator: Locator
    # Absent (omitted from the signed JSON) when the engine gave none: never invented.
    score: ScoreDecimal | None = None
    score_breakdown: Annotated[list[ScoreComponent], Field(max_length=MAX_SCORE_COMPONENTS)] = []
    explanation: Sealed | None = None
    snapshot: Sealed
    # Where the snippet occurs in the chunk the ledger holds (absent on entries recorded
    # before snippets were checked).
    snippet_span: Span | None = None
    sensitivity: Sensitivity
    expires_at: Timestamp | None = None


class UnverifiedCitation(Schema):
    """A document an external engine reported with neither a chunk the ledger holds nor text (an
    OTLP span's): kept, never dropped; `rank` from 1 in the engine's list, its own id if plain."""

    rank: Annotated[int, Field(ge=1, le=MAX_SELECTED_ENTRIES)]
    carried_id: Identifier | None = None
    score: ScoreDecimal | None = None
    reason: Literal["no_id_no_content", "unknown_id_no_content"]


class FilterApplied(Schema):
    rule_id: Identifier
    chunk_id: Identifier
    action: FilterAction


class SearchFilters(Schema):
    sensitivity: Annotated[list[Sensitivity], Field(max_length=3)] = []
    path_prefixes: Annotated[list[SourcePath], Field(max_length=MAX_TARGET_ROOTS)] = []


class SearchRequest(Schema):
    """What a search the ledger ran itself was asked (the query is the receipt's sealed
    `query`), and the log position whose corpus it ranked: enough to run it again on replay."""

    target_roots: Annotated[list[SourcePath], Field(max_length=MAX_TARGET_ROOTS)] = []
    # The target roots whose first segment named a source of the tenant when the search ran
    # (`source` or `source/folder`); absent on searches recorded before roots named sources.
    root_sources: Annotated[list[Identifier], Field(max_length=MAX_TARGET_ROOTS)] | None = None
    top_k: Annotated[int, Field(ge=1, le=MAX_TOP_K)]
    filters: SearchFilters = SearchFilters()
    corpus_position: SafeInt


class RetrievalRecorded(Schema):
    receipt_id: Identifier
    query: Sealed
    subject_id: Identifier | None = None
    task: TaskEnvelope
    engine: Annotated[
        str, StringConstraints(pattern=r"^(citeledger-bm25@\d{1,6}|external:[a-z0-9._-]{1,64})$")
    ]
    mode: Literal["live", "as_of_replay"]
    parent_receipt_id: Identifier | None = None
    # Absent (None here, omitted from the signed JSON) for legacy posts;
    # present with a null pair when no bundle was active.
    policy_snapshot: PolicySnapshot | None = None
    # Only on receipts of searches the ledger ran (`citeledger-bm25@N`); absent otherwise.
    search: SearchRequest | None = None
    selected_entries: Annotated[list[SelectedEntry], Field(max_length=MAX_SELECTED_ENTRIES)]
    filters_applied: Annotated[list[FilterApplied], Field(max_length=MAX_FILTERS_APPLIED)] = []
    context_hash: Hex64
    status: RetrievalStatus
    # Searches the ledger ran: how many live chunk versions the task's scopes could not see
    # (`ledger.usecases.visibility`), never which. Absent (omitted from the signed JSON) on
    # receipts recorded before that rule, which replay without it.
    withheld: SafeInt | None = None
    # How many log entries the receipt takes: this one and `parts - 1` `RetrievalContinued`
    # entries right after it (absent: this entry alone). `context_hash` covers them all.
    parts: Annotated[int, Field(ge=2, le=MAX_SELECTED_ENTRIES + MAX_FILTERS_APPLIED)] | None = None
    # Documents the engine reported that the ledger cannot check (absent: none).
    unverifiable: Annotated[list[UnverifiedCitation], Field(max_length=MAX_SELECTED_ENTRIES)] | None = None
    # The store the external engine searched, as it named it (an OTLP span's
    # `gen_ai.data_source.id`; absent: not named). Schema version 4.
    data_source: Identifier | None = None


class RetrievalContinued(Schema):
    """Further selected entries and filters of a receipt too large for one entry: `part`
    2..`parts` of the `RetrievalRecorded` head at the position `part - 1` before it. Read
    as one receipt: the head's lists, then each part's, in order."""

    receipt_id: Identifier
    part: Annotated[int, Field(ge=2, le=MAX_SELECTED_ENTRIES + MAX_FILTERS_APPLIED)]
    selected_entries: Annotated[list[SelectedEntry], Field(max_length=MAX_SELECTED_ENTRIES)] = []
    filters_applied: Annotated[list[FilterApplied], Field(max_length=MAX_FILTERS_APPLIED)] = []


class RetentionScrubbed(Schema):
    reason: ScrubReason
    key_refs: Annotated[list[KeyRef], Field(max_length=10_000)]
    document_ids: Annotated[list[Identifier], Field(max_length=10_000)] = []
    citation_ids: Annotated[list[Identifier], Field(max_length=100_000)] = []


class LegalHoldPlaced(Schema):
    """Documents and data subjects that neither retention nor erasure may scrub."""

    hold_id: Identifier
    document_ids: Annotated[list[Identifier], Field(max_length=10_000)] = []
    subject_ids: Annotated[list[Identifier], Field(max_length=10_000)] = []
    legal_basis: Sealed  # free text that may name people: sealed like any other


class LegalHoldReleased(Schema):
    hold_id: Identifier
    reason: Sealed | None = None


class AccessDenied(Schema):
    resource_type: Literal["citation", "document", "receipt", "chunk"]
    resource_id: Identifier
    required_scope: Identifier
    reason: Identifier


class ContentRead(Schema):
    """Sealed fields (queries, snippets, heading paths) read in plain by a holder of
    `audit.content`: which entries, by id only; one entry per page read. A receipt's
    citations are named by its receipt id; `citation_ids` lists citations read alone.

    A question search (`q`, schema version 4) is a read too: `searched_words` says how many
    words it named (never the words), `positions` the receipts it found on the page (none
    when it found none)."""

    positions: Annotated[list[SafeInt], Field(max_length=MAX_CONTENT_READ)]
    receipt_ids: Annotated[list[Identifier], Field(max_length=MAX_CONTENT_READ)] = []
    citation_ids: Annotated[list[Identifier], Field(max_length=MAX_CONTENT_READ)] = []
    searched_words: Annotated[int, Field(ge=1, le=MAX_SEARCHED_WORDS)] | None = None

    @model_validator(mode="after")
    def _reads_something(self) -> ContentRead:
        if not self.positions and self.searched_words is None:
            raise ValueError("positions must name at least one entry (or the read is a question search)")
        return self


class ReplaySummary(Schema):
    context_hash_changed: bool
    entries_added: SafeInt
    entries_removed: SafeInt
    entries_common: SafeInt
    filters_added: SafeInt
    filters_removed: SafeInt


class ReplayRecorded(Schema):
    original_receipt_id: Identifier
    replay_receipt_id: Identifier | None
    summary: ReplaySummary
    integrity_finding: Identifier | None = None


class SigningKeyRotated(Schema):
    """Introduces a signing key. The envelope is signed by the previous key
    (by the new key itself for the genesis event); `possession_signature` is
    the new key's signature over its own introduction."""

    new_kid: KeyId
    public_key: Annotated[Base64, StringConstraints(min_length=44, max_length=44)]
    previous_kid: KeyId | None
    possession_signature: Annotated[Base64, StringConstraints(min_length=88, max_length=88)]


class IntegrityFindingRecord(Schema):
    kind: Annotated[str, StringConstraints(pattern=r"^[a-z_]{1,64}$")]
    evidence: Annotated[str, StringConstraints(min_length=1, max_length=400)]
    message: Annotated[str, StringConstraints(min_length=1, max_length=1000)]


class IntegrityRepaired(Schema):
    """An operator's answer to evidence that the log was cut back or rewritten
    (`ledger.writing.integrity`): what was found and what was done. Written only by
    `citeledger repair`."""

    findings: Annotated[list[IntegrityFindingRecord], Field(min_length=1, max_length=64)]
    actions: Annotated[list[Annotated[str, StringConstraints(max_length=1000)]], Field(max_length=8)]
    log_size: Annotated[int, Field(ge=0)]


class TokenIssued(Schema):
    """A bearer token was made: who may act from now on (never its secret nor its hash).
    A tenant token's entry is its tenant's; an operator token's is the ledger's own."""

    token_id: Identifier
    kind: Literal["tenant", "operator"]
    tenant: TenantId | None
    scopes: Annotated[list[Identifier], Field(max_length=MAX_AUTH_SCOPES)]
    expires_at: Timestamp | None


class TokenRevoked(Schema):
    """A bearer token was revoked: from this entry on it authenticates nothing."""

    token_id: Identifier
    kind: Literal["tenant", "operator"]
    tenant: TenantId | None


class ReportIssued(Schema):
    """A record-keeping report was issued (`ledger.usecases.report`): the SHA-256 of its
    manifest, the period it covers and the checkpoints bounding it, so the report itself is
    in the record (and in the next report)."""

    report_id: Identifier
    period_from: Timestamp
    period_to: Timestamp
    start_size: SafeInt
    end_size: SafeInt
    manifest_sha256: Hex64
