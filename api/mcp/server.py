"""The ledger's `MCPServer`, and the session manager behind its stateless Streamable HTTP
mount at `/mcp` (`api.mcp.mount`, which imports this module on the first `/mcp` request).

Stateless: the SDK keeps nothing between requests.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from api.config import ApiConfig, server_version
from api.mcp.calls import HttpSurface, Surface, bind_request, refuse_unknown_tools
from api.mcp.resources import add_resources
from api.mcp.tools import ledger_tools

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


def session_manager(config: ApiConfig) -> StreamableHTTPSessionManager:
    """The stateless Streamable HTTP session manager of the ledger's server (`api.mcp.mount`
    builds it on the first `/mcp` request and runs it until the app stops)."""
    server = build_server(HttpSurface(), history_resource=config.mcp_history_resource)
    server.streamable_http_app(
        streamable_http_path="/",
        stateless_http=True,
        json_response=True,
        max_request_body_size=config.limits.max_body_bytes,
        transport_security=transport_security(config),
    )
    return server.session_manager  # exists only once streamable_http_app() was called
