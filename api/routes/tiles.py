"""The Merkle tree as C2SP `tlog-tiles`, so standard tile clients can follow the log:
`/v1/tlog/checkpoint` (the latest cosigned checkpoint), `/v1/tlog/tile/<L>/<N>[.p/<W>]`
(hashes only: public, immutable) and `/v1/tlog/tile/entries/<N>[.p/<W>]` (the entries,
which carry every tenant's metadata: operator token only)."""

from __future__ import annotations

import gzip
from typing import Any

from litestar import Request, Response, Router, get
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
TEXT = "text/plain"  # Litestar adds `; charset=utf-8` to every text/* type itself


def _checkpoint(services: Services) -> str:
    record = services.ledger.latest_checkpoint() or services.ledger.issue_checkpoint()  # a new store
    if record is None:
        raise not_found("checkpoint")
    return services.ledger.cosigned(record).note


@get(
    "/checkpoint",
    summary="The latest checkpoint with its cosignatures (C2SP tlog-tiles)",
    media_type=TEXT,
    **contract(404, public=True),
)
async def checkpoint(services: ServicesDep) -> Response[str]:
    note = await services.blocking(_checkpoint, services)
    return Response(note, media_type=TEXT, headers={"Cache-Control": "no-cache"})


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


def wants_gzip(accept_encoding: str) -> bool:
    """Whether an `Accept-Encoding` value (RFC 9110 12.5.3) admits gzip: named, or `*`, with a
    q-value above 0 (`gzip;q=0` refuses it)."""
    quality: dict[str, float] = {}
    for item in accept_encoding.lower().split(","):
        coding, _, params = item.strip().partition(";")
        q = 1.0
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if coding.strip():
            quality[coding.strip()] = q
    return quality.get("gzip", quality.get("x-gzip", quality.get("*", 0.0))) > 0


def _compressed(body: bytes) -> bytes:
    # mtime 0: the same bundle is the same bytes on every request, as its immutable caching says.
    return gzip.compress(body, compresslevel=6, mtime=0)


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
async def entry_bundle_route(
    request: Request[Any, Any, Any], services: ServicesDep, path: FromPath[str]
) -> Response[bytes]:
    body = await services.blocking(_entries, services, _parsed(path, entries=True))
    headers = {"Cache-Control": PRIVATE_IMMUTABLE, "Vary": "Accept-Encoding"}
    if wants_gzip(request.headers.get("accept-encoding", "")):
        # Entries are JSON: a bundle shrinks to about a third, as tlog-tiles clients expect.
        body = await services.blocking(_compressed, body)
        headers["Content-Encoding"] = "gzip"
    return Response(body, media_type=OCTETS, headers=headers)


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
