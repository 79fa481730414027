"""Use case: read a cited chunk back under retention rules (the seed `000` contract).

The text while the citation is live; `CitationUnavailable` with one message
whether the id never existed, is another tenant's, expired or was scrubbed
(the reason travels separately); `AccessDenied` for a restricted chunk without
`knowledge.restricted.read`, recorded as a signed AccessDenied entry.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from ledger.events import MAX_IDENTIFIER_CHARS
from ledger.events import AccessDenied as AccessDeniedEvent
from ledger.timestamps import parse_timestamp
from ledger.usecases.context import Caller, UseCaseContext, record
from ledger.usecases.errors import AccessDenied, CitationUnavailable
from ledger.usecases.ports import CitationReader
from ledger.usecases.scopes import RESTRICTED_SCOPE

_ID_MAX = MAX_IDENTIFIER_CHARS


def _expired(expires_at: str | None, now: dt.datetime) -> bool:
    if expires_at is None:
        return False
    return parse_timestamp(expires_at) <= now


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
    if citation.sensitivity == "restricted" and RESTRICTED_SCOPE not in caller.scopes:
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
        text = reader.citation_text(citation, ctx.sealer)
    except LookupError:
        raise CitationUnavailable("chunk_retention_expired") from None
    return {
        "citation_id": citation.citation_id,
        "chunk_text": text,
        "receipt_id": citation.receipt_id,
        "document_id": citation.document_id,
        "version_id": citation.version_id,
        "chunk_id": citation.chunk_id,
        "path": citation.path,
        "locator": citation.locator,
        "sensitivity": citation.sensitivity,
        "expires_at": citation.expires_at,
        "position": citation.position,
    }
