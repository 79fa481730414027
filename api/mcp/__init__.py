"""The MCP surface: the ledger's use cases as Model Context Protocol tools and resources
(the official SDK's `MCPServer`), over stdio (`citeledger mcp`) and stateless Streamable
HTTP mounted at `/mcp`. A thin adapter like the HTTP routes: it adds no rule.

- `calls.py`: who calls (token, scopes, tenant, correlation ids) on each transport; `remote.py`
  and `forwards.py`: `citeledger mcp --url`, each call forwarded to its `/v1` twin
- `arguments.py`: the tools' input models that the HTTP contract keeps as path/query parameters
- `tools.py`: the tools, `resources.py`: the read-only resources
- `outcomes.py`: success and error results (the domain-error table of `api.errors`)
- `server.py`: the `MCPServer` (`cli/mcp.py` runs it over stdio); `mount.py`: the `/mcp` mount,
  which imports `server.py` on its first request
"""
