"""The witness's HTTP interface (C2SP tlog-witness): `POST /add-checkpoint` and the
monitoring `GET /<origin hash>/checkpoint`. Plain text in and out."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from litestar import Litestar, MediaType, Request, Response, get, post

from ledger.tlog.witness_protocol import (
    MAX_REQUEST_BYTES,
    SIZE_CONTENT_TYPE,
    WitnessRefusal,
    parse_add_checkpoint,
)
from witness.state import WitnessState

_TEXT = "text/plain"  # Litestar adds `; charset=utf-8` to a text/* type itself


def create_witness_app(state: WitnessState) -> Litestar:
    @post("/add-checkpoint", status_code=200)
    async def add_checkpoint(request: Request[Any, Any, Any]) -> Response[bytes]:
        body = await request.body()
        try:
            parsed = parse_add_checkpoint(body)
            line = await anyio.to_thread.run_sync(state.add_checkpoint, parsed)
        except WitnessRefusal as refusal:
            if refusal.latest_size is not None:
                # The spec's type exactly: as a media type Litestar would append a charset.
                return Response(
                    f"{refusal.latest_size}\n".encode(),
                    status_code=409,
                    headers={"Content-Type": SIZE_CONTENT_TYPE},
                )
            return Response((refusal.message + "\n").encode(), status_code=refusal.status, media_type=_TEXT)
        return Response(line.encode("utf-8"), status_code=200, media_type=_TEXT)

    @get("/{origin_hash:str}/checkpoint", media_type=MediaType.TEXT)
    async def checkpoint(origin_hash: str) -> Response[bytes]:
        note = await anyio.to_thread.run_sync(state.latest_note, origin_hash)
        if note is None:
            return Response(b"no checkpoint cosigned for this log\n", status_code=404, media_type=_TEXT)
        return Response(note.encode("utf-8"), media_type=_TEXT)

    @get("/vkey", media_type=MediaType.TEXT)
    async def vkey() -> Response[bytes]:
        return Response((state.witness.vkey + "\n").encode(), media_type=_TEXT)

    return Litestar(
        route_handlers=[add_checkpoint, checkpoint, vkey],
        request_max_body_size=MAX_REQUEST_BYTES,
        openapi_config=None,
    )
