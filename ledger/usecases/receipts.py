"""Use cases on receipts: find one (tenant-scoped), build its portable bundle."""

from __future__ import annotations

from typing import Any

from ledger.bundle import build_bundle, proof_json
from ledger.entries import RecordedEvent
from ledger.usecases.context import UseCaseContext
from ledger.usecases.errors import NotFound


def find_receipt(ctx: UseCaseContext, tenant_id: str, receipt_id: str) -> RecordedEvent:
    """The receipt's signed entry; another tenant's receipt is not found, like an unknown one."""
    event = ctx.lookups.receipt(tenant_id, receipt_id)
    if event is None:
        raise NotFound("receipt")
    return event


def replay_chain(ctx: UseCaseContext, tenant_id: str, event: RecordedEvent) -> dict[str, Any]:
    """Where a receipt sits among replays: its parent (a replay's original) and its replays."""
    payload = event.payload
    replays = ctx.lookups.replays_of(tenant_id, payload["receipt_id"])
    return {
        "parent_receipt_id": payload.get("parent_receipt_id"),
        "replays": [{"receipt_id": r.receipt_id, "position": r.position} for r in replays],
    }


def receipt_bundle(ctx: UseCaseContext, tenant_id: str, receipt_id: str) -> dict[str, Any]:
    """The portable bundle of a receipt, with the inclusion proof of every cited document entry."""
    event = find_receipt(ctx, tenant_id, receipt_id)
    ledger = ctx.ledger
    size = ledger.checkpoint_covering(event.position).tree_size
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
    return build_bundle(ledger, event.position, extra={"citations": citations})


def receipt_integrity(ctx: UseCaseContext, tenant_id: str, receipt_id: str) -> dict[str, Any]:
    """Is the receipt intact, checked now from the log itself (not from a read model's copy):
    its entry's signature, its inclusion proof against a signed checkpoint, and that
    checkpoint's signature, all under the ledger's root key. `intact` with the checkpoint it
    was checked against, or not, with the first reason."""
    from ledger.bundle import BundleError, verify_bundle

    position = find_receipt(ctx, tenant_id, receipt_id).position
    ledger = ctx.ledger
    try:
        bundle = build_bundle(ledger, position)
        verify_bundle(bundle, ledger.root_public_key)
    except (BundleError, LookupError, ValueError) as exc:
        return {"intact": False, "reason": str(exc)[:300], "position": position, "tree_size": None}
    return {
        "intact": True,
        "reason": None,
        "position": position,
        "tree_size": bundle["checkpoint"]["tree_size"],
    }
