"""Read-only MCP resources (JSON, the bodies of their `/v1` twins, `audit.read`): the latest
signed checkpoint, the signing keys with the root key, a receipt by id, and — only when the
operator turns it on (`CITELEDGER_MCP_HISTORY_RESOURCE`) — the tenant's history of today."""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import orjson
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resources import FunctionResource

from api.mcp import forwards
from api.mcp.arguments import ReceiptRef
from api.mcp.calls import Call, Operation, Surface
from api.mcp.outcomes import log_call, refusal, resource_error
from api.routes.checkpoints import keys_body, latest_checkpoint_body
from api.routes.events import history_page
from api.routes.receipts import receipt_answer
from api.services import Services
from ledger.domain.timestamps import format_timestamp
from ledger.usecases.context import Caller
from projections.views import HistoryFilter

AUDIT = ("audit.read",)
JSON = "application/json"
CHECKPOINT_URI = "citeledger://checkpoints/latest"
KEYS_URI = "citeledger://keys"
RECEIPT_URI = "citeledger://receipts/{receipt_id}"
HISTORY_URI = "citeledger://history/today"
HISTORY_LIMIT = forwards.HISTORY_LIMIT


async def read(
    surface: Surface, name: str, operation: Operation, arguments: dict[str, Any] | None = None
) -> str:
    """One resource read: the caller must hold `audit.read`; a refusal is a JSON-RPC error
    carrying the HTTP contract's envelope."""
    started = time.perf_counter()
    call = Call.begin(surface)
    error_code: str | None = None
    try:
        body = await call.answer(operation, arguments)
    except Exception as exc:  # noqa: BLE001 - every refusal and failure becomes the error envelope
        envelope = refusal(exc, call.ids)
        error_code = envelope["error"]["code"]
        raise resource_error(envelope) from None
    finally:
        log_call(surface.transport, "resource", name, call.ids, call.principal, started, error_code)
    return orjson.dumps(body).decode()


async def _checkpoint(services: Services, caller: Caller, _: Any) -> dict[str, Any]:
    return await services.blocking(latest_checkpoint_body, services)


async def _keys(services: Services, caller: Caller, _: Any) -> dict[str, Any]:
    return await services.blocking(keys_body, services)


async def _receipt(services: Services, caller: Caller, ref: ReceiptRef) -> dict[str, Any]:
    return await receipt_answer(services, caller, ref.receipt_id)


async def _history_today(services: Services, caller: Caller, _: Any) -> dict[str, Any]:
    midnight = forwards.today_utc(services.clock())
    flt = HistoryFilter(recorded_from=format_timestamp(midnight))
    page = await services.blocking(partial(history_page, limit=HISTORY_LIMIT), services, caller, flt)
    return {"since": format_timestamp(midnight), **page}


def add_resources(server: MCPServer, surface: Surface, *, history: bool) -> None:
    async def checkpoint() -> str:
        return await read(
            surface, CHECKPOINT_URI, Operation(AUDIT, None, _checkpoint, forwards.latest_checkpoint)
        )

    async def keys() -> str:
        return await read(surface, KEYS_URI, Operation(AUDIT, None, _keys, forwards.keys))

    server.add_resource(
        FunctionResource.from_function(
            checkpoint,
            CHECKPOINT_URI,
            name="latest-checkpoint",
            description="The latest signed checkpoint (C2SP signed note) and the log's origin",
            mime_type=JSON,
        )
    )
    server.add_resource(
        FunctionResource.from_function(
            keys,
            KEYS_URI,
            name="keys",
            description="The root public key and every signing key with its validity",
            mime_type=JSON,
        )
    )

    @server.resource(
        RECEIPT_URI, name="receipt", description="One receipt with its signed entry", mime_type=JSON
    )
    async def receipt(receipt_id: str) -> str:
        operation = Operation(AUDIT, ReceiptRef, _receipt, forwards.receipt)
        return await read(surface, RECEIPT_URI, operation, {"receipt_id": receipt_id})

    if history:

        async def history_today() -> str:
            operation = Operation(AUDIT, None, _history_today, forwards.history_today)
            return await read(surface, HISTORY_URI, operation)

        server.add_resource(
            FunctionResource.from_function(
                history_today,
                HISTORY_URI,
                name="history-today",
                description=f"The tenant's entries recorded since 00:00 UTC today (the first "
                f"{HISTORY_LIMIT}; the rest through GET /v1/events)",
                mime_type=JSON,
            )
        )
