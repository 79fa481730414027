"""What the use cases need from the read side, as interfaces.

The write path looks things up (a document's current version, the chunks a
retrieval cites, the live policy, legal holds, receipt positions); those
answers come from projections run by the same runner and tracking as every
other read model (`projections.lookups` implements these), never from a
second index of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal, Protocol, TypedDict, Unpack

from ledger.domain.entries import RecordedEvent
from ledger.writing.sealing import Sealer


@dataclass(frozen=True)
class DocumentState:
    tenant_id: str
    document_id: str
    version: int
    version_id: str
    content_sha256: str
    path: str
    sensitivity: str
    position: int
    removed: bool
    retention_days: int | None


@dataclass(frozen=True)
class ChunkState:
    """A chunk as recorded in one version of its document. Its id is derived from its
    content, so an unchanged section carries the same id in the next version."""

    tenant_id: str
    document_id: str
    version_id: str
    chunk_id: str
    position: int  # of its DocumentIngested entry
    path: str
    start_line: int
    end_line: int
    sensitivity: str
    retention_days: int | None
    text: dict[str, Any] | None  # the sealed chunk text (None once scrubbed)
    heading_path: dict[str, Any] | None = None  # sealed
    source: str | None = None  # the source the document was synced from (or posted under)


@dataclass(frozen=True)
class PolicyState:
    policy_version: str
    bundle_sha256: str
    bundle_yaml: str
    position: int


@dataclass(frozen=True)
class ReceiptRecord:
    """A receipt as the receipts read model holds it. `policy_snapshot` is the read
    model's own column (what replay trusts only after checking it); `has_policy_snapshot`
    is False for legacy posts (the field was absent)."""

    tenant_id: str
    receipt_id: str
    position: int
    engine: str
    mode: str
    has_policy_snapshot: bool
    policy_snapshot: dict[str, Any] | None


@dataclass(frozen=True)
class ChunkVersion:
    """A chunk version of a document as of a log position (`live_to` None: still live then;
    `scrubbed_position`/`scrub_reason` only when the scrub happened by then)."""

    document_id: str
    version_id: str
    version: int
    chunk_id: str
    ordinal: int
    path: str
    sensitivity: str
    text: dict[str, Any] | None  # sealed; None once scrubbed
    live_from: int
    live_to: int | None
    removed_reason: str | None
    scrubbed_position: int | None
    scrub_reason: str | None


@dataclass(frozen=True)
class ScrubbedDocument:
    """A document whose text was scrubbed after some position: where, when and on what basis
    (`reason`: `erasure_request` | `retention_expired` | `governance_scrub`)."""

    document_id: str
    path: str
    position: int
    reason: str
    recorded_at: str


@dataclass(frozen=True)
class DocumentAtPath:
    """A document recorded at a path: its versions (oldest first, metadata only), how many
    receipts cite it, and its first scrub if its text was erased or expired."""

    document_id: str
    source: str
    path: str
    versions: list[dict[str, Any]]
    receipts_citing: int
    scrub: ScrubbedDocument | None

    def with_scrub(self, scrub: ScrubbedDocument) -> DocumentAtPath:
        return replace(self, scrub=scrub)


class WriteLookups(Protocol):
    def refresh(self) -> None:
        """Catch up with entries other processes appended."""

    def document(self, tenant_id: str, document_id: str) -> DocumentState | None: ...

    def documents(self, tenant_id: str, document_ids: Sequence[str]) -> dict[str, DocumentState]:
        """`document` for many ids at once (a sync batch); ids never recorded are absent."""
        ...

    def chunks(self, tenant_id: str, refs: list[tuple[str, str]]) -> dict[tuple[str, str], ChunkState]:
        """Each (document, chunk) as in the newest version of its document that holds it."""
        ...

    def chunk_in_version(
        self, tenant_id: str, document_id: str, chunk_id: str, version_id: str
    ) -> ChunkState | None: ...

    def erased_documents(self, tenant_id: str) -> tuple[frozenset[str], frozenset[str]]:
        """The tenant's documents erased on request: their ids, and the content SHA-256 of
        every version they had (what a sync recognises an erased file by; no text)."""
        ...

    def documents_of_sources(self, tenant_id: str, sources: Sequence[str]) -> dict[str, str]:
        """Document id -> source of every document (any version, removed ones too) the
        tenant recorded under one of `sources`: a document's source never changes."""
        ...

    def source_documents(self, tenant_id: str, source: str) -> dict[str, str]:
        """Path -> document id of the tenant's live documents recorded from `source`."""
        ...

    def live_policy(self, tenant_id: str) -> PolicyState | None: ...

    def active_holds(self, tenant_id: str, target_kind: str, target_id: str) -> list[str]: ...

    def hold(self, tenant_id: str, hold_id: str) -> tuple[bool, bool]:
        """(exists, still active)."""
        ...

    def held_scopes(self, tenant_id: str) -> frozenset[str]: ...

    def documents_of_subject(self, tenant_id: str, subject_id: str) -> list[str]: ...

    def tenants(self) -> list[str]: ...

    def receipt(self, tenant_id: str, receipt_id: str) -> RecordedEvent | None:
        """The receipt's signed entry, if it is this tenant's."""
        ...

    def receipt_with_replays(
        self, tenant_id: str, receipt_id: str
    ) -> tuple[RecordedEvent, list[tuple[str, int]]] | None:
        """The receipt's signed entry (if it is this tenant's) and its replays (id, position),
        in log order, in one lookup."""
        ...

    # -- replay ---------------------------------------------------------------------
    def receipt_record(self, tenant_id: str, receipt_id: str) -> ReceiptRecord | None: ...

    def replays_of(self, tenant_id: str, receipt_id: str) -> list[ReceiptRecord]:
        """Receipts whose parent is this one (its replays), in log order."""
        ...

    def policy_as_of(self, tenant_id: str, position: int) -> PolicyState | None:
        """The bundle the tenant had published last at or before `position`."""
        ...

    def document_chunks(self, tenant_id: str, document_id: str, position: int) -> list[ChunkVersion]:
        """Every chunk version of the document recorded at or before `position`, as of it."""
        ...

    def documents_at_path(self, tenant_id: str, path: str, source: str | None) -> list[DocumentAtPath]:
        """The documents recorded at `path` (in `source`, or in any), at most 20."""
        ...

    def documents_scrubbed_after(self, tenant_id: str, position: int, limit: int) -> list[ScrubbedDocument]:
        """Documents with a chunk version live at `position` whose text was scrubbed
        (erased or expired) after it, at most `limit` of them: what no as-of view can
        read back any more, each with its path and its first scrub (position, basis, time)."""
        ...


class CitationView(Protocol):
    citation_id: str
    receipt_id: str
    document_id: str
    version_id: str | None
    chunk_id: str
    path: str
    locator: dict[str, Any]
    sensitivity: str
    expires_at: str | None
    position: int


class CitationReader(Protocol):
    def citation(self, tenant_id: str, citation_id: str, *, now: datetime | None = None) -> Any: ...

    def citation_text(self, citation: Any, sealer: Sealer) -> str: ...


@dataclass(frozen=True)
class IndexedChunk:
    """A chunk version as the search index holds it: metadata only (policy rules and
    filters look at these; the text stays sealed in the corpus)."""

    row: int
    live_from_position: int
    ordinal: int
    document_id: str
    path: str
    sensitivity: str


class CorpusView(Protocol):
    """One tenant's searchable corpus as of `position`: arrays over every chunk version
    the index holds (`live` marks those live at `position`), and postings per term."""

    @property
    def position(self) -> int: ...

    @property
    def live(self) -> Any:
        """numpy bool array: which chunk versions are live at `position`."""
        ...

    @property
    def lengths(self) -> Any:
        """numpy int64 array: scoring terms per chunk version."""
        ...

    @property
    def ordinals(self) -> Any: ...

    @property
    def document_numbers(self) -> Any:
        """numpy int64 array: a number per document (to count files)."""
        ...

    @property
    def restricted(self) -> Any:
        """numpy bool array: which chunk versions belong to `restricted` documents."""
        ...

    @property
    def change_logs(self) -> Any:
        """numpy bool array: which chunk versions belong to change logs (by path,
        `ledger.retrieval.change_logs`)."""
        ...

    @property
    def live_count(self) -> int: ...

    @property
    def total_length(self) -> int: ...

    def body_postings(self, term: str) -> tuple[Any, Any]:
        """(rows, term counts) of the live chunks whose text holds the term."""
        ...

    def field_postings(self, term: str) -> tuple[Any, Any]:
        """(rows, field bits: 1 title, 2 heading, 4 file name) of the live chunks."""
        ...

    def chunk(self, row: int) -> IndexedChunk: ...


class SearchIndexReader(Protocol):
    def refresh(self) -> int:
        """Catch the index up with the log; the position it reached."""
        ...

    def view(self, tenant_id: str, position: int) -> CorpusView: ...

    def chunk_states(self, tenant_id: str, chunks: list[IndexedChunk]) -> dict[int, ChunkState]:
        """The corpus rows (sealed text, ids, locators) of these chunk versions, by row."""
        ...


Order = Literal["asc", "desc"]


class PageRequest(TypedDict, total=False):
    """Which page of a list the caller asks for (a list's keywords beside its filter): the rows
    after `cursor` (None: the first page), at most `limit` of them, in `order` of log position.
    Left out: the first page of 50, oldest first."""

    cursor: str | None
    limit: int
    order: Order


ReceiptKind = Literal["search", "external", "replay"]
SEARCH_ENGINE_PREFIX = "citeledger-bm25@"  # the ledger's own searches; `external:<name>` the others


def receipt_kind(engine: str, mode: str) -> ReceiptKind:
    """What made a receipt: a replay, a search the ledger ran, or a retrieval another engine
    made and recorded (the receipt's `mode` and `engine`, said in one word)."""
    if mode == "as_of_replay":
        return "replay"
    return "search" if engine.startswith(SEARCH_ENGINE_PREFIX) else "external"


@dataclass(frozen=True)
class ReceiptFilter:
    """What a listing of receipts may be narrowed by (all given ones must hold)."""

    mode: str | None = None
    status: str | None = None
    kind: str | None = None  # search | external | replay (`receipt_kind`)
    engine: str | None = None
    actor: str | None = None
    trace_id: str | None = None
    run_id: str | None = None
    parent_receipt_id: str | None = None
    from_position: int | None = None  # inclusive
    to_position: int | None = None  # inclusive
    recorded_from: str | None = None  # inclusive, RFC 3339 UTC
    recorded_to: str | None = None  # exclusive
    task_id: str | None = None
    document_id: str | None = None  # receipts citing this document
    q: str | None = None  # words the question holds, all of them (the question index; audit.content)


class ReceiptLister(Protocol):
    """The receipt index read model (`projections.queries.ReadModels` implements it): a page
    of a tenant's receipts (`.items` with the index's columns, `.next_cursor`)."""

    def receipts(
        self,
        tenant_id: str,
        filters: ReceiptFilter = ...,
        *,
        count: bool = True,
        **paging: Unpack[PageRequest],
    ) -> Any: ...
