"""Request bodies of the API (pydantic). Text fields are plain text here;
the API seals them before anything reaches the log."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from api.config import Limits
from ledger.events import MAX_FILTERS_APPLIED, Decimal, Hex64, Identifier, SourcePath, Timestamp

LIMITS = Limits()

Engine = Annotated[str, StringConstraints(pattern=r"^external:[a-z0-9._-]{1,64}$")]
Sensitivity = Literal["public", "internal", "restricted"]


class RequestModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DocumentIn(RequestModel):
    """A markdown document to record (`DocumentIngested`)."""

    path: SourcePath
    text: Annotated[str, Field(min_length=1, max_length=LIMITS.max_document_chars)]
    title: Annotated[str, Field(max_length=256)] | None = None
    source: Identifier = "api"
    sensitivity: Sensitivity = "internal"
    retention_days: Annotated[int, Field(ge=1, le=36_500)] | None = None
    document_id: Identifier | None = None
    subject_id: Identifier | None = None


class TaskIn(RequestModel):
    task_id: Identifier | None = None
    deadline_ms: Annotated[int, Field(ge=1, le=600_000)] | None = None
    auth_scope: Annotated[list[Identifier], Field(max_length=32)] | None = None


class ScoreComponentIn(RequestModel):
    component: Literal["bm25", "title_boost", "heading_boost", "filename_boost", "external"]
    value: Decimal


class SelectedEntryIn(RequestModel):
    """One chunk the caller's engine selected; the ledger mints its citation id."""

    document_id: Identifier
    chunk_id: Identifier
    score: Decimal
    score_breakdown: Annotated[list[ScoreComponentIn], Field(max_length=16)] = []
    snippet: Annotated[str, Field(min_length=1, max_length=LIMITS.max_snippet_chars)]
    explanation: Annotated[str, Field(max_length=4096)] | None = None
    expires_at: Timestamp | None = None


class FilterAppliedIn(RequestModel):
    rule_id: Identifier
    chunk_id: Identifier
    action: Literal["deny", "redact", "allow", "downrank"]


class RetrievalIn(RequestModel):
    """A retrieval the caller performed itself (`engine: external:<name>`)."""

    query: Annotated[str, Field(min_length=1, max_length=LIMITS.max_query_chars)]
    engine: Engine
    subject_id: Identifier | None = None
    task: TaskIn = TaskIn()
    status: Literal["ok", "no_hit", "denied", "timeout", "error"] = "ok"
    selected_entries: Annotated[
        list[SelectedEntryIn], Field(max_length=LIMITS.max_entries_per_retrieval)
    ] = []
    filters_applied: Annotated[list[FilterAppliedIn], Field(max_length=MAX_FILTERS_APPLIED)] = []
    context_hash: Hex64 | None = None


class PolicyBundleIn(RequestModel):
    """A policy bundle: verbatim YAML (a mapping), published as the tenant's live policy."""

    bundle_yaml: Annotated[str, Field(min_length=1)]
    policy_version: Identifier | None = None


class RemoveDocumentIn(RequestModel):
    reason: Literal["source_deleted", "withdrawn"] = "withdrawn"
