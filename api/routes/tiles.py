"""The Merkle tree as C2SP `tlog-tiles`, so standard tile clients can follow the log:
`/v1/tlog/checkpoint` (the latest cosigned checkpoint), `/v1/tlog/tile/<L>/<N>[.p/<W>]`
(hashes only: public, immutable) and `/v1/tlog/tile/entries/<N>[.p/<W>]` (the entries,
which carry every tenant's metadata: operator token only)."""

from __future__ import annotations

from litestar import Response, Router, get
from litestar.connection import ASGIConnection
from litestar.handlers import BaseRouteHandler

from api.auth import requires_operator
from api.contract import ApiError, not_found
from api.openapi import contract
from api.routes.common import ServicesDep
from api.services import Services
from ledger.tlog_tiles import TILE_WIDTH, TilePath, entry_bundle, parse_tile_path

IMMUTABLE = "public, max-age=31536000, immutable"
OCTETS = "application/octet-stream"


def _checkpoint(services: Services) -> str:
    record = services.ledger.latest_checkpoint()
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
    ledger = services.ledger
    assert tile.level is not None
    for _ in range(2):
        try:
            return ledger.tree.tile(tile.level, tile.index, tile.width)
        except LookupError:
            ledger.sync()  # entries another process appended
    raise not_found("tile")


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


async def _operator_for_entries(connection: ASGIConnection, handler: BaseRouteHandler) -> None:  # type: ignore[type-arg]
    """Entry bundles hold other tenants' entries: the operator token only (tiles are hashes)."""
    if connection.path_params.get("path", "").lstrip("/").startswith("entries/"):
        await requires_operator(connection, handler)


@get(
    "/tile/{path:path}",
    guards=[_operator_for_entries],
    summary="A Merkle tile or an entry bundle (C2SP tlog-tiles); entry bundles need the operator token",
    media_type=OCTETS,
    **contract(404, 422, public=True),
)
async def tile(services: ServicesDep, path: str) -> Response[bytes]:
    parsed = parse_tile_path(path.lstrip("/"))
    if parsed is None:
        raise not_found("tile")
    if parsed.level is None:
        body = await services.blocking(_entries, services, parsed)
        cache = "private, max-age=31536000, immutable"
    else:
        body = await services.blocking(_tile, services, parsed)
        cache = IMMUTABLE
    return Response(body, media_type=OCTETS, headers={"Cache-Control": cache})


router = Router(path="/v1/tlog", route_handlers=[checkpoint, tile], tags=["tamper evidence"])
