"""Use case: read a cited chunk back under retention rules (the seed `000` contract).

The text while the citation is live; `CitationUnavailable` with one message
whether the id never existed, is another tenant's, expired or was scrubbed
(the reason travels separately); `AccessDenied` for a restricted chunk without
`knowledge.restricted.read`, recorded as a signed AccessDenied entry.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from ledger.domain.events import DOCUMENT_CHUNK_TYPES
from ledger.domain.events import AccessDenied as AccessDeniedEvent
from ledger.domain.fields import MAX_IDENTIFIER_CHARS
from ledger.domain.timestamps import parse_timestamp
from ledger.usecases.context import Caller, UseCaseContext, record
from ledger.usecases.errors import AccessDenied, CitationUnavailable
from ledger.usecases.ports import ChunkState, CitationReader
from ledger.usecases.scopes import RESTRICTED_SCOPE
from ledger.usecases.visibility import may_see

_ID_MAX = MAX_IDENTIFIER_CHARS


def _expired(expires_at: str | None, now: dt.datetime) -> bool:
    if expires_at is None:
        return False
    return parse_timestamp(expires_at) <= now


def document_rules(
    ctx: UseCaseContext, chunk: ChunkState | None, read: dict[int, Any] | None = None
) -> dict[str, Any] | None:
    """The cited version's sensitivity and retention, and which rule set each (`source`,
    `front_matter`, `default`; null: posted with the document, or recorded before rules
    were named), as its DocumentIngested entry says. `read`: entries already read by
    position (a receipt citing one version many times reads it once)."""
    if chunk is None:
        return None
    read = {} if read is None else read
    if chunk.position not in read:
        read[chunk.position] = ctx.ledger.get(chunk.position)
    event = read[chunk.position]
    if event is None or event.type not in DOCUMENT_CHUNK_TYPES:  # either carries the rules
        return None
    payload = event.payload
    return {
        "sensitivity": {"value": payload["sensitivity"], "set_by": payload.get("sensitivity_origin")},
        "retention_days": {"value": payload.get("retention_days"), "set_by": payload.get("retention_origin")},
    }


def _as_recorded(
    ctx: UseCaseContext, tenant: str, citation: Any
) -> tuple[str, dict[str, int] | None, ChunkState]:
    """The chunk's text as the ledger recorded it at ingest, where the citation's snippet
    sits in it (None for citations recorded before snippets were checked), and the chunk's
    source. Raises LookupError when the text is gone."""
    chunk = ctx.lookups.chunks(tenant, [(citation.document_id, citation.chunk_id)]).get(
        (citation.document_id, citation.chunk_id)
    )
    if chunk is None or chunk.text is None:
        raise LookupError(citation.citation_id)
    text = ctx.sealer.unseal(chunk.text, tenant_id=tenant)
    receipt = ctx.lookups.receipt(tenant, citation.receipt_id)
    entries = receipt.payload["selected_entries"] if receipt is not None else []
    span = next((e.get("snippet_span") for e in entries if e["citation_id"] == citation.citation_id), None)
    return text, span, chunk


def read_citation(
    ctx: UseCaseContext, reader: CitationReader, caller: Caller, citation_id: str
) -> dict[str, Any]:
    tenant = caller.tenant_id
    # Any shape of id (huge, unicode, path-like) is just an id that is not there.
    if len(citation_id) > _ID_MAX or not citation_id.isascii():
        raise CitationUnavailable("chunk_not_found")
    now = ctx.clock()
    citation = reader.citation(tenant, citation_id, now=now)
    if citation is None or _expired(citation.expires_at, now):
        # Expired counts as not found whether or not the scrub job has run yet.
        raise CitationUnavailable("chunk_not_found")
    if not may_see(caller.scopes, citation.sensitivity):
        denial = AccessDeniedEvent(
            resource_type="citation",
            resource_id=citation_id,
            required_scope=RESTRICTED_SCOPE,
            reason="restricted_scope_required",
        )
        record(ctx, caller, [denial], lambda events: {})
        raise AccessDenied(
            f"The requested citation requires {RESTRICTED_SCOPE}", reason="restricted_scope_required"
        )
    try:
        # The citation's own snapshot is the retention gate: its expiry key goes at the end of
        # its window, the document's key on erasure.
        reader.citation_text(citation, ctx.sealer)
        chunk_text, span, chunk = _as_recorded(ctx, tenant, citation)
    except LookupError:
        raise CitationUnavailable("chunk_retention_expired") from None
    return {
        "citation_id": citation.citation_id,
        "chunk_text": chunk_text,
        "cited_span": span,
        "receipt_id": citation.receipt_id,
        "document_id": citation.document_id,
        "version_id": citation.version_id,
        "chunk_id": citation.chunk_id,
        "source": chunk.source,
        "path": citation.path,
        "locator": citation.locator,
        "sensitivity": citation.sensitivity,
        "rules": document_rules(ctx, chunk),
        "expires_at": citation.expires_at,
        "position": citation.position,
    }
