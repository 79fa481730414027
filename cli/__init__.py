"""The `citeledger` command line, outside the web package.

`cli.main` holds the typer app and the offline ledger commands; `cli.server`
(serve, tokens, retention) imports `api` only inside its command functions, so
`verify`, `verify-bundle` and `export` never load Litestar or uvicorn.
"""
