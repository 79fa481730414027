"""The request bodies: the commands of the use cases, validated plain values (pydantic), and
what the Python client sends (`client.models` re-exports them). Text fields are plain text
here; the use cases seal them before anything reaches the log.

Every text field is one of the types below, which carry the text rules once: no control
characters (prose may hold tab, line feed and carriage return), and a document path is a
relative path of `/`-separated names. A field breaking one of these rules fails with an error
type of `RULE_ERRORS`: the request was well formed, a ledger rule refused it (HTTP 422).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StringConstraints,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    WrapValidator,
    model_validator,
)

from ledger.domain.fields import (
    MAX_AUTH_SCOPES,
    MAX_FILTERS_APPLIED,
    MAX_SCORE_COMPONENTS,
    MAX_SELECTED_ENTRIES,
    MAX_TARGET_ROOTS,
    Decimal,
    FilterAction,
    Hex64,
    RemovalReason,
    RetrievalStatus,
    ScoreComponentName,
    ScoreDecimal,
    Sensitivity,
    Timestamp,
)
from ledger.schemas.field_rules import (
    MAX_HOLD_TARGETS,
    PROSE,
    PROSE_SCHEMA,
    BundleText,
    Days,
    DocumentPath,
    DocumentText,
    Engine,
    ExplanationText,
    FolderPath,
    Id,
    Label,
    LegalBasisText,
    Milliseconds,
    QueryText,
    SearchQueryText,
    SnippetText,
    TopK,
)

KEY_PATTERN = re.compile(r"^[\x21-\x7e]{1,255}$")  # an Idempotency-Key: visible ASCII, as headers carry it


class RequestModel(BaseModel):
    # Strict: "5" is not an integer and true is not a number of days.
    model_config = ConfigDict(extra="forbid", strict=True)


class DocumentIn(RequestModel):
    """A markdown document to record (`DocumentIngested`)."""

    path: Annotated[DocumentPath, Field(description="Where the document lives, e.g. handbook/retention.md")]
    text: Annotated[DocumentText, Field(description="The markdown text")]
    title: Annotated[Label | None, Field(description="A title to show")] = None
    source: Annotated[Id, Field(description="The source it belongs to")] = "api"
    sensitivity: Annotated[Sensitivity, Field(description="public, internal, confidential or restricted")] = (
        "internal"
    )
    retention_days: Annotated[Days | None, Field(description="Days its text is kept")] = None
    document_id: Annotated[Id | None, Field(description="Your id for it (else minted)")] = None
    subject_id: Annotated[Id | None, Field(description="The data subject it is about")] = None


MAX_SOURCE_FILE_CHARS = 64 * 1024 * 1024  # a source's per-file limit may be set up to 64 MiB
SourceFileText = Annotated[
    str, Field(min_length=1, max_length=MAX_SOURCE_FILE_CHARS, json_schema_extra=PROSE_SCHEMA), PROSE
]


class SourceFileIn(DocumentIn):
    """A file a source sync read, recorded like a document: bounded by the source's per-file
    limit (`SourceLimits.max_file_bytes`, 16 MiB by default), not by an HTTP body's."""

    text: SourceFileText


class TaskIn(RequestModel):
    task_id: Annotated[Id | None, Field(description="Your task's id")] = None
    deadline_ms: Annotated[Milliseconds | None, Field(description="The task's deadline")] = None
    auth_scope: Annotated[
        Annotated[list[Id], Field(max_length=MAX_AUTH_SCOPES)] | None,
        Field(description="Scopes the task may see"),
    ] = None


class ScoreComponentIn(RequestModel):
    component: Annotated[ScoreComponentName, Field(description="A part of the score, e.g. bm25")]
    value: Annotated[Decimal, Field(description="Its value")]


class SelectedEntryIn(RequestModel):
    """One chunk the caller's engine selected; the ledger mints its citation id."""

    document_id: Annotated[Id, Field(description="The cited document")]
    chunk_id: Annotated[Id, Field(description="The cited chunk")]
    # Left out when the engine gave none: recorded as absent, never invented.
    score: Annotated[ScoreDecimal | None, Field(description="Your engine's score, a decimal string")] = None
    score_breakdown: Annotated[
        list[ScoreComponentIn], Field(max_length=MAX_SCORE_COMPONENTS, description="The score's parts")
    ] = []
    snippet: Annotated[SnippetText, Field(description="Text quoted from the chunk")]
    explanation: Annotated[ExplanationText | None, Field(description="Why it was selected")] = None
    expires_at: Annotated[Timestamp | None, Field(description="When the citation expires (RFC 3339)")] = None


class FilterAppliedIn(RequestModel):
    rule_id: Annotated[Id, Field(description="The rule")]
    chunk_id: Annotated[Id, Field(description="The chunk")]
    action: Annotated[FilterAction, Field(description="What the rule did")]


class RetrievalIn(RequestModel):
    """A retrieval the caller performed itself (`engine: external:<name>`)."""

    query: Annotated[QueryText, Field(description="The question asked")]
    engine: Annotated[Engine, Field(description="external:<your engine>")]
    subject_id: Annotated[Id | None, Field(description="The data subject asked about")] = None
    task: Annotated[TaskIn, Field(description="The task envelope")] = TaskIn()
    status: Annotated[RetrievalStatus, Field(description="ok, no_hit, denied, timeout or error")] = "ok"
    selected_entries: Annotated[
        list[SelectedEntryIn],
        Field(max_length=MAX_SELECTED_ENTRIES, description="The chunks selected, best first"),
    ] = []
    filters_applied: Annotated[
        list[FilterAppliedIn], Field(max_length=MAX_FILTERS_APPLIED, description="Rules your engine applied")
    ] = []
    context_hash: Annotated[Hex64 | None, Field(description="Your hash of the context (else computed)")] = (
        None
    )


MAX_BATCH_ITEMS = 1_000
IdempotencyKeyText = Annotated[str, StringConstraints(pattern=KEY_PATTERN.pattern)]


class RetrievalBatchItemIn(RequestModel):
    """One retrieval of a batch, with its own Idempotency-Key and (optionally) the
    correlation ids of the request it was first made in."""

    idempotency_key: IdempotencyKeyText
    retrieval: RetrievalIn
    run_id: Id | None = None
    trace_id: Id | None = None
    _problem: str | None = PrivateAttr(default=None)

    @property
    def problem(self) -> str | None:
        """Why the item is malformed (never echoes a value), or None."""
        return self._problem


def _refuse_alone(data: object, handler: ValidatorFunctionWrapHandler) -> RetrievalBatchItemIn:
    """A malformed item of a batch is kept with its problem instead of failing the whole batch:
    it is refused on its own (by index) while the others are recorded. On the batch's items
    only, so an item built on its own (as the client does) still fails at once."""
    try:
        item: RetrievalBatchItemIn = handler(data)
        return item
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        first = errors[0] if errors else {"loc": (), "msg": "invalid item"}
        where = ".".join(str(part) for part in first["loc"]) or "item"
        nothing: dict[str, Any] = {}  # a refused item holds no fields; only its problem is read
        refused = RetrievalBatchItemIn.model_construct(**nothing)
        refused._problem = f"{where}: {first['msg']}"[:300]
        return refused


_BATCH_ITEM_SCHEMA: dict[str, Any] = {
    "description": (
        "{idempotency_key, retrieval: RetrievalIn, run_id?, trace_id?}; a malformed item is "
        "refused in its own result (http_status 422, naming the field) while the others are recorded"
    )
}

BatchItem = Annotated[RetrievalBatchItemIn, WrapValidator(_refuse_alone), WithJsonSchema(_BATCH_ITEM_SCHEMA)]


class RetrievalBatchIn(RequestModel):
    """Up to `MAX_BATCH_ITEMS` retrievals, each recorded or refused on its own, all
    accepted ones in one transaction."""

    # Documented as any JSON value: an item that is not a valid `RetrievalBatchItemIn` is
    # refused in its own result (by index), never by failing the batch.
    items: Annotated[
        list[BatchItem],
        Field(min_length=1, max_length=MAX_BATCH_ITEMS),
    ]


class PolicyBundleIn(RequestModel):
    """A policy bundle: verbatim YAML (a mapping), published as the tenant's live policy."""

    bundle_yaml: BundleText
    policy_version: Id | None = None


class ReportIn(RequestModel):
    """A record-keeping report of the caller's tenant for [from, to) (`ledger.usecases.report`)."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    period_from: Annotated[str, Field(alias="from", min_length=10, max_length=32, examples=["2026-07-01"])]
    period_to: Annotated[str, Field(alias="to", min_length=10, max_length=32, examples=["2026-10-01"])]
    pdf: bool = Field(default=False, description="Also print report.pdf with the system Chromium (slower)")


class SourceSyncIn(RequestModel):
    """Sync a source, or only one folder of it (`under`, relative to its root)."""

    under: FolderPath | None = None


class RemoveDocumentIn(RequestModel):
    reason: RemovalReason = "withdrawn"


class DocumentPathIn(RequestModel):
    """A document named as people name it: its path, in one source or in any
    (`GET /v1/documents`, `citeledger documents show|erase|hold`, the console)."""

    path: DocumentPath
    source: Id | None = None


class ErasureIn(RequestModel):
    """Erase a document (its text and every snapshot of it) or a data subject."""

    # The rule of `one_target`, for the schema: exactly one of the two is a string.
    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [
                {
                    "required": ["document_id"],
                    "properties": {"document_id": {"type": "string"}, "subject_id": {"type": "null"}},
                },
                {
                    "required": ["subject_id"],
                    "properties": {"subject_id": {"type": "string"}, "document_id": {"type": "null"}},
                },
            ]
        }
    )

    document_id: Id | None = None
    subject_id: Id | None = None

    @model_validator(mode="after")
    def one_target(self) -> ErasureIn:
        if (self.document_id is None) == (self.subject_id is None):
            raise ValueError("give exactly one of document_id or subject_id")
        return self


class LegalHoldIn(RequestModel):
    # The rule of `some_target`, for the schema: at least one target.
    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"required": ["document_ids"], "properties": {"document_ids": {"minItems": 1}}},
                {"required": ["subject_ids"], "properties": {"subject_ids": {"minItems": 1}}},
            ]
        }
    )

    document_ids: Annotated[list[Id], Field(max_length=MAX_HOLD_TARGETS)] = []
    subject_ids: Annotated[list[Id], Field(max_length=MAX_HOLD_TARGETS)] = []
    legal_basis: LegalBasisText

    @model_validator(mode="after")
    def some_target(self) -> LegalHoldIn:
        if not self.document_ids and not self.subject_ids:
            raise ValueError("a hold needs at least one document_id or subject_id")
        return self


class SearchFiltersIn(RequestModel):
    sensitivity: Annotated[
        list[Sensitivity], Field(max_length=3, description="Only these sensitivities")
    ] = []
    path_prefixes: Annotated[
        list[FolderPath], Field(max_length=MAX_TARGET_ROOTS, description="Only paths under these")
    ] = []


class SearchInput(RequestModel):
    query: Annotated[SearchQueryText, Field(description="The question")]
    target_roots: Annotated[
        list[FolderPath], Field(max_length=MAX_TARGET_ROOTS, description="Search only these folders")
    ] = []
    top_k: Annotated[TopK, Field(description="How many citations")] = 5
    filters: Annotated[SearchFiltersIn, Field(description="Narrow what is searched")] = SearchFiltersIn()


class SearchIn(RequestModel):
    """The task envelope of a search (seed 004 §9.2). `sender`, `recipient`, `intent`,
    `parent_task_id` and `context_refs` are accepted for the protocol's sake and not used."""

    trace_id: Annotated[Id | None, Field(description="The W3C trace id")] = None
    task_id: Annotated[Id | None, Field(description="Your task's id")] = None
    parent_task_id: Annotated[Id | None, Field(description="Accepted, not used")] = None
    sender: Annotated[Id | None, Field(description="Accepted, not used")] = None
    recipient: Annotated[Id | None, Field(description="Accepted, not used")] = None
    intent: Annotated[Id | None, Field(description="Accepted, not used")] = None
    context_refs: Annotated[
        list[Id], Field(max_length=MAX_TARGET_ROOTS, description="Accepted, not used")
    ] = []
    deadline_ms: Annotated[Milliseconds | None, Field(description="The task's deadline")] = None
    auth_scope: Annotated[
        list[Id], Field(max_length=MAX_AUTH_SCOPES, description="Scopes the task may see")
    ] = []
    idempotency_key: Annotated[
        IdempotencyKeyText | None, Field(description="A repeat with this key gets the first answer")
    ] = None
    input: Annotated[SearchInput, Field(description="What to search")]
