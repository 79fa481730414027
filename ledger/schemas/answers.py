"""The success bodies of the HTTP API and MCP, as pydantic models: what `/schema/openapi.json`
promises each 2xx answer holds, the MCP tools' output schemas, and what the Python client
parses answers into (`client.models` re-exports them). The use cases build plain dicts; these
models describe them and are open (`extra` allowed), so an added field never breaks a
client; `tests/test_api_schemathesis.py` checks every answer against them. The write answers
and the search are here, the reads in `ledger.schemas.reads`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ledger.domain.fields import IDENTIFIER_PATTERN

Id = str
_NO_SOURCE = "null: recorded before sources were named"
CitedSource = Annotated[Id | None, Field(description=f"The source of the cited document ({_NO_SOURCE})")]


class OpenModel(BaseModel):
    """An answer model (or a part of one) open to fields added later: an added field never breaks
    a client that parses answers into these."""

    model_config = ConfigDict(extra="allow")


class Answer(OpenModel):
    """What every success body carries beside its own fields."""

    run_id: str
    trace_id: str
    server_version: str
    policy_version: str = Field(description="The tenant's live policy version, or a fixed marker when none")


class Signed(OpenModel):
    """The signed entry's facts: sent with every recorded write (not with a bare repeat)."""

    event_id: str | None = None
    kid: str | None = None
    signature: str | None = None


class Entry(Signed):
    """Where a write's entry is in the log and who signed it."""

    position: int = Field(ge=1)


class ChunkOut(OpenModel):
    chunk_id: Id = Field(pattern=IDENTIFIER_PATTERN)
    ordinal: int = Field(ge=0)
    start_line: int = Field(ge=1)
    end_line: int = Field(ge=1)


class DocumentOut(Answer, Signed):
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


class Locator(OpenModel):
    start_line: int = Field(ge=1)
    end_line: int = Field(ge=1)


class RecordedCitation(OpenModel):
    citation_id: Id
    document_id: Id
    chunk_id: Id
    path: str
    locator: Locator


class ReceiptRecordedOut(Answer, Signed):
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


class BatchItemOut(Signed):
    """One item's own answer: its receipt (201 recorded, 200 `dedup`) or its refusal."""

    index: int = Field(ge=0)
    http_status: int
    receipt_id: Id | None = None
    error: BatchItemError | None = None
    # A recorded item carries its receipt's fields (`ReceiptRecordedOut`), a refused one none.
    citation_ids: list[Id] | None = None
    citations: list[RecordedCitation] | None = None
    position: int | None = Field(default=None, ge=1)
    recorded_at: str | None = None
    context_hash: str | None = None
    status: str | None = None
    dedup: bool | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


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


class ErasureTarget(OpenModel):
    kind: Literal["document", "subject"]
    id: Id
    document_ids: list[Id]


class ErasureOut(Answer):
    erased: ErasureTarget
    already_erased: bool
    position: int | None


class ReportOut(Answer):
    report_id: Id
    tenant_id: str
    manifest_sha256: str
    position: int = Field(ge=1, description="The signed ReportIssued entry")
    entries: int = Field(ge=0)
    pdf: bool
    download: str = Field(description="Where the zip of the report's directory is served")


class ReportManifestOut(Answer):
    manifest: dict[str, Any] = Field(
        description="The report's manifest.json: every figure with the log positions it came from, "
        "the checkpoints bounding the period, the evidence files' SHA-256"
    )


class HoldOut(Answer):
    hold_id: Id
    position: int = Field(ge=1)


class HoldReleasedOut(Answer):
    hold_id: Id
    released: bool
    already_released: bool
    position: int | None = None


class CitationData(OpenModel):
    citation_id: Id
    chunk_text: str = Field(description="The chunk's text as the ledger recorded it at ingest")
    receipt_id: Id
    document_id: Id
    chunk_id: Id
    source: CitedSource = None
    path: str
    sensitivity: str
    expires_at: str | None
    position: int = Field(ge=1)

    def __getitem__(self, name: str) -> Any:
        # The client once answered `data` as a plain dict: `answer.data["chunk_text"]` still works.
        return getattr(self, name)


class CitationOut(Answer):
    data: CitationData


class SearchLocator(Locator):
    heading_path: str | None = None


class TextSpan(BaseModel):
    """Where a snippet sits in its chunk's text (character offsets, end exclusive): the same
    `{start, end}` form as a receipt entry's `snippet_span` and a read-back's `cited_span`."""

    start: int = Field(ge=0)
    end: int = Field(ge=0)


class SearchCitation(OpenModel):
    """One cited file: its best chunk (where it is, the snippet cut from it, why it ranked)
    and all its snippets merged (`parts`)."""

    citation_id: Id
    document_id: Id
    chunk_id: Id
    source: CitedSource = None
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


class SearchOutput(OpenModel):
    query: str
    target_roots: list[str]
    citations: list[SearchCitation]
    gaps: list[str]


class WithheldOut(OpenModel):
    """A part of a repeated answer whose text was erased since it was first given."""

    field: str = Field(description="Where it was, e.g. `output.citations[0].snippet`")
    reason: Literal["text_erased", "text_unreadable"]


class SearchOut(Answer, Signed):
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


class SourceFileOut(OpenModel):
    """One markdown file of a sync: what became of it (never its text)."""

    path: str
    status: Literal["ingested", "unchanged", "removed", "skipped"]
    reason: str | None = Field(default=None, description="Why a file was skipped (e.g. `not_utf8`)")
    sha256: str | None = None
    bytes: int | None = Field(default=None, ge=0)
    document_id: Id | None = None
    version: int | None = Field(default=None, ge=1)
    position: int | None = Field(default=None, ge=1)


class SourceTotalsOut(OpenModel):
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


class SourceNameOut(OpenModel):
    name: str


class SourcesOut(Answer):
    sources: list[SourceNameOut]
