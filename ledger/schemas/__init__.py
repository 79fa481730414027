"""The contract: each request and answer shape of the ledger's surfaces, written once.

`requests` holds the request bodies (the use cases' commands), `answers` and `reads` the
success bodies, `examples` one example per request body. The HTTP API's OpenAPI document,
the MCP tools' input and output schemas and the Python client (`client.models`) all use
these models. Pydantic and `ledger.domain` only: no web framework, no HTTP client, no store
(the `schemas` import contract in pyproject.toml), so the client can import them.
"""
