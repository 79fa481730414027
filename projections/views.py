"""What the read API answers: the views of receipts, citations, chunks and history rows,
their page and cursor, and the mapping from a read model's row to its view. `queries` runs the
SQL; this module knows no table."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, Literal, TypeVar

import orjson

from ledger.domain.timestamps import parse_timestamp
from projections.rows import from_row, json_column

T = TypeVar("T")
CitationState = Literal["live", "expired", "scrubbed"]


class InvalidCursor(ValueError):
    pass


class TextUnavailable(LookupError):
    """The text cannot be read back; `reason` is `chunk_retention_expired` or `chunk_not_found`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None
    total: int = 0  # how many match the filter (all pages), up to COUNT_LIMIT
    total_exact: bool = True  # False: more than `total` match


@dataclass(frozen=True)
class ReceiptView:
    tenant_id: str
    receipt_id: str
    position: int
    event_id: str
    recorded_at: str
    actor: str
    run_id: str | None
    trace_id: str | None
    engine: str
    mode: str
    status: str
    parent_receipt_id: str | None
    subject_id: str | None
    context_hash: str
    has_policy_snapshot: bool  # False only for legacy posts (field absent)
    policy_snapshot: dict[str, Any] | None
    citation_count: int
    body: dict[str, Any]
    kid: str
    signature: str


@dataclass(frozen=True)
class CitationView:
    tenant_id: str
    citation_id: str
    receipt_id: str
    position: int
    document_id: str
    version_id: str | None
    chunk_id: str
    path: str
    locator: dict[str, Any]
    score: str | None
    sensitivity: str
    expires_at: str | None
    state: CitationState
    snapshot: dict[str, Any] | None  # sealed; None once scrubbed
    scrubbed_position: int | None
    scrub_reason: str | None


@dataclass(frozen=True)
class ChunkView:
    tenant_id: str
    document_id: str
    version_id: str
    version: int
    chunk_id: str
    ordinal: int
    source: str
    path: str
    sensitivity: str
    content_sha256: str
    start_line: int
    end_line: int
    heading_path: dict[str, Any] | None  # sealed
    text: dict[str, Any] | None  # sealed; None once scrubbed
    text_commitment: str
    live_from_position: int
    live_to_position: int | None
    removed_reason: str | None
    scrubbed: bool


@dataclass(frozen=True)
class HistoryEntry:
    position: int
    tenant_id: str
    type: str
    actor: str
    run_id: str | None
    trace_id: str | None
    receipt_id: str | None
    event_id: str
    recorded_at: str


@dataclass(frozen=True)
class HistoryFilter:
    types: Sequence[str] | None = None
    actor: str | None = None
    trace_id: str | None = None
    run_id: str | None = None
    receipt_id: str | None = None
    from_position: int | None = None
    to_position: int | None = None
    recorded_from: str | None = None
    recorded_to: str | None = None


def encode_cursor(position: int) -> str:
    return base64.urlsafe_b64encode(f"p{position}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
        if not text.startswith("p"):
            raise ValueError
        return int(text[1:])
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidCursor("cursor is not one this API returned") from None


def receipt_view(row: Any, body: dict[str, Any]) -> ReceiptView:
    """The view of a receipt index row; `body` is its payload as the log holds it
    (`projections.receipt_index.receipt_bodies`)."""
    return from_row(
        ReceiptView,
        row,
        has_policy_snapshot=row["policy_snapshot"] is not None,
        policy_snapshot=json_column(row["policy_snapshot"]),
        body=body,
    )


def citation_view(row: Any, as_of: int | None, now: datetime | None) -> CitationView:
    scrubbed_at = row["scrubbed_position"]
    if scrubbed_at is not None and as_of is not None and scrubbed_at > as_of:
        scrubbed_at = None  # scrubbed later than the view's position
    state: CitationState = "live"
    if scrubbed_at is not None:
        state = "expired" if row["scrub_reason"] == "retention_expired" else "scrubbed"
    elif row["expires_at"] is not None and (now or datetime.now(UTC)) >= parse_timestamp(row["expires_at"]):
        state = "expired"
    return from_row(
        CitationView,
        row,
        locator=orjson.loads(row["locator"]),
        score=row["score"] or None,  # "" stands for a score the engine did not give
        state=state,
        snapshot=json_column(row["snapshot"]),
        scrubbed_position=scrubbed_at,
        scrub_reason=row["scrub_reason"] if scrubbed_at is not None else None,
    )


def chunk_view(row: Any, as_of: int | None) -> ChunkView:
    scrubbed_at = row["scrubbed_position"]
    live_to = row["live_to_position"]
    if as_of is not None and live_to is not None and live_to > as_of:
        live_to = None
    return from_row(
        ChunkView,
        row,
        heading_path=json_column(row["heading_path"]),
        text=json_column(row["text"]),
        live_to_position=live_to,
        removed_reason=row["removed_reason"] if live_to is not None else None,
        scrubbed=scrubbed_at is not None and (as_of is None or scrubbed_at <= as_of),
    )
