"""Use cases on receipts: find one (tenant-scoped), build its portable bundle, check it."""

from __future__ import annotations

from typing import Any

from ledger.domain.entries import RecordedEvent
from ledger.evidence.bundle import BundleError, build_bundle, cose_receipt, proof_json, verify_bundle
from ledger.usecases.context import UseCaseContext
from ledger.usecases.errors import NotFound


def find_receipt(ctx: UseCaseContext, tenant_id: str, receipt_id: str) -> RecordedEvent:
    """The receipt's signed entry; another tenant's receipt is not found, like an unknown one."""
    event = ctx.lookups.receipt(tenant_id, receipt_id)
    if event is None:
        raise NotFound("receipt")
    return event


def receipt_with_chain(
    ctx: UseCaseContext, tenant_id: str, receipt_id: str
) -> tuple[RecordedEvent, dict[str, Any]]:
    """The receipt's signed entry and where it sits among replays: its parent (a replay's
    original) and its replays. One lookup; another tenant's receipt is not found."""
    found = ctx.lookups.receipt_with_replays(tenant_id, receipt_id)
    if found is None:
        raise NotFound("receipt")
    event, replays = found
    chain = {
        "parent_receipt_id": event.payload.get("parent_receipt_id"),
        "replays": [{"receipt_id": replay_id, "position": position} for replay_id, position in replays],
    }
    return event, chain


def receipt_cose(ctx: UseCaseContext, tenant_id: str, receipt_id: str) -> bytes:
    """The receipt's inclusion proof as a COSE Receipt (RFC 9942), in the first
    checkpoint that covers it."""
    event = find_receipt(ctx, tenant_id, receipt_id)
    return cose_receipt(ctx.ledger, event.position, ctx.ledger.checkpoint_covering(event.position))


def receipt_bundle(
    ctx: UseCaseContext, tenant_id: str, receipt_id: str, *, latest: bool = False
) -> dict[str, Any]:
    """The portable bundle of a receipt, with the inclusion proof of every cited document entry,
    against the first checkpoint that covers it or (`latest`) the newest one: what an auditor
    checks to see that the receipt is still in the log as it stands today."""
    event = find_receipt(ctx, tenant_id, receipt_id)
    ledger = ctx.ledger
    last = event.position + len(event.continuations)  # a checkpoint proving every part
    checkpoint = _latest_covering(ledger, last) if latest else ledger.checkpoint_covering(last)
    size = checkpoint.tree_size
    selected = event.payload["selected_entries"]
    chunks = ctx.lookups.chunks(tenant_id, [(e["document_id"], e["chunk_id"]) for e in selected])
    citations = []
    for entry in selected:
        chunk = chunks.get((entry["document_id"], entry["chunk_id"]))
        if chunk is not None and entry.get("version_id") not in (None, chunk.version_id):
            # The version the citation names (an unchanged chunk is in later versions too).
            chunk = ctx.lookups.chunk_in_version(
                tenant_id, entry["document_id"], entry["chunk_id"], entry["version_id"]
            )
        document: dict[str, Any] | None = None
        if chunk is not None and chunk.position <= size:
            doc_event = ledger.get(chunk.position)
            if doc_event is not None:
                document = {
                    "entry": doc_event.envelope,
                    "inclusion_proof": proof_json(
                        chunk.position, size, ledger.inclusion_proof(chunk.position, size)
                    ),
                }
        citations.append(
            {
                "citation_id": entry["citation_id"],
                "document_id": entry["document_id"],
                "chunk_id": entry["chunk_id"],
                "document": document,
            }
        )
    return build_bundle(ledger, event.position, extra={"citations": citations}, checkpoint=checkpoint)


def _latest_covering(ledger: Any, position: int) -> Any:
    """The newest signed checkpoint, with its cosignatures; one is issued when none covers
    `position` yet."""
    latest = ledger.latest_checkpoint()
    if latest is None or latest.tree_size < position:
        latest = ledger.checkpoint_covering(position)
    return ledger.cosigned(latest)


def _cosigners(ledger: Any, note: str) -> dict[str, Any]:
    """Which of the configured witnesses cosigned the checkpoint (each cosignature checked
    against the witness's own key, not the ledger's)."""
    from ledger.config import parse_witnesses
    from ledger.tlog.cosignature import open_cosignatures
    from ledger.tlog.note import NoteError

    witnesses = [endpoint.witness for endpoint in parse_witnesses(ledger.config.witnesses)]
    try:
        cosigned = [c.witness for c in open_cosignatures(note, witnesses)] if witnesses else []
    except NoteError:
        cosigned = []
    return {"configured": [w.name for w in witnesses], "cosigned_by": cosigned}


def verify_receipt(ctx: UseCaseContext, tenant_id: str, receipt_id: str) -> dict[str, Any]:
    """Is the receipt intact? Its signature, its inclusion proof against the latest signed
    checkpoint (one is issued first when none covers it yet), that checkpoint's signature and
    the key chain back to the root key: the offline bundle check, run here. `problem` names
    the first part that fails."""
    event = find_receipt(ctx, tenant_id, receipt_id)
    ledger = ctx.ledger
    latest = _latest_covering(ledger, event.position + len(event.continuations))
    bundle = build_bundle(ledger, event.position, checkpoint=latest)
    problem: str | None = None
    try:
        verify_bundle(bundle, ledger.root_public_key)
    except BundleError as exc:
        problem = str(exc)[:300]
    return {
        "witnesses": _cosigners(ledger, latest.note),
        "receipt_id": receipt_id,
        "position": event.position,
        "intact": problem is None,
        "problem": problem,
        "kid": event.kid,
        "checkpoint": latest.to_json(),
        "inclusion_proof": bundle["inclusion_proof"],
    }
