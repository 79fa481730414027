"""Use cases: erase a document or data subject, place and release legal holds,
the retention sweep.

An erasure destroys the data keys of a document (its text and every citation
snapshot of it) or of a data subject (their queries and the documents about
them), unless a legal hold applies. It is recorded as a signed
`RetentionScrubbed` entry; a second request for the same target is answered
idempotently. Holds are signed entries whose legal basis is sealed like any
free text.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from typing import Any

from ledger.deadline import claim_or_raise
from ledger.domain.entries import RecordedEvent
from ledger.domain.events import LegalHoldPlaced, LegalHoldReleased
from ledger.schemas.requests import ErasureIn, LegalHoldIn
from ledger.usecases.context import Caller, UseCaseContext, record
from ledger.usecases.errors import NotFound, UnderLegalHold
from ledger.writing.retention import record_pending, run_retention, shred
from ledger.writing.sealing import document_key_ref, parse_expiry_key_ref, subject_key_ref


def _bucket_refs(ctx: UseCaseContext, tenant: str, scope: str) -> list[str]:
    """Live expiry-bucket keys of one scope (a document id or `subject.<id>`)."""
    prefix = f"expiry/{tenant}/"
    refs = ctx.ledger.data_keys.live_refs(tenant, prefix, prefix + "~")
    return [ref for ref in refs if (parsed := parse_expiry_key_ref(ref)) is not None and parsed[2] == scope]


def _require_targets(
    ctx: UseCaseContext, tenant: str, document_ids: Sequence[str], subject_ids: Sequence[str]
) -> None:
    """Every target names a document or data subject the tenant's ledger knows: an unknown
    one, or another tenant's, is not found (never a hold or an erasure of nothing)."""
    if set(document_ids) - set(ctx.lookups.documents(tenant, document_ids)):
        raise NotFound("document")
    if any(not ctx.ledger.data_keys.known(subject_key_ref(tenant, s)) for s in sorted(set(subject_ids))):
        raise NotFound("data subject")


def erase(ctx: UseCaseContext, caller: Caller, body: ErasureIn) -> dict[str, Any]:
    tenant, lookups = caller.tenant_id, ctx.lookups
    lookups.refresh()
    documents: list[str]
    refs: list[str]
    if body.document_id is not None:
        target_kind, target_id = "document", body.document_id
        _require_targets(ctx, tenant, [target_id], [])
        documents, refs = [target_id], []
    else:
        assert body.subject_id is not None
        target_kind, target_id = "subject", body.subject_id
        _require_targets(ctx, tenant, [], [target_id])
        subject_ref = subject_key_ref(tenant, target_id)
        documents = lookups.documents_of_subject(tenant, target_id)
        refs = [subject_ref, *_bucket_refs(ctx, tenant, f"subject.{target_id}")]
    holds = lookups.active_holds(tenant, target_kind, target_id)
    for document_id in documents:
        holds += lookups.active_holds(tenant, "document", document_id)
    if holds:
        held = sorted(set(holds))
        raise UnderLegalHold(f"{target_kind} is under legal hold {', '.join(held)}", held)
    for document_id in documents:
        refs += [document_key_ref(tenant, document_id), *_bucket_refs(ctx, tenant, document_id)]
    claim_or_raise(caller.deadline)  # destroying a key is the write: none after a timeout answer
    event = shred(
        ctx.ledger,
        tenant_id=tenant,
        key_refs=refs,
        reason="erasure_request",
        actor=caller.actor,
        document_ids=documents,
        run_id=caller.run_id,
        trace_id=caller.trace_id,
    )
    return {
        "erased": {"kind": target_kind, "id": target_id, "document_ids": documents},
        "already_erased": event is None,
        "position": event.position if event is not None else None,
    }


def place_hold(ctx: UseCaseContext, caller: Caller, body: LegalHoldIn) -> dict[str, Any]:
    ctx.lookups.refresh()
    _require_targets(ctx, caller.tenant_id, body.document_ids, body.subject_ids)
    hold_id = uuid.uuid4().hex
    payload = LegalHoldPlaced(
        hold_id=hold_id,
        document_ids=sorted(set(body.document_ids)),
        subject_ids=sorted(set(body.subject_ids)),
        legal_basis=ctx.sealer.seal(body.legal_basis, tenant_id=caller.tenant_id),
    )
    result = record(
        ctx, caller, [payload], lambda events: {"hold_id": hold_id, "position": events[0].position}
    )
    ctx.lookups.refresh()
    return {key: value for key, value in result.body.items() if key != "dedup"}


def release_hold(ctx: UseCaseContext, caller: Caller, hold_id: str) -> dict[str, Any]:
    ctx.lookups.refresh()
    exists, active = ctx.lookups.hold(caller.tenant_id, hold_id)
    if not exists:
        raise NotFound("legal hold")
    if not active:
        return {"hold_id": hold_id, "released": True, "already_released": True}
    result = record(
        ctx,
        caller,
        [LegalHoldReleased(hold_id=hold_id)],
        lambda events: {
            "hold_id": hold_id,
            "released": True,
            "already_released": False,
            "position": events[0].position,
        },
    )
    ctx.lookups.refresh()
    return {key: value for key, value in result.body.items() if key != "dedup"}


def sweep(ctx: UseCaseContext, now: dt.datetime | None = None) -> list[RecordedEvent]:
    """Destroy every tenant's expiry keys whose day is over, sparing held scopes.
    Idempotent, so several workers may overlap."""
    moment = now or ctx.clock()
    ctx.lookups.refresh()
    recorded = record_pending(ctx.ledger, actor="retention")
    for tenant in ctx.lookups.tenants():
        event = run_retention(
            ctx.ledger,
            tenant_id=tenant,
            now=moment,
            held_scopes=ctx.lookups.held_scopes(tenant),
            actor="retention",
        )
        if event is not None:
            recorded.append(event)
    if recorded:
        ctx.lookups.refresh()
    return recorded
