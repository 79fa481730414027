"""The success bodies of the HTTP API, as pydantic models: what `/schema/openapi.json`
promises each 2xx answer holds. Documentation only — routes still build plain dicts (the
use cases return plain values) — and open (`extra` allowed), so an added field never breaks
a client; `tests/test_api_schemathesis.py` checks every answer against them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ledger.domain.events import IDENTIFIER_PATTERN

Id = str


class Answer(BaseModel):
    """What every success body carries beside its own fields."""

    model_config = ConfigDict(extra="allow")
    run_id: str
    trace_id: str
    server_version: str
    policy_version: str = Field(description="The tenant's live policy version, or a fixed marker when none")


class Entry(BaseModel):
    """Where a write's entry is in the log and who signed it."""

    model_config = ConfigDict(extra="allow")
    position: int = Field(ge=1)
    event_id: str | None = None
    kid: str | None = None
    signature: str | None = None


class ChunkOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    chunk_id: Id = Field(pattern=IDENTIFIER_PATTERN)
    ordinal: int = Field(ge=0)
    start_line: int = Field(ge=1)
    end_line: int = Field(ge=1)


class DocumentOut(Answer):
    """A recorded document version (201), or the one already recorded with this text (200, `dedup`)."""

    document_id: Id
    version: int = Field(ge=1)
    version_id: Id
    position: int = Field(ge=1)
    supersedes_version_id: Id | None = None
    content_sha256: str | None = None
    chunks: list[ChunkOut] = []
    dedup: bool = False


class DocumentRemovedOut(Answer):
    document_id: Id
    removed: bool
    position: int | None = None
    dedup: bool = False


class Locator(BaseModel):
    model_config = ConfigDict(extra="allow")
    start_line: int = Field(ge=1)
    end_line: int = Field(ge=1)


class RecordedCitation(BaseModel):
    model_config = ConfigDict(extra="allow")
    citation_id: Id
    document_id: Id
    chunk_id: Id
    path: str
    locator: Locator


class ReceiptRecordedOut(Answer):
    """The receipt of a recorded retrieval, with the citation id minted for each selected entry."""

    receipt_id: Id
    citation_ids: list[Id]
    citations: list[RecordedCitation]
    position: int = Field(ge=1)
    recorded_at: str
    context_hash: str
    status: str
    dedup: bool = False


class BatchItemError(BaseModel):
    code: str
    message: str
    retryable: bool


class BatchItemOut(BaseModel):
    """One item's own answer: its receipt (201 recorded, 200 `dedup`) or its refusal."""

    model_config = ConfigDict(extra="allow")
    index: int = Field(ge=0)
    http_status: int
    receipt_id: Id | None = None
    error: BatchItemError | None = None


class RetrievalBatchOut(Answer):
    """Per-item results of a batch; the accepted items were recorded in one transaction."""

    results: list[BatchItemOut]
    recorded: int = Field(ge=0)
    dedup: int = Field(ge=0)
    refused: int = Field(ge=0)


class PolicyOut(Answer):
    policy_version: str
    bundle_sha256: str
    position: int = Field(ge=1)
    dedup: bool = False


class ErasureTarget(BaseModel):
    model_config = ConfigDict(extra="allow")
    kind: Literal["document", "subject"]
    id: Id
    document_ids: list[Id]


class ErasureOut(Answer):
    erased: ErasureTarget
    already_erased: bool
    position: int | None


class HoldOut(Answer):
    hold_id: Id
    position: int = Field(ge=1)


class HoldReleasedOut(Answer):
    hold_id: Id
    released: bool
    already_released: bool
    position: int | None = None


class ReceiptCitation(BaseModel):
    model_config = ConfigDict(extra="allow")
    citation_id: Id
    document_id: Id
    version_id: Id | None
    chunk_id: Id
    source: Id | None = Field(
        default=None,
        description="The source of the cited document (null: recorded before sources were named)",
    )
    path: str
    locator: Locator
    score: str
    sensitivity: str
    expires_at: str | None


class ReceiptOut(Answer):
    """One receipt: its facts, its citations, and the signed entry itself (`event`)."""

    receipt_id: Id
    position: int = Field(ge=1)
    recorded_at: str
    actor: str
    engine: str
    mode: str
    status: str
    parent_receipt_id: Id | None
    context_hash: str
    policy_bundle_hash: str | None
    citations: list[ReceiptCitation]
    kid: str
    signature: str
    event: dict[str, Any]
    continued_events: list[dict[str, Any]] | None = Field(
        default=None,
        description="A receipt too large for one log entry (65,535 bytes): its `RetrievalContinued` "
        "entries after `event`, whose selected entries and filters follow the head's",
    )
    content: dict[str, Any] | None = Field(
        default=None, description="With `content=plain` (audit.content): the sealed fields in plain"
    )


class BundleOut(Answer):
    """A portable bundle: the entry, its inclusion proof, the checkpoint, the key chain and the
    cited documents' entries with their proofs — what `citeledger verify-bundle` checks offline."""

    bundle: dict[str, Any]


class ReplayOut(Answer):
    """A replay under the receipt's frozen policy: integrity, data drift, policy drift (201); 200
    with `replay_receipt_id: null` when recording the replay failed (the diff is still the answer)."""

    original_receipt_id: Id
    replay_receipt_id: Id | None
    integrity: str  # ok | mismatch | unverifiable | not_applicable
    integrity_reason: dict[str, Any] | None = None  # unverifiable: its cause and the erased document ids
    diff: dict[str, Any]
    dedup: bool = False


class WitnessesOut(BaseModel):
    configured: list[str]
    cosigned_by: list[str]


class ReceiptVerificationOut(Answer):
    """Whether a receipt is intact: its signature, its inclusion proof against the latest
    signed checkpoint, that checkpoint's signature and the key chain; `problem` names the
    first part that fails (null when intact)."""

    receipt_id: Id
    position: int = Field(ge=1)
    intact: bool
    problem: str | None
    kid: str
    checkpoint: Checkpoint
    inclusion_proof: InclusionProof
    # The configured witnesses and which of them cosigned the checkpoint (None: not checked, as
    # over `citeledger mcp --url`, where the ledger's witness setting is not known).
    witnesses: WitnessesOut | None = None


class ReceiptSummary(BaseModel):
    model_config = ConfigDict(extra="allow")
    receipt_id: Id
    position: int = Field(ge=1)
    recorded_at: str
    engine: str
    mode: str
    status: str
    task_id: Id | None = None
    citation_count: int = Field(ge=0)
    citation_ids: list[Id]
    content: dict[str, Any] | None = Field(
        default=None, description="With `content=plain` (audit.content): the sealed fields in plain"
    )


class ReceiptPage(Answer):
    receipts: list[ReceiptSummary]
    next_cursor: str | None


class EventPage(Answer):
    events: list[dict[str, Any]]
    next_cursor: str | None
    content: dict[str, Any] | None = Field(
        default=None, description="With `content=plain` (audit.content): sealed fields in plain, by position"
    )


class EventOut(Answer):
    position: int = Field(ge=1)
    leaf_hash: str
    event: dict[str, Any]
    content: dict[str, Any] | None = Field(
        default=None, description="With `content=plain` (audit.content): the sealed fields in plain"
    )


class Checkpoint(BaseModel):
    model_config = ConfigDict(extra="allow")
    seq: int = Field(ge=1)
    tree_size: int = Field(ge=1)
    root: str
    issued_at: str
    kid: str
    note: str


class InclusionProof(BaseModel):
    model_config = ConfigDict(extra="allow")
    leaf_index: int = Field(ge=0)
    tree_size: int = Field(ge=1)
    hashes: list[str]


class InclusionProofOut(Answer):
    position: int = Field(ge=1)
    leaf_hash: str
    tree_size: int = Field(ge=1)
    root: str
    inclusion_proof: InclusionProof
    checkpoint: Checkpoint | None


class CheckpointOut(Answer):
    checkpoint: Checkpoint
    origin: str


class ConsistencyOut(Answer):
    from_: int = Field(alias="from", ge=1)
    to: int = Field(ge=1)
    old_root: str
    new_root: str
    hashes: list[str]
    from_checkpoint: Checkpoint | None
    to_checkpoint: Checkpoint | None


class PublicKey(BaseModel):
    model_config = ConfigDict(extra="allow")
    kid: str
    public_key: str
    algorithm: Literal["Ed25519"]
    previous_kid: str | None
    introduced_at_position: int = Field(ge=1)
    valid_from: str
    valid_until: str | None
    retired_at_position: int | None
    active: bool
    vkey: str = Field(description="C2SP signed-note verifier key (name = origin, type 0x01)")


class WitnessKey(BaseModel):
    name: str
    vkey: str = Field(description="C2SP vkey of the witness's cosignature/v1 key (type 0x04)")
    url: str


class KeysOut(Answer):
    keys: list[PublicKey]
    root_public_key: str = Field(description="The ledger's root public key (base64): what an auditor gets")
    origin: str
    vkey: str = Field(description="The verifier key of the key signing checkpoints now")
    witnesses: list[WitnessKey] = Field(description="The witnesses checkpoints are sent to for cosigning")


class IntegrityFindingOut(BaseModel):
    kind: str
    evidence: str
    message: str
    found_at: str | None = Field(None, description="When it was first seen (UTC); kept in the store")
    source: str | None = Field(None, description="What saw it: witness, open (a ledger opening), check")
    detail: dict[str, Any] = Field(
        default_factory=dict, description="Witness, sizes and roots (log_size, witness_size, ...)"
    )


class WitnessAlarmOut(BaseModel):
    witness: str
    status: int | None
    message: str
    at: str


class IntegrityOut(BaseModel):
    ok: bool = Field(description="false: the log was found cut back or rewritten; writes are refused")
    findings: list[IntegrityFindingOut]
    witness_alarms: list[WitnessAlarmOut] = Field(description="Recent refusals by witnesses, newest last")


class HealthOut(Answer):
    store_ok: bool
    projections_ok: bool
    lag: int | None
    uptime_s: float
    last_error: str | None
    integrity: IntegrityOut


class VersionOut(Answer):
    api: Literal["v1"]
    origin: str


class CitationData(BaseModel):
    model_config = ConfigDict(extra="allow")
    citation_id: Id
    chunk_text: str = Field(description="The chunk's text as the ledger recorded it at ingest")
    receipt_id: Id
    document_id: Id
    chunk_id: Id
    source: Id | None = Field(
        default=None,
        description="The source of the cited document (null: recorded before sources were named)",
    )
    path: str
    sensitivity: str
    expires_at: str | None
    position: int = Field(ge=1)


class CitationOut(Answer):
    data: CitationData


class SearchLocator(Locator):
    heading_path: str | None = None


class TextSpan(BaseModel):
    """Where a snippet sits in its chunk's text (character offsets, end exclusive): the same
    `{start, end}` form as a receipt entry's `snippet_span` and a read-back's `cited_span`."""

    start: int = Field(ge=0)
    end: int = Field(ge=0)


class SearchCitation(BaseModel):
    """One cited file: its best chunk (where it is, the snippet cut from it, why it ranked)
    and all its snippets merged (`parts`)."""

    model_config = ConfigDict(extra="allow")
    citation_id: Id
    document_id: Id
    chunk_id: Id
    source: Id | None = Field(
        default=None,
        description="The source of the cited document (null: recorded before sources were named)",
    )
    path: str
    snippet: str = Field(
        description="Verbatim from the chunk (at most 240 characters); empty when redacted, or in a "
        "repeat (`dedup`) after the document was erased (then listed under `withheld`)"
    )
    snippet_span: TextSpan | None = None
    locator: SearchLocator
    score: str = Field(description="Decimal string, 6 places")
    reason: dict[str, Any] = Field(description="score_breakdown, per-term BM25 contributions, policy rules")
    sensitivity: str
    expires_at: str | None = None
    parts: list[dict[str, Any]] = Field(
        default=[],
        description="Every snippet of this file, in reading order, with its own citation_id, span, "
        "locator, score and reason; the citation's own fields are its best part's",
    )


class SearchOutput(BaseModel):
    model_config = ConfigDict(extra="allow")
    query: str
    target_roots: list[str]
    citations: list[SearchCitation]
    gaps: list[str]


class WithheldOut(BaseModel):
    """A part of a repeated answer whose text was erased since it was first given."""

    model_config = ConfigDict(extra="allow")
    field: str = Field(description="Where it was, e.g. `output.citations[0].snippet`")
    reason: Literal["text_erased", "text_unreadable"]


class SearchOut(Answer):
    """Seed 004 §9.4: the task's status, output, errors and metrics, and the receipt recorded.
    A repeat (`dedup: true`) is the first answer as it stands now: text erased since is empty
    (a list: empty) and named in `withheld`."""

    task_id: str | None = None
    status: Literal["ok", "no_hit", "denied", "timeout", "error"]
    output: SearchOutput
    errors: list[dict[str, Any]]
    metrics: dict[str, float]
    receipt_id: Id
    context_hash: str
    corpus_position: int = Field(ge=0)
    position: int = Field(ge=1)
    dedup: bool = False
    withheld: list[WithheldOut] = []


class SourceFileOut(BaseModel):
    """One markdown file of a sync: what became of it (never its text)."""

    model_config = ConfigDict(extra="allow")
    path: str
    status: Literal["ingested", "unchanged", "removed", "skipped"]
    reason: str | None = Field(default=None, description="Why a file was skipped (e.g. `not_utf8`)")
    sha256: str | None = None
    bytes: int | None = Field(default=None, ge=0)
    document_id: Id | None = None
    version: int | None = Field(default=None, ge=1)
    position: int | None = Field(default=None, ge=1)


class SourceTotalsOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    ingested: int = Field(ge=0)
    unchanged: int = Field(ge=0)
    removed: int = Field(ge=0)
    skipped: int = Field(ge=0)
    ignored: int = Field(ge=0, description="Entries that are not markdown")


class SourceSyncOut(Answer):
    """The sync report, in path order. `truncated` names the limit that cut the sync short
    (`max_files`, `scan_timeout`, `deadline`); then nothing was removed."""

    source: str
    files: list[SourceFileOut]
    totals: SourceTotalsOut
    truncated: str | None


class SourceNameOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str


class SourcesOut(Answer):
    sources: list[SourceNameOut]
