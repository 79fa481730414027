"""Use cases: record a markdown document version, remove a document."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from pydantic import ValidationError

from ledger.chunking import chunk_markdown
from ledger.claims import ClaimBusy, DocumentClaims
from ledger.entries import RecordedEvent
from ledger.events import MAX_CHUNKS_PER_DOCUMENT, Chunk, DocumentIngested, DocumentRemoved, Locator, Sealed
from ledger.idempotency import IdempotencyKey
from ledger.sealing import KeyDestroyed, document_key_ref, subject_key_ref
from ledger.usecases.commands import DocumentIn
from ledger.usecases.context import Caller, Result, UseCaseContext, entry_facts, record
from ledger.usecases.errors import Busy, Conflict, Invalid, NotFound, TooLarge


def default_document_id(tenant_id: str, source: str, path: str) -> str:
    """Stable per (tenant, source, path): a changed file becomes a new version of the same document."""
    return hashlib.sha256(f"{tenant_id}\0{source}\0{path}".encode()).hexdigest()[:32]


@contextmanager
def _claimed(claims: DocumentClaims, tenant_id: str, document_id: str) -> Iterator[None]:
    try:
        with claims.hold(tenant_id, document_id):
            yield
    except ClaimBusy:
        raise Busy(
            "another request is recording this document right now; retry", code="document_busy"
        ) from None


def ingest_document(
    ctx: UseCaseContext,
    claims: DocumentClaims,
    caller: Caller,
    doc: DocumentIn,
    idempotency: IdempotencyKey | None = None,
) -> Result:
    """A new version when the text changed; the current one (`dedup`) when it did not."""
    tenant = caller.tenant_id
    content_sha256 = hashlib.sha256(doc.text.encode("utf-8")).hexdigest()
    pieces = chunk_markdown(doc.text)
    if not pieces:
        raise Invalid("the document has no text to chunk", code="empty_document")
    if len(pieces) > MAX_CHUNKS_PER_DOCUMENT:
        raise TooLarge(f"document exceeds the {MAX_CHUNKS_PER_DOCUMENT} chunk limit", code="too_many_chunks")
    document_id = doc.document_id or default_document_id(tenant, doc.source, doc.path)
    with _claimed(claims, tenant, document_id):
        ctx.lookups.refresh()
        current = ctx.lookups.document(tenant, document_id)
        if current is not None and not current.removed and current.content_sha256 == content_sha256:
            return Result(
                {
                    "document_id": document_id,
                    "version": current.version,
                    "version_id": current.version_id,
                    "position": current.position,
                    "content_sha256": content_sha256,
                    "dedup": True,
                },
                created=False,
            )
        version_id = uuid.uuid4().hex
        key_ref = document_key_ref(tenant, document_id)
        # A document about a data subject is also sealed under their key: erasing the
        # subject erases it too, whichever of the two keys goes first.
        layers = [subject_key_ref(tenant, doc.subject_id)] if doc.subject_id else []

        def seal(text: str) -> Sealed:
            return ctx.sealer.seal(text, tenant_id=tenant, key_ref=key_ref, extra_key_refs=layers)

        try:
            payload = DocumentIngested(
                document_id=document_id,
                version_id=version_id,
                version=current.version + 1 if current is not None else 1,
                supersedes_version_id=current.version_id if current is not None else None,
                source=doc.source,
                path=doc.path,
                title=seal(doc.title) if doc.title else None,
                content_sha256=content_sha256,
                sensitivity=doc.sensitivity,
                retention_days=doc.retention_days,
                subject_id=doc.subject_id,
                chunks=[
                    Chunk(
                        chunk_id=f"{version_id[:16]}-{piece.ordinal}",
                        ordinal=piece.ordinal,
                        locator=Locator(
                            start_line=piece.start_line,
                            end_line=piece.end_line,
                            heading_path=seal(" / ".join(piece.heading_path)) if piece.heading_path else None,
                        ),
                        text=seal(piece.text),
                    )
                    for piece in pieces
                ],
            )
        except KeyDestroyed:
            raise Conflict(
                "this document's key was destroyed; use a new document_id", code="document_scrubbed"
            ) from None
        except ValidationError as exc:
            first = exc.errors()[0]
            raise Invalid(
                f"{'.'.join(map(str, first['loc']))}: {first['msg']}", code="invalid_document"
            ) from None

        def answer(events: Sequence[RecordedEvent]) -> dict[str, object]:
            return {
                "document_id": document_id,
                "version": payload.version,
                "version_id": version_id,
                "supersedes_version_id": payload.supersedes_version_id,
                **entry_facts(events[0]),
                "content_sha256": content_sha256,
                "chunks": [
                    {
                        "chunk_id": c.chunk_id,
                        "ordinal": c.ordinal,
                        "start_line": c.locator.start_line,
                        "end_line": c.locator.end_line,
                    }
                    for c in payload.chunks
                ],
            }

        return record(ctx, caller, [payload], answer, idempotency)


def remove_document(
    ctx: UseCaseContext,
    claims: DocumentClaims,
    caller: Caller,
    document_id: str,
    reason: str,
    idempotency: IdempotencyKey | None = None,
) -> Result:
    tenant = caller.tenant_id
    with _claimed(claims, tenant, document_id):
        ctx.lookups.refresh()
        current = ctx.lookups.document(tenant, document_id)
        if current is None or current.removed:
            raise NotFound("document")
        payload = DocumentRemoved(document_id=document_id, reason=reason)  # type: ignore[arg-type]
        return record(
            ctx,
            caller,
            [payload],
            lambda events: {"document_id": document_id, "removed": True, **entry_facts(events[0])},
            idempotency,
        )
