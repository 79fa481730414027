"""Use case: find documents by path (`GET /v1/documents?path=&source=`, `citeledger documents
show`, the console's document page), and resolve a path to the one document an erasure or a hold
acts on. Ids and metadata only: no text is read. A document with a restricted version is
not there for a caller without the scope (404, like a path that names nothing)."""

from __future__ import annotations

from typing import Any

from ledger.schemas.requests import DocumentPathIn
from ledger.usecases.context import Caller, UseCaseContext
from ledger.usecases.errors import Invalid, NotFound
from ledger.usecases.ports import DocumentAtPath
from ledger.usecases.visibility import may_see


def _where(target: DocumentPathIn) -> str:
    return f"document at path {target.path!r}" + (f" in source {target.source!r}" if target.source else "")


def _view(ctx: UseCaseContext, tenant: str, doc: DocumentAtPath) -> dict[str, Any]:
    scrub = doc.scrub
    return {
        "document_id": doc.document_id,
        "source": doc.source,
        "path": doc.path,
        "versions": doc.versions,
        "receipts_citing": doc.receipts_citing,
        "erased": None
        if scrub is None
        else {"position": scrub.position, "erased_at": scrub.recorded_at or None, "basis": scrub.reason},
        "held_by": sorted(set(ctx.lookups.active_holds(tenant, "document", doc.document_id))),
    }


def documents_by_path(ctx: UseCaseContext, caller: Caller, target: DocumentPathIn) -> dict[str, Any]:
    """Every document the caller may see at the path, each with its versions, the receipts that
    cite it, its erasure and its holds; NotFound naming the path when there is none."""
    found = ctx.lookups.documents_at_path(caller.tenant_id, target.path, target.source)
    seen = [d for d in found if all(may_see(caller.scopes, v["sensitivity"]) for v in d.versions)]
    if not seen:
        raise NotFound(_where(target))
    return {"documents": [_view(ctx, caller.tenant_id, d) for d in seen]}


def document_at_path(ctx: UseCaseContext, caller: Caller, target: DocumentPathIn) -> dict[str, Any]:
    """The one document the path names (for an erasure or a hold): the live one when a path was
    readmitted after an erasure; Invalid naming the sources when the path is in several."""
    documents = documents_by_path(ctx, caller, target)["documents"]
    if len({d["source"] for d in documents}) > 1:
        sources = ", ".join(sorted({d["source"] for d in documents}))
        raise Invalid(f"path {target.path!r} is in several sources ({sources}): name the source")
    live = [d for d in documents if d["erased"] is None]
    chosen: dict[str, Any] = (live or documents)[-1]
    return chosen


def document_by_id(ctx: UseCaseContext, caller: Caller, document_id: str) -> dict[str, Any] | None:
    """The document as `documents_by_path` shows it, found by its id (None: unknown, another
    tenant's, or not the caller's to see)."""
    state = ctx.lookups.document(caller.tenant_id, document_id)
    if state is None:
        return None
    try:
        found = documents_by_path(ctx, caller, DocumentPathIn(path=state.path))["documents"]
    except (NotFound, ValueError):
        return None
    return next((d for d in found if d["document_id"] == document_id), None)
