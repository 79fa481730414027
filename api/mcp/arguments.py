"""Tool arguments. A tool whose HTTP twin takes a JSON body takes that body's command
(`ledger.schemas.requests`) as is, plus the `Idempotency-Key` header as `idempotency_key`;
what the HTTP routes take as path and query parameters becomes a small model here, with the
routes' own patterns and bounds."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from ledger.domain.fields import IDENTIFIER_PATTERN, MAX_IDENTIFIER_CHARS
from ledger.domain.timestamps import BOUND_HELP
from ledger.retrieval.question_words import MAX_SEARCH_CHARS, MAX_SEARCH_WORDS
from ledger.schemas.field_rules import DocumentPath
from ledger.schemas.requests import DocumentIn, DocumentPathIn, IdempotencyKeyText, RequestModel, RetrievalIn

Position = Annotated[int, Field(ge=1, le=2**53 - 1)]
ReceiptId = Annotated[str, StringConstraints(pattern=IDENTIFIER_PATTERN, max_length=128)]
Filter = Annotated[str, StringConstraints(pattern=IDENTIFIER_PATTERN, max_length=MAX_IDENTIFIER_CHARS)]
KEY_DESCRIPTION = (
    "The HTTP route's Idempotency-Key: a repeat with the same arguments gets the first answer "
    "(`dedup: true`), other arguments are refused (idempotency_key_reused). The same key over HTTP "
    "and MCP is the same request."
)


class RecordRetrievalArgs(RetrievalIn):
    """`POST /v1/retrievals`: the body, and its Idempotency-Key."""

    idempotency_key: Annotated[IdempotencyKeyText | None, Field(description=KEY_DESCRIPTION)] = None

    def command(self) -> RetrievalIn:
        return RetrievalIn.model_validate(self.model_dump(exclude={"idempotency_key"}, exclude_unset=True))


class IngestDocumentArgs(DocumentIn):
    """`POST /v1/documents`: the body, and its Idempotency-Key."""

    idempotency_key: Annotated[IdempotencyKeyText | None, Field(description=KEY_DESCRIPTION)] = None

    def command(self) -> DocumentIn:
        return DocumentIn.model_validate(self.model_dump(exclude={"idempotency_key"}, exclude_unset=True))


class CitationRef(RequestModel):
    """`GET /v1/citations/{citation_id}`: any id that is not the tenant's live citation gets the
    one not-found answer."""

    citation_id: Annotated[
        str, Field(min_length=1, max_length=1024, description="A citation_id from a search or receipt")
    ]


RECEIPT_ID = "The receipt_id a search, record_retrieval or list_receipts answered"
CONTENT = (
    "`plain` (token scope audit.content): also the question and snippets in plain text; the read "
    "is recorded as a signed ContentRead"
)
ContentChoice = Annotated[Literal["sealed", "plain"], Field(description=CONTENT)]


class ReceiptRef(RequestModel):
    receipt_id: Annotated[ReceiptId, Field(description=RECEIPT_ID)]


class ReceiptRead(ReceiptRef):
    """`GET /v1/receipts/{receipt_id}[?content=plain]`."""

    content: ContentChoice = "sealed"


class ReplayArgs(RequestModel):
    """`POST /v1/receipts/{receipt_id}/replay[?at_position=N]` and its Idempotency-Key."""

    receipt_id: Annotated[ReceiptId, Field(description=RECEIPT_ID)]
    at_position: Annotated[
        Position | None, Field(description="Replay against the corpus as of this log position")
    ] = None
    idempotency_key: Annotated[IdempotencyKeyText | None, Field(description=KEY_DESCRIPTION)] = None


def _id(description: str) -> Any:
    return Field(default=None, description=description)


class ReceiptQuery(RequestModel):
    """`GET /v1/receipts`: every filter of the route, its order, cursor pagination and content."""

    since: Annotated[str | None, Field(max_length=40, description=f"Recorded at or after: {BOUND_HELP}")] = (
        None
    )
    until: Annotated[
        str | None, Field(max_length=40, description=f"Recorded before (a day: up to its end): {BOUND_HELP}")
    ] = None
    order: Annotated[
        Literal["desc", "asc"], Field(description="`desc`: newest first; `asc`: oldest first")
    ] = "desc"
    status: Annotated[Literal["ok", "no_hit", "denied", "timeout", "error"] | None, _id("The outcome")] = None
    kind: Annotated[
        Literal["search", "external", "replay"] | None,
        _id("`search`: the ledger ran it; `external`: another engine's; `replay`"),
    ] = None
    mode: Annotated[Literal["live", "as_of_replay"] | None, _id("`as_of_replay`: replays")] = None
    engine: Annotated[
        str | None,
        StringConstraints(pattern=IDENTIFIER_PATTERN, max_length=80),
        _id("e.g. citeledger-bm25@1, external:my-rag"),
    ] = None
    actor: Annotated[Filter | None, _id("Who recorded it, e.g. token:<id>")] = None
    task_id: Annotated[Filter | None, _id("The task envelope's task_id")] = None
    document_id: Annotated[Filter | None, _id("Receipts citing this document")] = None
    trace_id: Annotated[Filter | None, _id("The W3C trace id it was recorded under")] = None
    run_id: Annotated[Filter | None, _id("The run id it was recorded under")] = None
    parent_receipt_id: Annotated[Filter | None, _id("Replays of this receipt")] = None
    from_position: Annotated[Position | None, _id("Log position at least (inclusive)")] = None
    to_position: Annotated[Position | None, _id("Log position at most (inclusive)")] = None
    cursor: Annotated[
        str | None,
        StringConstraints(pattern=r"^[A-Za-z0-9_-]+$", max_length=64),
        _id("next_cursor of the previous page, same filters"),
    ] = None
    q: Annotated[
        str | None,
        StringConstraints(min_length=1, max_length=MAX_SEARCH_CHARS),
        _id(
            f"Only receipts whose question holds every one of these words (at most {MAX_SEARCH_WORDS}). "
            "Needs audit.content; each search is recorded as a ContentRead."
        ),
    ] = None
    limit: Annotated[int, Field(ge=1, le=500, description="Receipts per page")] = 100
    content: ContentChoice = "sealed"


class DocumentsAt(DocumentPathIn):
    """`GET /v1/documents?path=&source=`: the route's rules for both (a bad path is the same 422)."""

    path: Annotated[
        DocumentPath,
        Field(description="The document's path inside its source, as ingested, e.g. handbook/retention.md"),
    ]
    source: Annotated[Filter | None, _id("Only the document from this source (default: every source)")] = None
