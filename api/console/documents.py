"""The console's documents by path: look one up (`/console/documents?source=&path=`, as
`GET /v1/documents`), and resolve the path an erasure or a hold form names to the document
it acts on, with what the confirmation shows (path, versions, receipts that cite it). A path
that names nothing is the console's 404 page naming it, never an API error body."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import get
from litestar.di import NamedDependency
from litestar.params import QueryParameter
from litestar.response import Template
from pydantic import ValidationError

from api.console.web import AnyRequest, ConsoleRefusal, ConsoleUser, field, page, services_of
from ledger.schemas.requests import DocumentPathIn
from ledger.usecases.document_lookup import document_at_path, document_by_id, documents_by_path
from ledger.usecases.errors import Invalid, NotFound

User = NamedDependency[ConsoleUser]


def path_target(path: str, source: str | None) -> DocumentPathIn:
    try:
        return DocumentPathIn(path=path, source=source or None)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "path"
        raise ConsoleRefusal(422, "Not accepted", f"{where}: {first.get('msg', 'invalid')}") from None


async def resolve(request: AnyRequest, user: ConsoleUser, data: dict[str, Any]) -> dict[str, Any] | None:
    """The document a form names by `path` (and `source`) or by `document_id`, as the
    confirmation shows it; None when the form names neither (a subject erasure)."""
    services = services_of(request)
    path, source, document_id = field(data, "path"), field(data, "source"), field(data, "document_id")
    if path and not document_id:
        target = path_target(path, source)
        try:
            found: dict[str, Any] = await services.blocking(
                document_at_path, services.context, user.caller, target
            )
        except NotFound as exc:
            raise ConsoleRefusal(404, "Not found", str(exc)) from None
        except Invalid as exc:
            raise ConsoleRefusal(422, "Not accepted", str(exc)) from None
        return found
    if document_id and len(document_id) <= 128:
        known: dict[str, Any] | None = await services.blocking(
            document_by_id, services.context, user.caller, document_id
        )
        return known
    return None


@get("/documents", name="console:documents")
async def documents(
    request: AnyRequest,
    user: User,
    path: Annotated[str | None, QueryParameter(name="path", required=False, max_length=1024)] = None,
    source: Annotated[str | None, QueryParameter(name="source", required=False, max_length=128)] = None,
) -> Template:
    """A path's documents: versions, the receipts that cite them, erasure and holds."""
    user.require("audit.read")
    path, source = (path or "").strip(), (source or "").strip()
    found: list[dict[str, Any]] = []
    if path:
        target = path_target(path, source)
        services = services_of(request)
        try:
            body = await services.blocking(documents_by_path, services.context, user.caller, target)
        except NotFound as exc:
            raise ConsoleRefusal(404, "Not found", str(exc)) from None
        found = body["documents"]
    return page(
        "documents.html", user, path=path, source=source, documents=found, may_admin=user.may("admin")
    )


DOCUMENT_PAGES = [documents]
