"""Documents: record a markdown document version (JSON or multipart upload), remove one, find
the documents at a path."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Annotated, Any

from litestar import HttpMethod, Response, Router, delete, get, post, route
from litestar.datastructures import UploadFile
from litestar.enums import RequestEncodingType
from litestar.params import Body, JSONBody, Parameter, QueryParameter
from pydantic import ValidationError

from api.api_error import ApiError
from api.contract import rule_refusal
from api.routes.common import CallDep, IdempotencyKeyHeader, operation
from ledger.domain.fields import IDENTIFIER_PATTERN, MAX_IDENTIFIER_CHARS
from ledger.schemas.answers import DocumentOut, DocumentRemovedOut
from ledger.schemas.field_rules import MAX_DOCUMENT_CHARS
from ledger.schemas.reads import DocumentsAtPathOut
from ledger.schemas.requests import DocumentIn, DocumentPathIn
from ledger.usecases.context import Caller, Result
from ledger.usecases.document_lookup import documents_by_path
from ledger.usecases.documents import ingest_document, remove_document


async def _record(call: CallDep, doc: DocumentIn, key: str | None) -> Response[Any]:
    services = call.services

    def ingest(keyed: Caller) -> Result:
        return ingest_document(services.context, services.claims, keyed, doc)

    return await call.write(key, "POST /v1/documents", doc.model_dump(mode="json"), ingest)


def _recording(summary: str) -> dict[str, Any]:
    """The decorator keywords of the two ways to record a document (JSON and multipart)."""
    return {"status_code": 201, **operation("ingest.write", summary, 409, 413, 422, dedup=DocumentOut)}


@post("/", **_recording("Record a markdown document (JSON)"))
async def post_document(
    call: CallDep, data: JSONBody[DocumentIn], idempotency_key: IdempotencyKeyHeader = None
) -> Response[DocumentOut]:
    return await _record(call, data, idempotency_key)


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


@post("/upload", **_recording("Record a markdown document (multipart)"))
async def upload_document(
    call: CallDep,
    data: Annotated[DocumentUpload, Body(media_type=RequestEncodingType.MULTI_PART)],
    idempotency_key: IdempotencyKeyHeader = None,
) -> Response[DocumentOut]:
    # Litestar drops form fields the form does not name; a misspelt `retention_day` would
    # quietly give the default window, so an unknown field is refused.
    unknown = sorted(set((await call.request.form()).keys()) - UPLOAD_FIELDS)
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
        raise _refusal(exc) from None
    return await _record(call, doc, idempotency_key)


def _refusal(exc: ValidationError) -> ApiError:
    first = exc.errors()[0]
    return rule_refusal(exc.errors()) or ApiError(
        400, "bad_request", f"invalid request: {'.'.join(map(str, first['loc']))}: {first['msg']}"
    )


@get("/", **operation("audit.read", "Find the documents at a path", 400, 404, 422))
async def find_documents(
    call: CallDep,
    path: Annotated[
        str,
        QueryParameter(
            name="path", min_length=1, max_length=1024, description="The document's path inside its source"
        ),
    ],
    source: Annotated[
        str | None,
        QueryParameter(
            name="source",
            required=False,
            max_length=MAX_IDENTIFIER_CHARS,
            pattern=IDENTIFIER_PATTERN,
            description="The source it came from (default: any)",
        ),
    ] = None,
) -> Response[DocumentsAtPathOut]:
    """Each document recorded at the path: its versions, how many receipts cite it, its erasure
    (time, position, basis) and its legal holds; ids and metadata only, never text."""
    try:
        target = DocumentPathIn(path=path, source=source)
    except ValidationError as exc:
        raise _refusal(exc) from None
    return await call.answer(documents_by_path, call.services.context, call.caller, target)


@delete(
    "/{document_id:str}",
    status_code=200,
    **operation("ingest.write", "Record DocumentRemoved", 404, 409, 422),
)
async def delete_document(
    call: CallDep,
    document_id: Annotated[str, Parameter(max_length=MAX_IDENTIFIER_CHARS, pattern=IDENTIFIER_PATTERN)],
    reason: Annotated[
        str, QueryParameter(name="reason", pattern="^(source_deleted|withdrawn)$")
    ] = "withdrawn",
    idempotency_key: IdempotencyKeyHeader = None,
) -> Response[DocumentRemovedOut]:
    services, route = call.services, f"DELETE /v1/documents/{document_id}"

    def remove(keyed: Caller) -> Result:
        return remove_document(services.context, services.claims, keyed, document_id, reason)

    return await call.write(idempotency_key, route, {"reason": reason}, remove, created_status=200)


@route("/", http_method=[HttpMethod.OPTIONS], include_in_schema=False, sync_to_thread=False)
def documents_options() -> Response[None]:
    """Litestar answers OPTIONS on a path of two handlers with the first one's methods only
    (as `/v1/operator/tokens`); registered first, this one names both."""
    return Response(None, status_code=204, headers={"Allow": "GET, OPTIONS, POST"})


router = Router(
    path="/v1/documents",
    route_handlers=[documents_options, find_documents, post_document, upload_document, delete_document],
    tags=["documents"],
)
