"""Retrievals: a service posts a retrieval it ran itself; the ledger checks the
cited chunks, mints citation ids, seals text, signs and appends the receipt."""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from typing import Annotated, Any

from litestar import Response, Router, post
from litestar.params import HeaderParameter

from api.auth import Principal, requires
from api.contract import ApiError, Correlation
from api.routes.common import AnyRequest, caller, fingerprint, ok
from api.schemas import RetrievalIn
from api.services import Services
from ledger.canonical import canonical_json
from ledger.entries import EventDraft, utc_now
from ledger.events import (
    FilterApplied,
    Locator,
    PolicySnapshot,
    RetrievalRecorded,
    ScoreComponent,
    SelectedEntry,
    TaskEnvelope,
)
from ledger.retention import RetentionRules, expiry_key_for, format_timestamp
from ledger.sealing import KeyDestroyed, document_key_ref, subject_key_ref, tenant_key_ref


def _expiry(
    rules: RetentionRules, now: dt.datetime, retention_days: int | None, requested: str | None
) -> dt.datetime:
    """The citation's expiry: the document's window (never below the tenant floor); a
    caller may ask for a longer one, never a shorter one. Always a UTC midnight, the
    moment its expiry key is destroyed."""
    expires = rules.expires_at(now, retention_days)
    if requested:
        asked = dt.datetime.fromisoformat(requested.replace("Z", "+00:00"))
        if asked > expires:
            expires = dt.datetime(asked.year, asked.month, asked.day, tzinfo=dt.UTC) + dt.timedelta(days=1)
    return expires


def record(
    services: Services, principal: Principal, ids: Correlation, body: RetrievalIn
) -> tuple[int, dict[str, Any]]:
    tenant = principal.tenant
    catalog, sealer = services.catalog, services.ledger.sealer
    refs = [(entry.document_id, entry.chunk_id) for entry in body.selected_entries]
    chunks, policy = catalog.retrieval_context(tenant, refs)
    if len(chunks) < len(set(refs)):
        catalog.catch_up(services.ledger)  # maybe ingested through another worker a moment ago
        chunks, policy = catalog.retrieval_context(tenant, refs)
    for index, ref in enumerate(refs):
        if ref not in chunks:
            raise ApiError(
                422,
                "unknown_chunk",
                f"selected_entries[{index}]: no chunk {ref[1]} in document {ref[0]} for this tenant",
            )
    query_ref = subject_key_ref(tenant, body.subject_id) if body.subject_id else tenant_key_ref(tenant)
    rules = services.config.retention_for(tenant)
    now = dt.datetime.now(dt.UTC)
    receipt_expiry = rules.expires_at(now, None)
    entries: list[SelectedEntry] = []
    try:
        for index, item in enumerate(body.selected_entries):
            chunk = chunks[(item.document_id, item.chunk_id)]
            doc_ref = document_key_ref(tenant, item.document_id)
            expires = _expiry(rules, now, chunk.retention_days, item.expires_at)
            receipt_expiry = max(receipt_expiry, expires)
            # Shredded by erasing the document *or* by its expiry day passing.
            layers = [expiry_key_for(tenant, expires, item.document_id)]
            try:
                snapshot = sealer.seal(item.snippet, tenant_id=tenant, key_ref=doc_ref, extra_key_refs=layers)
                explanation = (
                    sealer.seal(item.explanation, tenant_id=tenant, key_ref=doc_ref, extra_key_refs=layers)
                    if item.explanation
                    else None
                )
            except KeyDestroyed:
                raise ApiError(
                    422,
                    "chunk_scrubbed",
                    f"selected_entries[{index}]: the cited document's text was scrubbed",
                ) from None
            entries.append(
                SelectedEntry(
                    citation_id=uuid.uuid4().hex,
                    document_id=item.document_id,
                    version_id=chunk.version_id,
                    chunk_id=item.chunk_id,
                    path=chunk.path,
                    locator=Locator(start_line=chunk.start_line, end_line=chunk.end_line),
                    score=item.score,
                    score_breakdown=[
                        ScoreComponent(component=c.component, value=c.value) for c in item.score_breakdown
                    ],
                    explanation=explanation,
                    snapshot=snapshot,
                    sensitivity=chunk.sensitivity,  # type: ignore[arg-type]
                    expires_at=format_timestamp(expires),
                )
            )
        query_scope = f"subject.{body.subject_id}" if body.subject_id else "queries"
        query = sealer.seal(
            body.query,
            tenant_id=tenant,
            key_ref=query_ref,
            extra_key_refs=[expiry_key_for(tenant, receipt_expiry, query_scope)],
        )
    except KeyDestroyed:
        raise ApiError(422, "subject_scrubbed", "the data subject's key was destroyed") from None
    snapshot_policy = PolicySnapshot(
        bundle_hash=policy.bundle_sha256 if policy else None,
        bundle_yaml=policy.bundle_yaml if policy else None,
        captured_at=utc_now(),
    )
    context_hash = (
        body.context_hash
        or hashlib.sha256(
            canonical_json([[e.document_id, e.chunk_id, e.snapshot.commitment] for e in entries])
        ).hexdigest()
    )
    receipt_id = uuid.uuid4().hex
    payload = RetrievalRecorded(
        receipt_id=receipt_id,
        query=query,
        subject_id=body.subject_id,
        task=TaskEnvelope(
            trace_id=ids.trace_id,
            task_id=body.task.task_id,
            deadline_ms=body.task.deadline_ms,
            auth_scope=body.task.auth_scope if body.task.auth_scope is not None else sorted(principal.scopes),
        ),
        engine=body.engine,
        mode="live",
        policy_snapshot=snapshot_policy,
        selected_entries=entries,
        filters_applied=[
            FilterApplied(rule_id=f.rule_id, chunk_id=f.chunk_id, action=f.action)
            for f in body.filters_applied
        ],
        context_hash=context_hash,
        status=body.status,
    )
    draft = EventDraft(
        type="RetrievalRecorded",
        tenant_id=tenant,
        actor=principal.actor,
        payload=payload,
        run_id=ids.run_id,
        trace_id=ids.trace_id,
    )
    event = services.append([draft], tenant)[0]
    return 201, {
        "receipt_id": receipt_id,
        "citation_ids": [e.citation_id for e in entries],
        "citations": [
            {
                "citation_id": e.citation_id,
                "document_id": e.document_id,
                "chunk_id": e.chunk_id,
                "path": e.path,
                "locator": {"start_line": e.locator.start_line, "end_line": e.locator.end_line},
            }
            for e in entries
        ],
        "position": event.position,
        "event_id": event.event_id,
        "recorded_at": event.envelope["recorded_at"],
        "kid": event.kid,
        "signature": event.signature,
        "context_hash": context_hash,
        "status": body.status,
        "dedup": False,
    }


@post(
    "/", guards=[requires("retrieval.write")], status_code=201, summary="Record an external retrieval receipt"
)
async def post_retrieval(
    request: AnyRequest,
    data: RetrievalIn,
    idempotency_key: Annotated[
        str | None, HeaderParameter(name="Idempotency-Key", required=False, max_length=255)
    ] = None,
) -> Response[Any]:
    services, principal, ids = caller(request)
    fp = fingerprint("POST /v1/retrievals", data.model_dump(mode="json")) if idempotency_key else ""
    status, body = await services.blocking(
        services.idempotency.run,
        principal.tenant,
        idempotency_key,
        fp,
        lambda: record(services, principal, ids, data),
    )
    return ok(request, body, status)


router = Router(path="/v1/retrievals", route_handlers=[post_retrieval], tags=["retrievals"])
