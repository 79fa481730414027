"""The Merkle tree as C2SP `tlog-tiles`, so standard tile clients can follow the log:
`/v1/tlog/checkpoint` (the latest cosigned checkpoint), `/v1/tlog/tile/<L>/<N>[.p/<W>]`
(hashes only: public, immutable) and `/v1/tlog/tile/entries/<N>[.p/<W>]` (the entries,
which carry every tenant's metadata: operator token only)."""

from __future__ import annotations

from litestar import Response, Router, get
from litestar.params import FromPath

from api.api_error import ApiError, not_found
from api.auth import requires_operator
from api.openapi import contract
from api.routes.common import ServicesDep
from api.services import Services
from ledger.tlog.tlog_tiles import TILE_WIDTH, TilePath, entry_bundle, parse_tile_path

IMMUTABLE = "public, max-age=31536000, immutable"
PRIVATE_IMMUTABLE = "private, max-age=31536000, immutable"
OCTETS = "application/octet-stream"


def _checkpoint(services: Services) -> str:
    record = services.ledger.latest_checkpoint() or services.ledger.issue_checkpoint()  # a new store
    if record is None:
        raise not_found("checkpoint")
    return services.ledger.cosigned(record).note


@get(
    "/checkpoint",
    summary="The latest checkpoint with its cosignatures (C2SP tlog-tiles)",
    media_type="text/plain; charset=utf-8",
    **contract(404, public=True),
)
async def checkpoint(services: ServicesDep) -> Response[str]:
    note = await services.blocking(_checkpoint, services)
    return Response(note, media_type="text/plain; charset=utf-8", headers={"Cache-Control": "no-cache"})


def _tile(services: Services, tile: TilePath) -> bytes:
    """From this process's tree (the follower brings in other processes' entries within
    a second): an anonymous request never costs more than a tile read."""
    assert tile.level is not None
    try:
        return services.ledger.tree.tile(tile.level, tile.index, tile.width)
    except LookupError:
        raise not_found("tile") from None


def _entries(services: Services, tile: TilePath) -> bytes:
    ledger = services.ledger
    first = tile.index * TILE_WIDTH + 1
    last = first + tile.width - 1
    if last > ledger.sync():
        raise not_found("entry bundle")
    try:
        return entry_bundle(event.entry for event in ledger.read(first, last))
    except ValueError as exc:
        raise ApiError(422, "entry_too_large", str(exc), retryable=False) from None


def _parsed(path: str, *, entries: bool) -> TilePath:
    parsed = parse_tile_path(("entries/" if entries else "") + path.lstrip("/"))
    if parsed is None or (parsed.level is None) != entries:
        raise not_found("tile")
    return parsed


@get(
    "/tile/entries/{path:path}",
    guards=[requires_operator],
    summary="An entry bundle (C2SP tlog-tiles): every tenant's entries, so the operator token only",
    media_type=OCTETS,
    **contract(404, 422),
)
async def entry_bundle_route(services: ServicesDep, path: FromPath[str]) -> Response[bytes]:
    body = await services.blocking(_entries, services, _parsed(path, entries=True))
    return Response(
        body, media_type=OCTETS, headers={"Cache-Control": "private, max-age=31536000, immutable"}
    )


@get(
    "/tile/{path:path}",
    summary="A Merkle tile (C2SP tlog-tiles): hashes only, public and immutable",
    media_type=OCTETS,
    **contract(404, public=True),
)
async def tile(services: ServicesDep, path: FromPath[str]) -> Response[bytes]:
    body = await services.blocking(_tile, services, _parsed(path, entries=False))
    return Response(body, media_type=OCTETS, headers={"Cache-Control": IMMUTABLE})


router = Router(
    path="/v1/tlog", route_handlers=[checkpoint, entry_bundle_route, tile], tags=["tamper evidence"]
)
