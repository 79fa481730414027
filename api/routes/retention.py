"""Erasure requests and legal holds.

An erasure destroys the data keys of a document (its text, and every citation
snapshot of it) or of a data subject (their queries and texts), unless a
legal hold applies (409 `legal_hold` naming the holds). It is recorded as a
signed `RetentionScrubbed` entry; a second request for the same target is
answered idempotently. Holds are signed `LegalHoldPlaced` / `LegalHoldReleased`
entries whose legal basis is sealed like any free text.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from litestar import Response, Router, delete, post
from litestar.params import JSONBody, Parameter
from pydantic import BaseModel, ConfigDict, Field, model_validator

from api.auth import Principal, requires
from api.contract import ApiError, Correlation, not_found
from api.routes.common import AnyRequest, caller, ok
from api.services import Services
from ledger.entries import EventDraft
from ledger.events import Identifier, LegalHoldPlaced, LegalHoldReleased
from ledger.retention import shred
from ledger.sealing import document_key_ref, parse_expiry_key_ref, subject_key_ref

MAX_HOLD_TARGETS = 1_000
MAX_LEGAL_BASIS_CHARS = 4_000
HoldId = Annotated[str, Parameter(max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")]


class ErasureIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    document_id: Identifier | None = None
    subject_id: Identifier | None = None

    @model_validator(mode="after")
    def one_target(self) -> ErasureIn:
        if (self.document_id is None) == (self.subject_id is None):
            raise ValueError("give exactly one of document_id or subject_id")
        return self


class LegalHoldIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    document_ids: Annotated[list[Identifier], Field(max_length=MAX_HOLD_TARGETS)] = []
    subject_ids: Annotated[list[Identifier], Field(max_length=MAX_HOLD_TARGETS)] = []
    legal_basis: Annotated[str, Field(min_length=1, max_length=MAX_LEGAL_BASIS_CHARS)]

    @model_validator(mode="after")
    def some_target(self) -> LegalHoldIn:
        if not self.document_ids and not self.subject_ids:
            raise ValueError("a hold needs at least one document_id or subject_id")
        return self


def _bucket_refs(services: Services, tenant: str, scope: str) -> list[str]:
    """Live expiry-bucket keys of one scope (a document id or `subject.<id>`)."""
    prefix = f"expiry/{tenant}/"
    refs = services.ledger.data_keys.live_refs(tenant, prefix, prefix + "~")
    return [ref for ref in refs if (parsed := parse_expiry_key_ref(ref)) is not None and parsed[2] == scope]


def erase(services: Services, principal: Principal, ids: Correlation, body: ErasureIn) -> dict[str, Any]:
    tenant, catalog = principal.tenant, services.catalog
    catalog.catch_up(services.ledger)
    documents: list[str]
    if body.document_id is not None:
        target_kind, target_id = "document", body.document_id
        if catalog.document(tenant, target_id) is None:
            raise not_found("document")
        documents, refs = [target_id], []
    else:
        assert body.subject_id is not None
        target_kind, target_id = "subject", body.subject_id
        subject_ref = subject_key_ref(tenant, target_id)
        if not services.ledger.data_keys.known(subject_ref):
            raise not_found("data subject")
        # The subject's queries, and every document about them.
        documents = catalog.documents_of_subject(tenant, target_id)
        refs = [subject_ref, *_bucket_refs(services, tenant, f"subject.{target_id}")]
    holds = catalog.active_holds(tenant, target_kind, target_id)
    for document_id in documents:
        holds += catalog.active_holds(tenant, "document", document_id)
    if holds:
        held = sorted(set(holds))
        raise ApiError(
            409,
            "legal_hold",
            f"{target_kind} is under legal hold {', '.join(held)}",
            extra_body={"hold_ids": held},
        )
    for document_id in documents:
        refs += [document_key_ref(tenant, document_id), *_bucket_refs(services, tenant, document_id)]
    event = shred(
        services.ledger,
        tenant_id=tenant,
        key_refs=refs,
        reason="erasure_request",
        actor=principal.actor,
        document_ids=documents,
        run_id=ids.run_id,
        trace_id=ids.trace_id,
    )
    return {
        "erased": {"kind": target_kind, "id": target_id, "document_ids": documents},
        "already_erased": event is None,
        "position": event.position if event is not None else None,
    }


@post("/v1/erasures", guards=[requires("admin")], status_code=200, summary="Erase a document or data subject")
async def post_erasure(request: AnyRequest, data: JSONBody[ErasureIn]) -> Response[Any]:
    services, principal, ids = caller(request)
    return ok(request, await services.blocking(erase, services, principal, ids, data))


def place_hold(
    services: Services, principal: Principal, ids: Correlation, body: LegalHoldIn
) -> dict[str, Any]:
    tenant = principal.tenant
    hold_id = uuid.uuid4().hex
    payload = LegalHoldPlaced(
        hold_id=hold_id,
        document_ids=sorted(set(body.document_ids)),
        subject_ids=sorted(set(body.subject_ids)),
        legal_basis=services.ledger.sealer.seal(body.legal_basis, tenant_id=tenant),
    )
    draft = EventDraft(
        type="LegalHoldPlaced",
        tenant_id=tenant,
        actor=principal.actor,
        payload=payload,
        run_id=ids.run_id,
        trace_id=ids.trace_id,
    )
    event = services.append([draft], tenant)[0]
    services.catalog.catch_up(services.ledger)
    return {"hold_id": hold_id, "position": event.position}


@post("/v1/legal-holds", guards=[requires("admin")], status_code=201, summary="Place a legal hold")
async def post_hold(request: AnyRequest, data: JSONBody[LegalHoldIn]) -> Response[Any]:
    services, principal, ids = caller(request)
    return ok(request, await services.blocking(place_hold, services, principal, ids, data), 201)


def release_hold(services: Services, principal: Principal, ids: Correlation, hold_id: str) -> dict[str, Any]:
    tenant = principal.tenant
    services.catalog.catch_up(services.ledger)
    exists, active = services.catalog.hold_exists(tenant, hold_id)
    if not exists:
        raise not_found("legal hold")
    if not active:
        return {"hold_id": hold_id, "released": True, "already_released": True}
    draft = EventDraft(
        type="LegalHoldReleased",
        tenant_id=tenant,
        actor=principal.actor,
        payload=LegalHoldReleased(hold_id=hold_id),
        run_id=ids.run_id,
        trace_id=ids.trace_id,
    )
    event = services.append([draft], tenant)[0]
    services.catalog.catch_up(services.ledger)
    return {"hold_id": hold_id, "released": True, "already_released": False, "position": event.position}


@delete(
    "/v1/legal-holds/{hold_id:str}", guards=[requires("admin")], status_code=200, summary="Release a hold"
)
async def delete_hold(request: AnyRequest, hold_id: HoldId) -> Response[Any]:
    services, principal, ids = caller(request)
    return ok(request, await services.blocking(release_hold, services, principal, ids, hold_id))


router = Router(path="/", route_handlers=[post_erasure, post_hold, delete_hold], tags=["retention"])
