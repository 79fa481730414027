"""Tamper evidence: checkpoints, consistency proofs, the signing keys, the export."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

from litestar import Response, Router, get
from litestar.params import Parameter, QueryParameter
from litestar.response import Stream
from pydantic import Field

from api.api_error import ApiError, not_found
from api.auth import requires_operator
from api.openapi import contract
from api.routes import listing
from api.routes.common import CallDep, ServicesDep, operation
from api.services import Services
from ledger.evidence.bundle import proof_json
from ledger.schemas.answers import Answer
from ledger.schemas.reads import CheckpointOut, ConsistencyOut, KeysOut
from ledger.tlog.note import verifier_key
from ledger.tlog.signing import b64, unb64
from ledger.usecases.export import tenant_export, whole_log_export

Size = Annotated[int, Parameter(ge=1, le=2**53 - 1)]


def latest_checkpoint_body(services: Services) -> dict[str, Any]:
    record = services.ledger.latest_checkpoint()
    if record is None:
        raise not_found("checkpoint")
    return {"checkpoint": services.ledger.cosigned(record).to_json(), "origin": services.ledger.origin}


@get("/latest", **operation("audit.read", "The latest signed checkpoint", 404))
async def latest_checkpoint(call: CallDep) -> Response[CheckpointOut]:
    return await call.answer(latest_checkpoint_body, call.services)


def _consistency(services: Services, old: int, new: int | None) -> dict[str, Any]:
    ledger = services.ledger
    checkpoints = ledger.checkpoints()
    if new is None:
        if not checkpoints:
            raise not_found("checkpoint")
        new = checkpoints[-1].tree_size
    head = ledger.sync()
    if new > head:
        raise not_found(f"tree of size {new} (the log has {head} entries)")
    if old > new:
        raise ApiError(422, "invalid_range", "from must not exceed to", retryable=False)
    hashes = ledger.consistency_proof(old, new)
    by_size = {c.tree_size: c.to_json() for c in checkpoints}
    return {
        "from": old,
        "to": new,
        "old_root": ledger.tree.root(old).hex(),
        "new_root": ledger.tree.root(new).hex(),
        "hashes": [h.hex() for h in hashes],
        "from_checkpoint": by_size.get(old),
        "to_checkpoint": by_size.get(new),
    }


@get("/consistency", **operation("audit.read", "Consistency proof between two tree sizes", 404, 422))
async def consistency(
    call: CallDep,
    old: Annotated[int, QueryParameter(name="from", ge=1, le=2**53 - 1)],
    new: Annotated[int | None, listing.position_query("to")] = None,
) -> Response[ConsistencyOut]:
    return await call.answer(_consistency, call.services, old, new)


class KeyChainOut(Answer):
    """Every key introduction up to a tree size, each with its inclusion proof in that tree:
    with the root public key alone, an auditor learns which keys sign this log."""

    size: int = Field(ge=1)
    key_chain: list[dict[str, Any]]


def _key_chain(services: Services, size: int | None) -> dict[str, Any]:
    ledger = services.ledger
    if size is None:
        latest = ledger.latest_checkpoint()
        if latest is None:
            raise not_found("checkpoint")
        size = latest.tree_size
    head = ledger.sync()
    if size > head:
        raise not_found(f"tree of size {size} (the log has {head} entries)")
    return {
        "size": size,
        "key_chain": [
            {
                "entry": event.envelope,
                "inclusion_proof": proof_json(
                    event.position, size, ledger.inclusion_proof(event.position, size)
                ),
            }
            for event in ledger.key_events(up_to=size)
        ],
    }


KEY_CHAIN_SUMMARY = (
    "The signing-key entries up to a tree size (default: the latest checkpoint's), with "
    "inclusion proofs: what `citeledger check-checkpoint` checks from the root key"
)


@get("/key-chain", **operation("audit.read", KEY_CHAIN_SUMMARY, 404))
async def key_chain(
    call: CallDep, size: Annotated[int | None, listing.position_query("size")] = None
) -> Response[KeyChainOut]:
    return await call.answer(_key_chain, call.services, size)


checkpoints_router = Router(
    path="/v1/checkpoints",
    route_handlers=[latest_checkpoint, consistency, key_chain],
    tags=["tamper evidence"],
)


def keys_body(services: Services) -> dict[str, Any]:
    ledger = services.ledger
    ledger.sync()
    events = ledger.key_events()
    keys = []
    for index, event in enumerate(events):
        payload = event.payload
        following = events[index + 1] if index + 1 < len(events) else None
        keys.append(
            {
                "kid": payload["new_kid"],
                "public_key": payload["public_key"],
                "algorithm": "Ed25519",
                "previous_kid": payload["previous_kid"],
                "introduced_at_position": event.position,
                "valid_from": event.envelope["recorded_at"],
                "valid_until": following.envelope["recorded_at"] if following else None,
                "retired_at_position": following.position if following else None,
                "active": following is None,
                "vkey": verifier_key(ledger.origin, unb64(payload["public_key"])),
            }
        )
    endpoints = ledger.cosigner.endpoints if ledger.cosigner is not None else []
    return {
        "keys": keys,
        "root_public_key": b64(ledger.root_public_key),
        "origin": ledger.origin,
        "vkey": ledger.vkey,
        "witnesses": [{"name": e.witness.name, "vkey": e.witness.vkey, "url": e.url} for e in endpoints],
    }


@get(
    "/v1/keys",
    tags=["tamper evidence"],
    **operation("audit.read", "Every signing public key with its validity"),
)
async def public_keys(call: CallDep) -> Response[KeysOut]:
    return await call.answer(keys_body, call.services)


def _ndjson(body: Iterator[bytes], services: Services, filename: str) -> Stream:
    return Stream(
        body,
        media_type="application/x-ndjson",
        headers={
            "Content-Disposition": f'attachment; filename="{filename}"',
            "X-Server-Version": services.server_version,
        },
    )


# What both exports' operations say beside their guard and summary.
NDJSON_EXPORT: dict[str, Any] = {
    "tags": ["tamper evidence"],
    "media_type": "application/x-ndjson",
    "response_description": "One JSON object per line (`application/x-ndjson`)",
}
EXPORT_SUMMARY = (
    "The caller's tenant's entries with inclusion proofs, as NDJSON for offline `citeledger verify --export`"
)


@get("/v1/export", **NDJSON_EXPORT, **operation("audit.read", EXPORT_SUMMARY))
async def export(call: CallDep) -> Stream:
    services = call.services
    return _ndjson(tenant_export(services.context, call.caller), services, "citeledger-tenant-export.jsonl")


@get(
    "/v1/operator/export",
    guards=[requires_operator],
    summary="The whole log (every tenant) as NDJSON; operator token only",
    **NDJSON_EXPORT,
    **contract(),
)
async def whole_log_export_route(services: ServicesDep) -> Stream:
    return _ndjson(whole_log_export(services.context), services, "citeledger-export.jsonl")
