"""Documents: record a markdown document version (JSON or multipart upload), remove one."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Annotated, Any

from litestar import Response, Router, delete, post
from litestar.datastructures import UploadFile
from litestar.enums import RequestEncodingType
from litestar.params import Body, JSONBody, Parameter, QueryParameter
from pydantic import ValidationError

from api.api_error import ApiError
from api.auth import requires
from api.contract import rule_refusal
from api.openapi import contract
from api.routes.common import AnyRequest, CallerDep, IdempotencyKeyHeader, ServicesDep, write
from api.services import Services
from ledger.domain.fields import IDENTIFIER_PATTERN, MAX_IDENTIFIER_CHARS
from ledger.schemas.answers import DocumentOut, DocumentRemovedOut
from ledger.schemas.requests import MAX_DOCUMENT_CHARS, DocumentIn
from ledger.usecases.context import Caller
from ledger.usecases.documents import ingest_document, remove_document


async def _record(
    request: AnyRequest, services: Services, caller: Caller, doc: DocumentIn, key: str | None
) -> Response[Any]:
    return await write(
        request,
        services,
        caller,
        key,
        "POST /v1/documents",
        doc.model_dump(mode="json"),
        lambda idem: ingest_document(services.context, services.claims, caller, doc, idem),
    )


@post(
    "/",
    guards=[requires("ingest.write")],
    status_code=201,
    summary="Record a markdown document (JSON)",
    **contract(409, 413, 422, dedup=DocumentOut),
)
async def post_document(
    request: AnyRequest,
    services: ServicesDep,
    caller: CallerDep,
    data: JSONBody[DocumentIn],
    idempotency_key: IdempotencyKeyHeader = None,
) -> Response[DocumentOut]:
    return await _record(request, services, caller, data, idempotency_key)


@dataclass
class DocumentUpload:
    # A file part, or a plain form field holding the text (msgspec takes no UploadFile | str).
    file: Any
    path: str | None = None
    title: str | None = None
    source: str = "upload"
    sensitivity: str = "internal"
    retention_days: int | None = None
    document_id: str | None = None


UPLOAD_FIELDS = frozenset(field.name for field in fields(DocumentUpload))


@post(
    "/upload",
    guards=[requires("ingest.write")],
    status_code=201,
    summary="Record a markdown document (multipart)",
    **contract(409, 413, 422, dedup=DocumentOut),
)
async def upload_document(
    request: AnyRequest,
    services: ServicesDep,
    caller: CallerDep,
    data: Annotated[DocumentUpload, Body(media_type=RequestEncodingType.MULTI_PART)],
    idempotency_key: IdempotencyKeyHeader = None,
) -> Response[DocumentOut]:
    # Litestar drops form fields the form does not name; a misspelt `retention_day` would
    # quietly give the default window, so an unknown field is refused.
    unknown = sorted(set((await request.form()).keys()) - UPLOAD_FIELDS)
    if unknown:
        raise ApiError(
            422,
            "unknown_field",
            f"{unknown[0][:64]!r} is not a field of this form (fields: {', '.join(sorted(UPLOAD_FIELDS))})",
        )
    if isinstance(data.file, str):
        raw, filename = data.file.encode("utf-8", "surrogatepass"), None
    elif isinstance(data.file, UploadFile):
        raw, filename = await data.file.read(MAX_DOCUMENT_CHARS * 4 + 1), data.file.filename
    else:
        raise ApiError(400, "bad_request", "invalid request: file: one markdown file or text field")
    if len(raw) > MAX_DOCUMENT_CHARS * 4:
        raise ApiError(413, "payload_too_large", "uploaded file exceeds the document size limit")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, "bad_request", "uploaded file is not UTF-8 text") from None
    try:
        doc = DocumentIn(
            # A `path` field that is there but empty is refused like any bad path, not replaced.
            path=data.path if data.path is not None else (filename or "upload.md"),
            text=text,
            title=data.title,
            source=data.source,
            sensitivity=data.sensitivity,  # type: ignore[arg-type]  # validated by the model
            retention_days=data.retention_days,
            document_id=data.document_id,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise rule_refusal(exc.errors()) or ApiError(
            400, "bad_request", f"invalid request: {'.'.join(map(str, first['loc']))}: {first['msg']}"
        ) from None
    return await _record(request, services, caller, doc, idempotency_key)


@delete(
    "/{document_id:str}",
    guards=[requires("ingest.write")],
    status_code=200,
    summary="Record DocumentRemoved",
    **contract(404, 409, 422),
)
async def delete_document(
    request: AnyRequest,
    services: ServicesDep,
    caller: CallerDep,
    document_id: Annotated[str, Parameter(max_length=MAX_IDENTIFIER_CHARS, pattern=IDENTIFIER_PATTERN)],
    reason: Annotated[
        str, QueryParameter(name="reason", pattern="^(source_deleted|withdrawn)$")
    ] = "withdrawn",
    idempotency_key: IdempotencyKeyHeader = None,
) -> Response[DocumentRemovedOut]:
    return await write(
        request,
        services,
        caller,
        idempotency_key,
        f"DELETE /v1/documents/{document_id}",
        {"reason": reason},
        lambda idem: remove_document(services.context, services.claims, caller, document_id, reason, idem),
        created_status=200,
    )


router = Router(
    path="/v1/documents", route_handlers=[post_document, upload_document, delete_document], tags=["documents"]
)
