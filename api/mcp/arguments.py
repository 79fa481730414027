"""Tool arguments. A tool whose HTTP twin takes a JSON body takes that body's command
(`ledger.schemas.requests`) as is, plus the `Idempotency-Key` header as `idempotency_key`;
what the HTTP routes take as path and query parameters becomes a small model here, with the
routes' own patterns and bounds."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from api.routes.listing import TIME_PATTERN
from ledger.domain.fields import IDENTIFIER_PATTERN, MAX_IDENTIFIER_CHARS
from ledger.retrieval.question_words import MAX_SEARCH_CHARS, MAX_SEARCH_WORDS
from ledger.schemas.requests import DocumentIn, IdempotencyKeyText, RequestModel, RetrievalIn

Position = Annotated[int, Field(ge=1, le=2**53 - 1)]
ReceiptId = Annotated[str, StringConstraints(pattern=IDENTIFIER_PATTERN, max_length=128)]
Filter = Annotated[str, StringConstraints(pattern=IDENTIFIER_PATTERN, max_length=MAX_IDENTIFIER_CHARS)]
Moment = Annotated[str, StringConstraints(pattern=TIME_PATTERN, max_length=40)]
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

    citation_id: Annotated[str, Field(min_length=1, max_length=1024)]


class ReceiptRef(RequestModel):
    receipt_id: ReceiptId


class ReplayArgs(RequestModel):
    """`POST /v1/receipts/{receipt_id}/replay[?at_position=N]` and its Idempotency-Key."""

    receipt_id: ReceiptId
    at_position: Position | None = None
    idempotency_key: Annotated[IdempotencyKeyText | None, Field(description=KEY_DESCRIPTION)] = None


class ReceiptQuery(RequestModel):
    """`GET /v1/receipts`: its filters (`since` inclusive, `until` exclusive, RFC 3339;
    positions inclusive) and cursor pagination."""

    mode: Annotated[str, StringConstraints(pattern="^(live|as_of_replay)$")] | None = None
    status: Annotated[str, StringConstraints(pattern="^(ok|no_hit|denied|timeout|error)$")] | None = None
    engine: Annotated[str, StringConstraints(pattern=IDENTIFIER_PATTERN, max_length=80)] | None = None
    actor: Filter | None = None
    trace_id: Filter | None = None
    run_id: Filter | None = None
    parent_receipt_id: Filter | None = None
    since: Moment | None = None
    until: Moment | None = None
    from_position: Position | None = None
    to_position: Position | None = None
    q: (
        Annotated[
            str,
            StringConstraints(min_length=1, max_length=MAX_SEARCH_CHARS),
            Field(
                description=f"Only receipts whose question holds every one of these words (at most "
                f"{MAX_SEARCH_WORDS}). Needs audit.content; each search is recorded as a ContentRead."
            ),
        ]
        | None
    ) = None
    cursor: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]+$", max_length=64)] | None = None
    limit: Annotated[int, Field(ge=1, le=500)] = 100
