"""Use cases: record a markdown document version, remove a document, and both for many
documents in one write (a source sync)."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Literal

from pydantic import ValidationError

from ledger.domain.document_parts import ChunkTooLarge, all_chunks, split_version
from ledger.domain.entries import RecordedEvent, prepare
from ledger.domain.events import Chunk, DocumentContinued, DocumentIngested, DocumentRemoved, Locator, Sealed
from ledger.domain.fields import MAX_CHUNKS_PER_DOCUMENT, RemovalReason
from ledger.domain.payloads import EventRejected
from ledger.retrieval.chunking import TextChunk, chunk_markdown, packed, stable_chunk_ids
from ledger.schemas.requests import DocumentIn
from ledger.storage.claims import ClaimBusy, DocumentClaims
from ledger.usecases.context import Caller, Result, UseCaseContext, draft, entry_facts, record
from ledger.usecases.errors import Busy, Conflict, Invalid, NotFound, TooLarge, UseCaseError
from ledger.usecases.policy import warm_ingested
from ledger.usecases.ports import DocumentState
from ledger.writing.idempotency import bound, sealed_refs
from ledger.writing.sealing import KeyDestroyed, document_key_ref, subject_key_ref


def default_document_id(tenant_id: str, source: str, path: str) -> str:
    """Stable per (tenant, source, path): a changed file becomes a new version of the same document."""
    return hashlib.sha256(f"{tenant_id}\0{source}\0{path}".encode()).hexdigest()[:32]


@contextmanager
def _claimed(hold: AbstractContextManager[None], which: str) -> Iterator[None]:
    """Hold a document claim (or several) for the block; another writer's claim is `Busy`."""
    try:
        with hold:
            yield
    except ClaimBusy:
        raise Busy(f"another request is recording {which} right now; retry", code="document_busy") from None


def _pieces(doc: DocumentIn) -> list[TextChunk]:
    pieces = packed(doc.text, chunk_markdown(doc.text), MAX_CHUNKS_PER_DOCUMENT)
    if not pieces:
        raise Invalid("the document has no text to chunk", code="empty_document")
    if len(pieces) > MAX_CHUNKS_PER_DOCUMENT:
        raise TooLarge(f"document exceeds the {MAX_CHUNKS_PER_DOCUMENT} chunk limit", code="too_many_chunks")
    return pieces


def _unchanged(current: DocumentState | None, content_sha256: str, doc: DocumentIn) -> bool:
    """Same text under the same rules: nothing to record. A changed sensitivity or retention
    is a new version, so the log says when the rule changed."""
    return (
        current is not None
        and not current.removed
        and current.content_sha256 == content_sha256
        and current.sensitivity == doc.sensitivity
        and current.retention_days == doc.retention_days
    )


def _dedup_answer(document_id: str, current: DocumentState) -> dict[str, object]:
    return {
        "document_id": document_id,
        "version": current.version,
        "version_id": current.version_id,
        "position": current.position,
        "content_sha256": current.content_sha256,
        "dedup": True,
    }


def _new_version(
    ctx: UseCaseContext,
    tenant: str,
    doc: DocumentIn,
    document_id: str,
    content_sha256: str,
    pieces: list[TextChunk],
    current: DocumentState | None,
    origins: tuple[str, str] | None = None,
) -> list[DocumentIngested | DocumentContinued]:
    """The next version's entries (`ledger.domain.document_parts`: a head, and continuations when
    its chunks do not fit one entry), every text sealed; chunk ids from content (a section
    that did not change keeps its id)."""
    version_id = uuid.uuid4().hex
    key_ref = document_key_ref(tenant, document_id)
    # A document about a data subject is also sealed under their key: erasing the
    # subject erases it too, whichever of the two keys goes first.
    layers = [subject_key_ref(tenant, doc.subject_id)] if doc.subject_id else []

    def seal(text: str) -> Sealed:
        return ctx.sealer.seal(text, tenant_id=tenant, key_ref=key_ref, extra_key_refs=layers)

    try:
        version = DocumentIngested(
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
            sensitivity_origin=origins[0] if origins else None,  # type: ignore[arg-type]
            retention_origin=origins[1] if origins else None,  # type: ignore[arg-type]
            chunks=[
                Chunk(
                    chunk_id=chunk_id,
                    ordinal=piece.ordinal,
                    locator=Locator(
                        start_line=piece.start_line,
                        end_line=piece.end_line,
                        heading_path=seal(" / ".join(piece.heading_path)) if piece.heading_path else None,
                    ),
                    text=seal(piece.text),
                )
                for piece, chunk_id in zip(pieces, stable_chunk_ids(document_id, pieces), strict=True)
            ],
        )
        return split_version(version)
    except ChunkTooLarge as exc:
        raise TooLarge(str(exc), code="entry_too_large") from None
    except KeyDestroyed:
        raise Conflict(
            "this document's key was destroyed; use a new document_id", code="document_scrubbed"
        ) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        raise Invalid(
            f"{'.'.join(map(str, first['loc']))}: {first['msg']}", code="invalid_document"
        ) from None


def _version_answer(
    parts: list[DocumentIngested | DocumentContinued], event: RecordedEvent
) -> dict[str, object]:
    payload = parts[0]
    assert isinstance(payload, DocumentIngested)  # the head comes first
    return {
        "document_id": payload.document_id,
        "version": payload.version,
        "version_id": payload.version_id,
        "supersedes_version_id": payload.supersedes_version_id,
        **entry_facts(event),
        "content_sha256": payload.content_sha256,
        "chunks": [
            {
                "chunk_id": c.chunk_id,
                "ordinal": c.ordinal,
                "start_line": c.locator.start_line,
                "end_line": c.locator.end_line,
            }
            for c in all_chunks(parts)
        ],
    }


def ingest_document(ctx: UseCaseContext, claims: DocumentClaims, caller: Caller, doc: DocumentIn) -> Result:
    """A new version when the text changed; the current one (`dedup`) when it did not."""
    tenant = caller.tenant_id
    content_sha256 = hashlib.sha256(doc.text.encode("utf-8")).hexdigest()
    pieces = _pieces(doc)
    document_id = doc.document_id or default_document_id(tenant, doc.source, doc.path)
    with _claimed(claims.hold(tenant, document_id), "this document"):
        ctx.lookups.refresh()
        current = ctx.lookups.document(tenant, document_id)
        if current is not None and _unchanged(current, content_sha256, doc):
            return Result(_dedup_answer(document_id, current), created=False)
        parts = _new_version(ctx, tenant, doc, document_id, content_sha256, pieces, current)
        # The request holds the document's text: its record is bound to the keys sealing it.
        texts_refs = sealed_refs(parts[0].title, *(chunk.text for chunk in all_chunks(parts)))
        idempotency = bound(caller.idempotency, ctx.sealer, texts_refs)
        answer = lambda events: _version_answer(parts, events[0])  # noqa: E731
        result = record(ctx, caller, parts, answer, idempotency)
    warm_ingested(ctx, tenant, [doc.path], caller.deadline)  # the live bundle's verdict, judged once now
    return result


# Entries per transaction of a batch: under the group commit's per-request cap (500).
WRITE_EVENTS = 400

Planned = tuple[int, Sequence[DocumentIngested | DocumentContinued | DocumentRemoved]]


def _write_groups(planned: list[Planned]) -> Iterator[list[Planned]]:
    """Whole versions, in order, at most `WRITE_EVENTS` entries a group (a version larger
    than that goes alone, and the committer's own cap decides)."""
    group: list[Planned] = []
    size = 0
    for item in planned:
        if group and size + len(item[1]) > WRITE_EVENTS:
            yield group
            group, size = [], 0
        group.append(item)
        size += len(item[1])
    if group:
        yield group


@dataclass(frozen=True)
class BatchOutcome:
    """What became of one document of a batch: `ingested`, `unchanged`, `removed` or
    `refused` (with the refusal's code and message, which never hold document text)."""

    document_id: str
    status: Literal["ingested", "unchanged", "removed", "refused"]
    code: str | None = None
    message: str | None = None
    version: int | None = None
    position: int | None = None
    content_sha256: str | None = None


def ingest_batch(
    ctx: UseCaseContext,
    claims: DocumentClaims,
    caller: Caller,
    docs: Sequence[DocumentIn],
    removals: Sequence[str] = (),
    *,
    reason: RemovalReason = "source_deleted",
    origins: Sequence[tuple[str, str]] | None = None,
) -> list[BatchOutcome]:
    """Many documents (and removals) in one write: the same rules as `ingest_document` and
    `remove_document`, one transaction (one per `WRITE_EVENTS` entries when versions are split
    in many; a version's entries always share one). A document the rules refuse is answered `refused`
    and never fails the others. Outcomes come in the order given: docs, then removals."""
    tenant = caller.tenant_id
    outcomes: dict[int, BatchOutcome] = {}
    planned: list[Planned] = []
    targets = [doc.document_id or default_document_id(tenant, doc.source, doc.path) for doc in docs]
    hashes = [hashlib.sha256(doc.text.encode("utf-8")).hexdigest() for doc in docs]

    def unchanged(index: int, current: DocumentState | None) -> bool:
        if current is None or not _unchanged(current, hashes[index], docs[index]):
            return False
        outcomes[index] = BatchOutcome(
            targets[index],
            "unchanged",
            version=current.version,
            position=current.position,
            content_sha256=hashes[index],
        )
        return True

    ctx.lookups.refresh()
    # Answering "unchanged" writes nothing, so it needs no claim; the rest are checked again
    # under their claims (another writer may have recorded them in between).
    before = ctx.lookups.documents(tenant, targets)
    pending = [index for index in range(len(docs)) if not unchanged(index, before.get(targets[index]))]
    claimed = sorted({targets[index] for index in pending} | set(removals))  # one order: no deadlock
    with _claimed(claims.hold_many(tenant, claimed), "one of these documents"):
        current_of: dict[str, DocumentState] = {}
        if claimed:
            ctx.lookups.refresh()
            current_of = ctx.lookups.documents(tenant, claimed)
            # New documents' keys in one transaction rather than one each.
            ctx.sealer.keys.ensure([document_key_ref(tenant, targets[index]) for index in pending], tenant)
        for index in pending:
            doc, document_id = docs[index], targets[index]
            current = current_of.get(document_id)
            if unchanged(index, current):
                continue
            try:
                parts = _new_version(
                    ctx,
                    tenant,
                    doc,
                    document_id,
                    hashes[index],
                    _pieces(doc),
                    current,
                    origins[index] if origins is not None else None,
                )
                for part in parts:
                    prepare(draft(caller, part))  # refused here (too large), not in the shared write
                planned.append((index, parts))
            except (UseCaseError, EventRejected) as exc:
                code = exc.code if isinstance(exc, UseCaseError) else "too_large"
                message = exc.message if isinstance(exc, UseCaseError) else str(exc)
                outcomes[index] = BatchOutcome(document_id, "refused", code=code, message=message)
        for offset, document_id in enumerate(removals, start=len(docs)):
            current = current_of.get(document_id)
            if current is None or current.removed:
                outcomes[offset] = BatchOutcome(
                    document_id, "refused", code="not_found", message="document not found"
                )
                continue
            planned.append((offset, [DocumentRemoved(document_id=document_id, reason=reason)]))
        for group in _write_groups(planned):
            outcome = ctx.write(
                [draft(caller, part) for _, entries in group for part in entries],
                tenant_id=tenant,
                deadline=caller.deadline,
            )
            heads = iter(outcome.events)
            for index, entries in group:
                event = next(heads)
                for _ in entries[1:]:
                    next(heads)  # a version's continuations: answered by its head
                written = entries[0]
                if isinstance(written, DocumentIngested):
                    outcomes[index] = BatchOutcome(
                        written.document_id,
                        "ingested",
                        version=written.version,
                        position=event.position,
                        content_sha256=written.content_sha256,
                    )
                else:
                    outcomes[index] = BatchOutcome(written.document_id, "removed", position=event.position)
    # The live bundle's verdicts on the new paths, judged once now rather than by a search.
    ingested = [docs[i].path for i in range(len(docs)) if outcomes[i].status == "ingested"]
    warm_ingested(ctx, caller.tenant_id, ingested, caller.deadline)
    return [outcomes[index] for index in range(len(docs) + len(removals))]


def remove_document(
    ctx: UseCaseContext, claims: DocumentClaims, caller: Caller, document_id: str, reason: str
) -> Result:
    tenant = caller.tenant_id
    with _claimed(claims.hold(tenant, document_id), "this document"):
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
            caller.idempotency,
        )
