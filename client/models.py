"""The client's request and response models: the contract's own (`ledger.schemas`), the
models the server validates requests with and documents its answers by, under the names
the client has always used. Nothing is copied, so nothing can drift. Responses allow fields
the server adds later (additive changes are not breaking, per the contract); requests refuse
unknown fields, as the server does. `Spooled` is the client's own: no server answers it."""

from __future__ import annotations

from pydantic import BaseModel

from ledger.domain.fields import FilterAction, RetrievalStatus, ScoreComponentName, Sensitivity
from ledger.schemas.answers import (
    Answer,
    CitationOut,
    DocumentOut,
    Locator,
    ReceiptRecordedOut,
    RetrievalBatchOut,
    SearchCitation,
    SearchLocator,
    SearchOut,
    SearchOutput,
    TextSpan,
)
from ledger.schemas.answers import BatchItemError as BatchItemError
from ledger.schemas.answers import BatchItemOut as BatchItemResult
from ledger.schemas.answers import ChunkOut as ChunkRef
from ledger.schemas.answers import Entry as EntryFacts
from ledger.schemas.answers import RecordedCitation as CitationRef
from ledger.schemas.answers import WithheldOut as Withheld
from ledger.schemas.reads import EventPage
from ledger.schemas.requests import (
    MAX_BATCH_ITEMS,
    DocumentIn,
    FilterAppliedIn,
    RetrievalBatchIn,
    RetrievalBatchItemIn,
    RetrievalIn,
    ScoreComponentIn,
    SearchFiltersIn,
    SearchIn,
    SearchInput,
    SelectedEntryIn,
    TaskIn,
)
from ledger.schemas.requests import RequestModel as Request


# The answers a client method returns, under the client's names (a subclass adds no field: the
# shape is the contract's; the name is what `type(answer).__name__` has always said). Nested
# models (`BatchItemResult`, `CitationRef`, ...) are the contract's classes themselves.
class RetrievalReceipt(ReceiptRecordedOut):
    """What POST /v1/retrievals answers."""


class BatchAnswer(RetrievalBatchOut):
    """What POST /v1/retrievals/batch answers."""


class DocumentRecorded(DocumentOut):
    """What POST /v1/documents answers; an unchanged text records nothing (`dedup: true`)."""


class SearchAnswer(SearchOut):
    """What POST /v1/search answers (seed 004 §9.4)."""


class CitationAnswer(CitationOut):
    """GET /v1/citations/{id}: the recorded chunk text and where the snippet is in it."""


class EventsPage(EventPage):
    """One page of GET /v1/events."""


class Spooled(BaseModel):
    """A write the ledger could not take now: kept in the local spool (fsynced) and
    delivered later with this key. The receipt is not known yet."""

    idempotency_key: str
    spooled: bool = True
    run_id: str | None = None
    trace_id: str | None = None


__all__ = [
    "MAX_BATCH_ITEMS",
    "Answer",
    "BatchAnswer",
    "BatchItemError",
    "BatchItemResult",
    "ChunkRef",
    "CitationAnswer",
    "CitationRef",
    "DocumentIn",
    "DocumentRecorded",
    "EntryFacts",
    "EventsPage",
    "FilterAction",
    "FilterAppliedIn",
    "Locator",
    "Request",
    "RetrievalBatchIn",
    "RetrievalBatchItemIn",
    "RetrievalIn",
    "RetrievalReceipt",
    "RetrievalStatus",
    "ScoreComponentIn",
    "ScoreComponentName",
    "SearchAnswer",
    "SearchCitation",
    "SearchFiltersIn",
    "SearchIn",
    "SearchInput",
    "SearchLocator",
    "SearchOutput",
    "SelectedEntryIn",
    "Sensitivity",
    "Spooled",
    "TaskIn",
    "TextSpan",
    "Withheld",
]
