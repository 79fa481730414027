"""The answers of the read routes (receipts, events, proofs, checkpoints, keys, health) as
pydantic models; the write answers and the common `Answer` are `ledger.schemas.answers`.
Open (`extra` allowed) for the same reason: an added field never breaks a client."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from ledger.schemas.answers import Answer, CitedSource, Id, Locator, OpenModel


class ReceiptCitation(OpenModel):
    citation_id: Id
    document_id: Id
    version_id: Id | None
    chunk_id: Id
    source: CitedSource = None
    path: str
    locator: Locator
    score: str | None
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
    unverifiable: list[dict[str, Any]] | None = Field(
        default=None,
        description="Documents an external engine reported with neither a chunk the ledger holds nor "
        "text (`rank`, `carried_id`, `score`, `reason`); absent when there are none",
    )
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


ReplayVerdict = Literal["ok", "reproduced_apart_from_erased", "unverifiable", "mismatch", "not_applicable"]


class ReplayOut(Answer):
    """A replay under the receipt's frozen policy: integrity, data drift, policy drift (201); 200
    with `replay_receipt_id: null` when recording the replay failed (the diff is still the answer)."""

    original_receipt_id: Id
    replay_receipt_id: Id | None
    integrity: ReplayVerdict = Field(
        description=(
            "ok: the as-of run reproduced the context hash and every score. "
            "reproduced_apart_from_erased: text live then was erased or expired since, and with those "
            "documents left out the rest (the same parts in the same order, the status, the other "
            "filters) was reproduced; scores may move. unverifiable: the erased text decided the "
            "outcome, or a run passed its deadline. "
            "mismatch: nothing erased explains the difference (an integrity finding). not_applicable: "
            "an external engine's receipt, which cannot be re-run."
        )
    )
    integrity_reason: dict[str, Any] | None = Field(
        default=None,
        description=(
            "reproduced_apart_from_erased and unverifiable: `cause` (erased_after_receipt, "
            "original_timeout, timeout), `document_ids`, and `erased`: each erased document's "
            "`document_id`, `path`, `erased_at`, `erased_position` and `basis` (erasure_request, "
            "retention_expired, governance_scrub)."
        ),
    )
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


class ReceiptSummary(OpenModel):
    receipt_id: Id
    position: int = Field(ge=1)
    recorded_at: str
    actor: str = Field(description="Who recorded it (`token:<id>`, or `cli` at the machine)")
    kind: Literal["search", "external", "replay"] = Field(
        description="`search`: the ledger ran it; `external`: another engine's, recorded; `replay`"
    )
    engine: str
    mode: str
    status: Literal["ok", "no_hit", "denied", "timeout", "error"]
    task_id: Id | None = None
    citation_count: int = Field(ge=0)
    citation_ids: list[Id]
    content: dict[str, Any] | None = Field(
        default=None, description="With `content=plain` (audit.content): the sealed fields in plain"
    )


Total = Annotated[int, Field(ge=0, description="How many match the filter on all pages (see `total_exact`)")]
TotalExact = Annotated[
    bool, Field(description="`false`: more than `total` match (counting stops there so a list stays fast)")
]


class ReceiptPage(Answer):
    receipts: list[ReceiptSummary]
    next_cursor: str | None
    total: Total
    total_exact: TotalExact


class EventPage(Answer):
    events: list[dict[str, Any]]
    next_cursor: str | None
    total: Total
    total_exact: TotalExact
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


class Checkpoint(OpenModel):
    seq: int = Field(ge=1)
    tree_size: int = Field(ge=1)
    root: str
    issued_at: str
    kid: str
    note: str


class InclusionProof(OpenModel):
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


class PublicKey(OpenModel):
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


class DocumentVersionOut(BaseModel):
    version_id: Id
    version: int
    sensitivity: str
    parts: int = Field(description="How many parts (chunks) the version was cut into")
    live_from_position: int
    live_to_position: int | None = Field(
        description="Where a newer version or a removal closed it; null: live"
    )
    removed_reason: str | None


class ErasedOut(BaseModel):
    position: int
    erased_at: str | None
    basis: str = Field(description="erasure_request | retention_expired | governance_scrub")


class DocumentAtPathOut(BaseModel):
    document_id: Id
    source: str
    path: str
    versions: list[DocumentVersionOut]
    receipts_citing: int = Field(description="How many receipts cite any version of it")
    erased: ErasedOut | None = Field(description="Its text was scrubbed: when, where and on what basis")
    held_by: list[Id] = Field(description="The legal holds that keep it from erasure and retention")


class DocumentsAtPathOut(Answer):
    """The documents recorded at a path (ids and metadata, never text); 404 when none the caller
    may see is there."""

    documents: list[DocumentAtPathOut]
