"""The service layer: every use case of the ledger, as plain functions.

Each takes plain values (a `Caller`, a command, ids) and a small `UseCaseContext`
(the group-commit writer, the sealer, the write-side lookups, retention rules,
one clock), returns plain results and raises the domain errors of
`ledger.usecases.errors`. The HTTP API, the command line, MCP tools and the web
console are thin adapters over these functions; none of them builds an event.
"""
