"""The client's request and response models: the shapes of the server's OpenAPI
document (`/schema/openapi.json`), kept as the client's own copy so a service
needs nothing but this package. `tests/test_client_models.py` fails when the two
drift apart. Responses allow fields the server adds later (additive changes are
not breaking, per the contract); requests refuse unknown fields, as the server does."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Sensitivity = Literal["public", "internal", "restricted"]
ScoreComponentName = Literal["bm25", "title_boost", "heading_boost", "filename_boost", "external"]
FilterAction = Literal["deny", "redact", "allow", "downrank"]
RetrievalStatus = Literal["ok", "no_hit", "denied", "timeout", "error"]

MAX_BATCH_ITEMS = 1_000


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Answer(BaseModel):
    """Every success body carries the correlation ids and versions."""

    model_config = ConfigDict(extra="allow")
    run_id: str | None = None
    trace_id: str | None = None
    server_version: str | None = None
    policy_version: str | None = None


# -- requests ---------------------------------------------------------------------------
class TaskIn(Request):
    task_id: str | None = None
    deadline_ms: int | None = Field(default=None, ge=1, le=600_000)
    auth_scope: list[str] | None = None


class ScoreComponentIn(Request):
    component: ScoreComponentName
    value: str  # a decimal as text ("3.25"): signed values are never floats


class SelectedEntryIn(Request):
    document_id: str
    chunk_id: str
    score: str
    score_breakdown: list[ScoreComponentIn] = []
    snippet: str = Field(min_length=1)
    explanation: str | None = None
    expires_at: str | None = None


class FilterAppliedIn(Request):
    rule_id: str
    chunk_id: str
    action: FilterAction


class RetrievalIn(Request):
    query: str = Field(min_length=1, max_length=16 * 1024)
    engine: str = Field(pattern=r"^external:[a-z0-9._-]{1,64}$")
    subject_id: str | None = None
    task: TaskIn = TaskIn()
    status: RetrievalStatus = "ok"
    selected_entries: list[SelectedEntryIn] = Field(default=[], max_length=200)
    filters_applied: list[FilterAppliedIn] = []
    context_hash: str | None = None


class RetrievalBatchItemIn(Request):
    idempotency_key: str
    retrieval: RetrievalIn
    run_id: str | None = None
    trace_id: str | None = None


class RetrievalBatchIn(Request):
    items: list[RetrievalBatchItemIn] = Field(min_length=1, max_length=MAX_BATCH_ITEMS)


class DocumentIn(Request):
    path: str
    text: str = Field(min_length=1)
    title: str | None = None
    source: str = "api"
    sensitivity: Sensitivity = "internal"
    retention_days: int | None = None
    document_id: str | None = None
    subject_id: str | None = None


class SearchFiltersIn(Request):
    sensitivity: list[Sensitivity] = Field(default=[], max_length=3)
    path_prefixes: list[str] = Field(default=[], max_length=32)


class SearchInput(Request):
    query: str = Field(min_length=1, max_length=2_000)
    target_roots: list[str] = Field(default=[], max_length=32)
    top_k: int = Field(default=5, ge=1, le=50)
    filters: SearchFiltersIn = SearchFiltersIn()


class SearchIn(Request):
    """The task envelope of a search (seed 004 §9.2); `parent_task_id`, `sender`, `recipient`,
    `intent` and `context_refs` travel for the protocol's sake (the server does not use them)."""

    trace_id: str | None = None
    task_id: str | None = None
    parent_task_id: str | None = None
    sender: str | None = None
    recipient: str | None = None
    intent: str | None = None
    context_refs: list[str] = Field(default=[], max_length=32)
    deadline_ms: int | None = Field(default=None, ge=1, le=600_000)
    auth_scope: list[str] = Field(default=[], max_length=32)
    idempotency_key: str | None = None
    input: SearchInput


# -- responses --------------------------------------------------------------------------
class Locator(BaseModel):
    model_config = ConfigDict(extra="allow")
    start_line: int
    end_line: int


class CitationRef(BaseModel):
    model_config = ConfigDict(extra="allow")
    citation_id: str
    document_id: str
    chunk_id: str
    path: str
    locator: Locator


class EntryFacts(Answer):
    position: int
    event_id: str
    kid: str
    signature: str
    dedup: bool = False


class RetrievalReceipt(EntryFacts):
    """What POST /v1/retrievals answers."""

    receipt_id: str
    citation_ids: list[str]
    citations: list[CitationRef]
    recorded_at: str
    context_hash: str
    status: RetrievalStatus


class BatchItemError(BaseModel):
    model_config = ConfigDict(extra="allow")
    code: str
    message: str
    retryable: bool


class BatchItemResult(BaseModel):
    """One item's own answer: a receipt (`http_status` 201, or 200 with `dedup`) or an error."""

    model_config = ConfigDict(extra="allow")
    index: int
    http_status: int
    error: BatchItemError | None = None
    receipt_id: str | None = None
    citation_ids: list[str] | None = None
    citations: list[CitationRef] | None = None
    position: int | None = None
    event_id: str | None = None
    kid: str | None = None
    signature: str | None = None
    recorded_at: str | None = None
    context_hash: str | None = None
    status: RetrievalStatus | None = None
    dedup: bool | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class BatchAnswer(Answer):
    """What POST /v1/retrievals/batch answers."""

    results: list[BatchItemResult]
    recorded: int
    dedup: int
    refused: int


class ChunkRef(BaseModel):
    model_config = ConfigDict(extra="allow")
    chunk_id: str
    ordinal: int
    start_line: int
    end_line: int


class DocumentRecorded(Answer):
    """What POST /v1/documents answers. An unchanged text records nothing (`dedup: true`):
    then no entry facts (`event_id`, `kid`, `signature`) and no `chunks`."""

    document_id: str
    version: int
    version_id: str
    position: int
    content_sha256: str
    dedup: bool = False
    supersedes_version_id: str | None = None
    event_id: str | None = None
    kid: str | None = None
    signature: str | None = None
    chunks: list[ChunkRef] | None = None


class CitationAnswer(Answer):
    """GET /v1/citations/{id}: the recorded chunk text and where the snippet is in it."""

    data: dict[str, Any]


class SearchLocator(Locator):
    heading_path: str | None = None


class TextSpan(BaseModel):
    """Where a snippet sits in its chunk's text (character offsets, end exclusive)."""

    start: int
    end: int


class SearchCitation(BaseModel):
    """One cited file of a search: its best chunk (where, the snippet, why it ranked) and `parts`."""

    model_config = ConfigDict(extra="allow")
    citation_id: str
    document_id: str
    chunk_id: str
    source: str | None = None  # the cited document's source
    path: str
    snippet: str  # verbatim from the chunk; empty when a policy redacts it
    snippet_span: TextSpan | None = None
    locator: SearchLocator
    score: str  # a decimal as text, 6 places
    reason: dict[str, Any]  # score_breakdown, per-term BM25 contributions, policy rules
    sensitivity: str
    expires_at: str | None = None
    parts: list[dict[str, Any]] = []  # every snippet of the file, reading order; the fields above: the best


class SearchOutput(BaseModel):
    model_config = ConfigDict(extra="allow")
    query: str
    target_roots: list[str]
    citations: list[SearchCitation]
    gaps: list[str]  # next steps when nothing answers (`no_hit`)


class Withheld(BaseModel):
    """A part of a repeated answer whose text was erased since (`field`, e.g.
    `output.citations[0].snippet`, is then empty)."""

    model_config = ConfigDict(extra="allow")
    field: str
    reason: str


class SearchAnswer(Answer):
    """What POST /v1/search answers (seed 004 §9.4): status, output, errors, metrics, and the
    signed receipt the search was recorded as. A repeat (`dedup`) after an erasure names the
    text it no longer holds in `withheld`."""

    task_id: str | None = None
    status: RetrievalStatus
    output: SearchOutput
    errors: list[dict[str, Any]]
    metrics: dict[str, float]
    receipt_id: str
    context_hash: str
    corpus_position: int
    position: int
    event_id: str | None = None
    kid: str | None = None
    signature: str | None = None
    dedup: bool = False
    withheld: list[Withheld] = []


class EventsPage(Answer):
    events: list[dict[str, Any]]
    next_cursor: str | None = None


class Spooled(BaseModel):
    """A write the ledger could not take now: kept in the local spool (fsynced) and
    delivered later with this key. The receipt is not known yet."""

    idempotency_key: str
    spooled: bool = True
    run_id: str | None = None
    trace_id: str | None = None
