"""Documents: record a markdown document version (JSON or multipart upload), remove one."""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any

from litestar import Response, Router, delete, post
from litestar.datastructures import UploadFile
from litestar.enums import RequestEncodingType
from litestar.params import Body, HeaderParameter, Parameter, QueryParameter
from pydantic import ValidationError

from api.auth import Principal, requires
from api.catalog import Catalog
from api.chunking import chunk_markdown
from api.contract import ApiError, Correlation, not_found
from api.routes.common import AnyRequest, caller, fingerprint, ok
from api.schemas import LIMITS, DocumentIn, RemoveDocumentIn
from api.services import Services
from ledger.entries import EventDraft
from ledger.events import (
    MAX_CHUNKS_PER_DOCUMENT,
    Chunk,
    DocumentIngested,
    DocumentRemoved,
    Locator,
    Sealed,
)
from ledger.sealing import KeyDestroyed, document_key_ref, subject_key_ref

_locks: dict[tuple[str, str], threading.Lock] = {}
_locks_guard = threading.Lock()


def _process_lock(tenant: str, document_id: str) -> threading.Lock:
    with _locks_guard:
        if len(_locks) > 10_000:
            _locks.clear()
        return _locks.setdefault((tenant, document_id), threading.Lock())


@contextmanager
def _document_lock(services: Services, tenant: str, document_id: str) -> Iterator[None]:
    """Serialise read-current-version-then-append for one document: a thread lock within
    this worker, and a claim row in the database across workers (see `Catalog.document_claim`)."""
    with _process_lock(tenant, document_id):
        try:
            with services.catalog.document_claim(tenant, document_id):
                yield
        except Catalog.Busy:
            raise ApiError(
                409,
                "document_busy",
                "another request is recording this document right now; retry",
                retryable=True,
            ) from None


def default_document_id(tenant: str, source: str, path: str) -> str:
    """Stable per (tenant, source, path): a changed file becomes a new version of the same document."""
    return hashlib.sha256(f"{tenant}\0{source}\0{path}".encode()).hexdigest()[:32]


def ingest(
    services: Services, principal: Principal, ids: Correlation, doc: DocumentIn
) -> tuple[int, dict[str, Any]]:
    tenant = principal.tenant
    ledger, catalog = services.ledger, services.catalog
    text = doc.text
    content_sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
    pieces = chunk_markdown(text)
    if not pieces:
        raise ApiError(422, "empty_document", "the document has no text to chunk")
    if len(pieces) > MAX_CHUNKS_PER_DOCUMENT:
        raise ApiError(413, "too_many_chunks", f"document exceeds the {MAX_CHUNKS_PER_DOCUMENT} chunk limit")
    document_id = doc.document_id or default_document_id(tenant, doc.source, doc.path)
    with _document_lock(services, tenant, document_id):
        catalog.catch_up(ledger)
        current = catalog.document(tenant, document_id)
        if current is not None and not current.removed and current.content_sha256 == content_sha256:
            return 200, {
                "document_id": document_id,
                "version": current.version,
                "version_id": current.version_id,
                "position": current.position,
                "content_sha256": content_sha256,
                "dedup": True,
            }
        version = current.version + 1 if current is not None else 1
        version_id = uuid.uuid4().hex
        key_ref = document_key_ref(tenant, document_id)
        # A document about a data subject is also sealed under their key: erasing the
        # subject erases it too, whichever of the two keys goes first.
        layers = [subject_key_ref(tenant, doc.subject_id)] if doc.subject_id else []

        def seal(text: str, *, tenant_id: str, key_ref: str) -> Sealed:
            return services.ledger.sealer.seal(
                text, tenant_id=tenant_id, key_ref=key_ref, extra_key_refs=layers
            )

        try:
            chunks = [
                Chunk(
                    chunk_id=f"{version_id[:16]}-{piece.ordinal}",
                    ordinal=piece.ordinal,
                    locator=Locator(
                        start_line=piece.start_line,
                        end_line=piece.end_line,
                        heading_path=seal(" / ".join(piece.heading_path), tenant_id=tenant, key_ref=key_ref)
                        if piece.heading_path
                        else None,
                    ),
                    text=seal(piece.text, tenant_id=tenant, key_ref=key_ref),
                )
                for piece in pieces
            ]
            payload = DocumentIngested(
                document_id=document_id,
                version_id=version_id,
                version=version,
                supersedes_version_id=current.version_id if current is not None else None,
                source=doc.source,
                path=doc.path,
                title=seal(doc.title, tenant_id=tenant, key_ref=key_ref) if doc.title else None,
                content_sha256=content_sha256,
                sensitivity=doc.sensitivity,
                retention_days=doc.retention_days,
                subject_id=doc.subject_id,
                chunks=chunks,
            )
        except KeyDestroyed:
            raise ApiError(
                409, "document_scrubbed", "this document's key was destroyed; use a new document_id"
            ) from None
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ApiError(
                422, "invalid_document", f"{'.'.join(map(str, first['loc']))}: {first['msg']}"
            ) from None
        draft = EventDraft(
            type="DocumentIngested",
            tenant_id=tenant,
            actor=principal.actor,
            payload=payload,
            run_id=ids.run_id,
            trace_id=ids.trace_id,
        )
        event = services.append([draft], tenant)[0]
    return 201, {
        "document_id": document_id,
        "version": version,
        "version_id": version_id,
        "supersedes_version_id": payload.supersedes_version_id,
        "position": event.position,
        "event_id": event.event_id,
        "kid": event.kid,
        "signature": event.signature,
        "content_sha256": content_sha256,
        "chunks": [
            {
                "chunk_id": c.chunk_id,
                "ordinal": c.ordinal,
                "start_line": c.locator.start_line,
                "end_line": c.locator.end_line,
            }
            for c in chunks
        ],
        "dedup": False,
    }


async def _record(request: AnyRequest, doc: DocumentIn, idempotency_key: str | None) -> Response[Any]:
    services, principal, ids = caller(request)
    fp = fingerprint("POST /v1/documents", doc.model_dump(mode="json"))
    status, body = await services.blocking(
        services.idempotency.run,
        principal.tenant,
        idempotency_key,
        fp,
        lambda: ingest(services, principal, ids, doc),
    )
    return ok(request, body, status)


IdempotencyKey = Annotated[
    str | None, HeaderParameter(name="Idempotency-Key", required=False, max_length=255)
]


@post("/", guards=[requires("ingest.write")], status_code=201, summary="Record a markdown document (JSON)")
async def post_document(
    request: AnyRequest, data: DocumentIn, idempotency_key: IdempotencyKey = None
) -> Response[Any]:
    return await _record(request, data, idempotency_key)


@dataclass
class DocumentUpload:
    file: UploadFile
    path: str | None = None
    title: str | None = None
    source: str = "upload"
    sensitivity: str = "internal"
    retention_days: int | None = None
    document_id: str | None = None


@post(
    "/upload",
    guards=[requires("ingest.write")],
    status_code=201,
    summary="Record a markdown document (multipart)",
)
async def upload_document(
    request: AnyRequest,
    data: Annotated[DocumentUpload, Body(media_type=RequestEncodingType.MULTI_PART)],
    idempotency_key: IdempotencyKey = None,
) -> Response[Any]:
    raw = await data.file.read(LIMITS.max_document_chars * 4 + 1)
    if len(raw) > LIMITS.max_document_chars * 4:
        raise ApiError(413, "payload_too_large", "uploaded file exceeds the document size limit")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, "bad_request", "uploaded file is not UTF-8 text") from None
    try:
        doc = DocumentIn(
            path=data.path or data.file.filename or "upload.md",
            text=text,
            title=data.title,
            source=data.source,
            sensitivity=data.sensitivity,
            retention_days=data.retention_days,
            document_id=data.document_id,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ApiError(
            400, "bad_request", f"invalid request: {'.'.join(map(str, first['loc']))}: {first['msg']}"
        ) from None
    return await _record(request, doc, idempotency_key)


def remove(
    services: Services, principal: Principal, ids: Correlation, document_id: str, reason: str
) -> tuple[int, dict[str, Any]]:
    tenant = principal.tenant
    with _document_lock(services, tenant, document_id):
        services.catalog.catch_up(services.ledger)
        current = services.catalog.document(tenant, document_id)
        if current is None or current.removed:
            raise not_found("document")
        draft = EventDraft(
            type="DocumentRemoved",
            tenant_id=tenant,
            actor=principal.actor,
            payload=DocumentRemoved(document_id=document_id, reason=reason),  # type: ignore[arg-type]
            run_id=ids.run_id,
            trace_id=ids.trace_id,
        )
        event = services.append([draft], tenant)[0]
    return 200, {
        "document_id": document_id,
        "removed": True,
        "position": event.position,
        "event_id": event.event_id,
        "kid": event.kid,
        "signature": event.signature,
        "dedup": False,
    }


@delete(
    "/{document_id:str}", guards=[requires("ingest.write")], status_code=200, summary="Record DocumentRemoved"
)
async def delete_document(
    request: AnyRequest,
    document_id: Annotated[str, Parameter(max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")],
    reason: Annotated[
        str, QueryParameter(name="reason", pattern="^(source_deleted|withdrawn)$")
    ] = "withdrawn",
    idempotency_key: IdempotencyKey = None,
) -> Response[Any]:
    services, principal, ids = caller(request)
    RemoveDocumentIn(reason=reason)
    fp = fingerprint(f"DELETE /v1/documents/{document_id}", {"reason": reason})
    status, body = await services.blocking(
        services.idempotency.run,
        principal.tenant,
        idempotency_key,
        fp,
        lambda: remove(services, principal, ids, document_id, reason),
    )
    return ok(request, body, status)


router = Router(
    path="/v1/documents", route_handlers=[post_document, upload_document, delete_document], tags=["documents"]
)
