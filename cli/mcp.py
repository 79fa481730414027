"""`citeledger mcp`: the ledger's MCP tools and resources over stdio, for an agent's MCP
client to start as a subprocess. The token comes from `CITELEDGER_TOKEN` (never an argument:
argv is visible to every user of the machine). Stdout carries nothing but the protocol:
logs go to stderr, and startup runs with stdout pointed at stderr too."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from cli.options import DataDir
from cli.server import _prepare


def mcp(
    data_dir: DataDir = None,
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            help="A remote ledger's base URL (http://host:port): each tool calls its /v1 route there",
        ),
    ] = None,
    public_key: Annotated[
        Path | None,
        typer.Option(
            "--public-key",
            help="With --url: the root public key verify_receipt trusts (default: the ledger's own)",
        ),
    ] = None,
) -> None:
    """Serve the MCP tools over stdio (token from CITELEDGER_TOKEN)."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
    logging.getLogger("citeledger.mcp").setLevel(logging.INFO)  # one access line per call (ids, no text)
    token = os.environ.get("CITELEDGER_TOKEN", "").strip()
    if not token:
        typer.echo("error: set CITELEDGER_TOKEN to the bearer token the tools act with", err=True)
        raise typer.Exit(2)
    if url is not None:
        _serve_remote(url, token, public_key)
        return
    _serve_local(data_dir, token)


def _serve_local(data_dir: DataDir, token: str) -> None:
    import anyio

    from api.auth import principal_for
    from api.mcp.calls import StdioSurface
    from api.mcp.server import build_server
    from api.metrics import Metrics
    from api.services import Services

    with contextlib.redirect_stdout(sys.stderr):
        config = _prepare(data_dir)
        services = Services(config, Metrics())
    try:
        try:
            principal = principal_for(services.tokens, token)
        except Exception:  # noqa: BLE001 - the token check's refusal: say so and stop
            typer.echo(f"error: CITELEDGER_TOKEN is not a token of {config.token_path}", err=True)
            raise typer.Exit(2) from None
        if principal.operator:
            typer.echo("error: an operator token is bound to no tenant; the tools need a tenant's", err=True)
            raise typer.Exit(2)
        server = build_server(StdioSurface(services, token), history_resource=config.mcp_history_resource)
        anyio.run(server.run_stdio_async)
    finally:
        services.close()


def _serve_remote(url: str, token: str, public_key: Path | None) -> None:
    import anyio

    from api.config import ApiConfig, SettingError
    from api.mcp.remote import RemoteSurface
    from api.mcp.server import build_server
    from ledger.tlog.signing import KeyFileError, read_public_key_file

    if not url.startswith(("http://", "https://")):
        typer.echo("error: --url must be an http:// or https:// base URL", err=True)
        raise typer.Exit(2)
    try:
        config = ApiConfig.from_env()
        trusted = read_public_key_file(public_key) if public_key is not None else None
    except (SettingError, OSError, KeyFileError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    surface = RemoteSurface(url, token, timeout_s=config.request_deadline_s + 5, trusted_root_key=trusted)
    server = build_server(surface, history_resource=config.mcp_history_resource)

    async def serve() -> None:
        try:
            await server.run_stdio_async()
        finally:
            await surface.aclose()

    anyio.run(serve)


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp)
