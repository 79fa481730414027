"""The commands of the use cases: validated plain values (pydantic). Text fields
are plain text here; the use cases seal them before anything reaches the log."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from ledger.events import (
    MAX_AUTH_SCOPES,
    MAX_FILTERS_APPLIED,
    MAX_SCORE_COMPONENTS,
    MAX_SEALED_TEXT_BYTES,
    MAX_SELECTED_ENTRIES,
    DeadlineMs,
    Decimal,
    FilterAction,
    Hex64,
    Identifier,
    RemovalReason,
    RetentionDays,
    RetrievalStatus,
    ScoreComponentName,
    Sensitivity,
    SourcePath,
    Timestamp,
)

MAX_DOCUMENT_CHARS = 2 * 1024 * 1024
MAX_QUERY_CHARS = 16 * 1024
MAX_SNIPPET_CHARS = MAX_SEALED_TEXT_BYTES

Engine = Annotated[str, StringConstraints(pattern=r"^external:[a-z0-9._-]{1,64}$")]


class RequestModel(BaseModel):
    # Strict: "5" is not an integer and true is not a number of days.
    model_config = ConfigDict(extra="forbid", strict=True)


class DocumentIn(RequestModel):
    """A markdown document to record (`DocumentIngested`)."""

    path: SourcePath
    text: Annotated[str, Field(min_length=1, max_length=MAX_DOCUMENT_CHARS)]
    title: Annotated[str, Field(max_length=256)] | None = None
    source: Identifier = "api"
    sensitivity: Sensitivity = "internal"
    retention_days: RetentionDays | None = None
    document_id: Identifier | None = None
    subject_id: Identifier | None = None


class TaskIn(RequestModel):
    task_id: Identifier | None = None
    deadline_ms: DeadlineMs | None = None
    auth_scope: Annotated[list[Identifier], Field(max_length=MAX_AUTH_SCOPES)] | None = None


class ScoreComponentIn(RequestModel):
    component: ScoreComponentName
    value: Decimal


class SelectedEntryIn(RequestModel):
    """One chunk the caller's engine selected; the ledger mints its citation id."""

    document_id: Identifier
    chunk_id: Identifier
    score: Decimal
    score_breakdown: Annotated[list[ScoreComponentIn], Field(max_length=MAX_SCORE_COMPONENTS)] = []
    snippet: Annotated[str, Field(min_length=1, max_length=MAX_SNIPPET_CHARS)]
    explanation: Annotated[str, Field(max_length=4096)] | None = None
    expires_at: Timestamp | None = None


class FilterAppliedIn(RequestModel):
    rule_id: Identifier
    chunk_id: Identifier
    action: FilterAction


class RetrievalIn(RequestModel):
    """A retrieval the caller performed itself (`engine: external:<name>`)."""

    query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS)]
    engine: Engine
    subject_id: Identifier | None = None
    task: TaskIn = TaskIn()
    status: RetrievalStatus = "ok"
    selected_entries: Annotated[list[SelectedEntryIn], Field(max_length=MAX_SELECTED_ENTRIES)] = []
    filters_applied: Annotated[list[FilterAppliedIn], Field(max_length=MAX_FILTERS_APPLIED)] = []
    context_hash: Hex64 | None = None


class PolicyBundleIn(RequestModel):
    """A policy bundle: verbatim YAML (a mapping), published as the tenant's live policy."""

    bundle_yaml: Annotated[str, Field(min_length=1)]
    policy_version: Identifier | None = None


class SourceSyncIn(RequestModel):
    """Sync a source, or only one folder of it (`under`, relative to its root)."""

    under: SourcePath | None = None


class RemoveDocumentIn(RequestModel):
    reason: RemovalReason = "withdrawn"


MAX_HOLD_TARGETS = 1_000
MAX_LEGAL_BASIS_CHARS = 4_000


class ErasureIn(RequestModel):
    """Erase a document (its text and every snapshot of it) or a data subject."""

    document_id: Identifier | None = None
    subject_id: Identifier | None = None

    @model_validator(mode="after")
    def one_target(self) -> ErasureIn:
        if (self.document_id is None) == (self.subject_id is None):
            raise ValueError("give exactly one of document_id or subject_id")
        return self


class LegalHoldIn(RequestModel):
    document_ids: Annotated[list[Identifier], Field(max_length=MAX_HOLD_TARGETS)] = []
    subject_ids: Annotated[list[Identifier], Field(max_length=MAX_HOLD_TARGETS)] = []
    legal_basis: Annotated[str, Field(min_length=1, max_length=MAX_LEGAL_BASIS_CHARS)]

    @model_validator(mode="after")
    def some_target(self) -> LegalHoldIn:
        if not self.document_ids and not self.subject_ids:
            raise ValueError("a hold needs at least one document_id or subject_id")
        return self
