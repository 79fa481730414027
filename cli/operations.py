"""`citeledger backup` and `citeledger retire-keys`: what an operator runs beside the
server (docs/operations.md). Neither imports the web package."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli.common import EXIT_USAGE, fail, ledger_config
from cli.options import DataDir


def backup_command(
    out: Annotated[Path, typer.Option("--out", help="A new (or empty) directory for the copy")],
    data_dir: DataDir = None,
) -> None:
    """Copy the ledger while it serves: the SQLite store through SQLite's online backup (one
    consistent snapshot), then the keys, tokens and sources. The copy is a data directory:
    `citeledger verify --deep --data-dir OUT` checks it. A PostgreSQL store is not copied
    (take it with pg_dump); its keys, tokens and sources are."""
    from ledger.storage.backup import BackupTargetError, backup

    config = ledger_config(data_dir)
    try:
        result = backup(config, out)
    except BackupTargetError as exc:
        fail(str(exc), EXIT_USAGE)
    if result.store_bytes is None:
        schema = config.eventsourcing_env()["POSTGRES_SCHEMA"]
        typer.echo(f"store: PostgreSQL schema {schema!r}, not copied: take it with pg_dump")
    else:
        typer.echo(f"store: ledger.sqlite, online backup, {result.store_bytes} bytes")
    keys = [name for name in result.files if name.startswith("keys/")]
    others = [name for name in result.files if not name.startswith("keys/")]
    typer.echo(f"keys: {len(keys)} files ({', '.join(Path(k).name for k in keys)})")
    typer.echo(f"other files: {', '.join(others) if others else 'none'}")
    typer.echo(f"backup written to {out} (0700; files 0600): it holds master.key, keep it like the key")


def retire_keys_command(data_dir: DataDir = None) -> None:
    """Delete the private key files of signing keys the log has replaced (`rotate-key`).
    Never the key in force; the public keys stay (in the log and in `<kid>.pub`), so every
    signature they made still verifies."""
    from ledger.writing.application import Ledger

    config = ledger_config(data_dir, run_checkpointer=False)
    with Ledger(config) as ledger:
        in_force = ledger.signing_key().kid
        superseded = [kid for kid in ledger.public_keys if kid != in_force]
        retired = [kid for kid in superseded if ledger.keydir.remove_private_key(kid)]
        introduced = dict(ledger.key_introduced_at)
    for kid in retired:
        typer.echo(f"retired {kid} (introduced at position {introduced[kid]}): private key deleted")
    if not retired:
        typer.echo("no private key of a replaced signing key is left")
    typer.echo(f"signing key in force: {in_force} (keys/active)")


def register(app: typer.Typer) -> None:
    app.command("backup")(backup_command)
    app.command("retire-keys")(retire_keys_command)
