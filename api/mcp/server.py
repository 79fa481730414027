"""The ledger's `MCPServer`, and its stateless Streamable HTTP mount at `/mcp`.

The mount sits inside the Litestar app, so `/mcp` keeps the `/v1` contract: the same
bearer-token guard and rate limit (`api.auth.requires`), the request deadline, correlation
headers, the access log and metrics of `api.contract.ContractApp`. Stateless: the SDK
keeps nothing between requests, and a request naming a session (`Mcp-Session-Id`) is
refused with the seed's 400. A mounted app's own lifespan never runs, so the host app's
lifespan enters the session manager (`lifespan` below).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from litestar import asgi
from litestar.handlers import ASGIRouteHandler
from litestar.types import Receive, Scope, Send
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from api.api_error import ApiError
from api.auth import requires
from api.config import ApiConfig, server_version
from api.mcp.calls import HttpSurface, Surface, bind_request, refuse_unknown_tools
from api.mcp.resources import add_resources
from api.mcp.tools import ledger_tools

MCP_PATH = "/mcp"
SESSION_REFUSED = "MCP session state is not supported"
INSTRUCTIONS = (
    "citeledger is a signed audit ledger for AI retrievals. `search` ranks the tenant's documents "
    "and records the search as a receipt; `get_document_chunk` reads a citation back; "
    "`record_retrieval` records what your own engine selected; receipts can be read, listed, "
    "replayed and verified. Every write is a signed, append-only entry."
)
_LOCAL_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]


def build_server(surface: Surface, *, history_resource: bool) -> MCPServer:
    tools = ledger_tools(surface)
    server: MCPServer = MCPServer(
        "citeledger",
        title="citeledger",
        version=server_version(),
        instructions=INSTRUCTIONS,
        tools=tools,
        middleware=[bind_request, refuse_unknown_tools(tools)],
        log_level="WARNING",
    )
    add_resources(server, surface, history=history_resource)
    return server


def transport_security(config: ApiConfig) -> TransportSecuritySettings:
    """Localhost only (the SDK's DNS-rebinding protection), plus the hosts the operator names
    in `CITELEDGER_MCP_ALLOWED_HOSTS`; `*` turns the Host check off."""
    extra = list(config.mcp_allowed_hosts)
    if "*" in extra:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts = _LOCAL_HOSTS + extra
    origins = [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def mcp_mount(
    config: ApiConfig,
) -> tuple[ASGIRouteHandler, Callable[[Any], AbstractAsyncContextManager[None]]]:
    """The `/mcp` route handler and the lifespan the host app must enter."""
    server = build_server(HttpSurface(), history_resource=config.mcp_history_resource)
    server.streamable_http_app(
        streamable_http_path="/",
        stateless_http=True,
        json_response=True,
        max_request_body_size=config.limits.max_body_bytes,
        transport_security=transport_security(config),
    )
    manager = server.session_manager  # exists only once streamable_http_app() was called

    @asgi(MCP_PATH, is_mount=True, copy_scope=True, guards=[requires()])
    async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        """Model Context Protocol, stateless Streamable HTTP (JSON responses)."""
        if any(name == b"mcp-session-id" for name, _ in scope.get("headers", ())):
            raise ApiError(400, "bad_request", SESSION_REFUSED)
        if scope.get("path", "/") not in ("", "/"):
            raise ApiError(404, "not_found", "not found")
        if scope.get("method") != "POST":
            # Stateless: no server-to-client stream to open (GET) and no session to end (DELETE).
            # A GET would otherwise hold an SSE stream open past every deadline.
            raise ApiError(
                405, "method_not_allowed", "MCP over HTTP is stateless: POST only", headers={"Allow": "POST"}
            )
        declared = next((value for name, value in scope.get("headers", ()) if name == b"content-length"), b"")
        if declared.isdigit() and int(declared) > config.limits.max_body_bytes:
            raise ApiError(413, "payload_too_large", "request body exceeds the size limit")
        await manager.handle_request(scope, receive, send)  # type: ignore[arg-type]

    @asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return mcp_endpoint, lifespan
