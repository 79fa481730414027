"""Tamper evidence: checkpoints, consistency proofs, the signing keys, the export."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

from litestar import Response, Router, get
from litestar.params import Parameter, QueryParameter
from litestar.response import Stream
from pydantic import Field

from api.api_error import ApiError, not_found
from api.auth import requires, requires_operator
from api.openapi import contract
from api.routes.common import AnyRequest, CallerDep, ServicesDep, ok
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


@get("/latest", guards=[requires("audit.read")], summary="The latest signed checkpoint", **contract(404))
async def latest_checkpoint(request: AnyRequest, services: ServicesDep) -> Response[CheckpointOut]:
    return ok(request, services, await services.blocking(latest_checkpoint_body, services))


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


@get(
    "/consistency",
    guards=[requires("audit.read")],
    summary="Consistency proof between two tree sizes",
    **contract(404, 422),
)
async def consistency(
    request: AnyRequest,
    services: ServicesDep,
    old: Annotated[int, QueryParameter(name="from", ge=1, le=2**53 - 1)],
    new: Annotated[int | None, QueryParameter(name="to", ge=1, le=2**53 - 1, required=False)] = None,
) -> Response[ConsistencyOut]:
    return ok(request, services, await services.blocking(_consistency, services, old, new))


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


@get(
    "/key-chain",
    guards=[requires("audit.read")],
    summary="The signing-key entries up to a tree size (default: the latest checkpoint's), with "
    "inclusion proofs: what `citeledger check-checkpoint` checks from the root key",
    **contract(404),
)
async def key_chain(
    request: AnyRequest,
    services: ServicesDep,
    size: Annotated[int | None, QueryParameter(name="size", ge=1, le=2**53 - 1, required=False)] = None,
) -> Response[KeyChainOut]:
    return ok(request, services, await services.blocking(_key_chain, services, size))


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
    guards=[requires("audit.read")],
    summary="Every signing public key with its validity",
    tags=["tamper evidence"],
    **contract(),
)
async def public_keys(request: AnyRequest, services: ServicesDep) -> Response[KeysOut]:
    return ok(request, services, await services.blocking(keys_body, services))


def _ndjson(body: Iterator[bytes], services: Services, filename: str) -> Stream:
    return Stream(
        body,
        media_type="application/x-ndjson",
        headers={
            "Content-Disposition": f'attachment; filename="{filename}"',
            "X-Server-Version": services.server_version,
        },
    )


@get(
    "/v1/export",
    guards=[requires("audit.read")],
    summary="The caller's tenant's entries with inclusion proofs, as NDJSON for offline "
    "`citeledger verify --export`",
    tags=["tamper evidence"],
    media_type="application/x-ndjson",
    response_description="One JSON object per line (`application/x-ndjson`)",
    **contract(),
)
async def export(request: AnyRequest, services: ServicesDep, caller: CallerDep) -> Stream:
    return _ndjson(tenant_export(services.context, caller), services, "citeledger-tenant-export.jsonl")


@get(
    "/v1/operator/export",
    guards=[requires_operator],
    summary="The whole log (every tenant) as NDJSON; operator token only",
    tags=["tamper evidence"],
    media_type="application/x-ndjson",
    response_description="One JSON object per line (`application/x-ndjson`)",
    **contract(),
)
async def whole_log_export_route(request: AnyRequest, services: ServicesDep) -> Stream:
    return _ndjson(whole_log_export(services.context), services, "citeledger-export.jsonl")
