"""`citeledger witness init|add-log|serve|vkey`: run a C2SP tlog-witness beside
the ledger, in its own process with its own key and storage."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from witness.state import WitnessState

witness_app = typer.Typer(no_args_is_help=True, help=__doc__)

WitnessDir = Annotated[Path, typer.Option("--dir", help="The witness's own directory (key and state)")]


def _open(directory: Path) -> WitnessState:
    from witness.state import WitnessSetupError, WitnessState

    try:
        return WitnessState(directory)
    except WitnessSetupError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


@witness_app.command("init")
def init(
    directory: WitnessDir,
    name: Annotated[str, typer.Option("--name", help="The witness's key name, e.g. witness.example/w1")],
) -> None:
    """Create the witness directory (0700) and its Ed25519 key (0600); print its vkey."""
    from witness.state import WitnessState

    try:
        state = WitnessState.init(directory, name)
    except (OSError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(state.witness.vkey)


@witness_app.command("add-log")
def add_log(
    directory: WitnessDir,
    vkey: Annotated[str, typer.Argument(help="The log's verifier key (`citeledger vkey` prints it)")],
) -> None:
    """Follow a log: cosign its checkpoints from now on."""
    from ledger.tlog.note import NoteError

    try:
        origin = _open(directory).add_log(vkey)
    except NoteError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"following {origin}")


@witness_app.command("vkey")
def vkey(directory: WitnessDir) -> None:
    """Print the witness's verifier key (C2SP vkey, type 0x04: cosignature/v1)."""
    typer.echo(_open(directory).witness.vkey)


@witness_app.command("serve")
def serve(
    directory: WitnessDir,
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port")] = 8100,
    log_level: Annotated[str, typer.Option("--log-level")] = "info",
) -> None:
    """Serve POST /add-checkpoint and GET /<origin hash>/checkpoint until stopped."""
    import uvicorn

    from witness.app import create_witness_app

    os.umask(0o077)  # the state database's journal files are the witness's alone
    state = _open(directory)
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    typer.echo(f"witness {state.witness.vkey} on http://{host}:{port}", err=True)
    uvicorn.run(create_witness_app(state), host=host, port=port, log_level=log_level, access_log=False)


def register(app: typer.Typer) -> None:
    app.add_typer(witness_app, name="witness")
