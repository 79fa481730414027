"""`citeledger` command line: demo, verify, export, bundles, checkpoints, keys, replay."""

# Each command imports what it needs inside its body: an auditor's `verify-bundle` loads the
# bundle checker, not the store, the projections or (ever) the web package.

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from cli.projections import register as register_projections
from cli.receipts import register as register_receipts
from cli.replay import register as register_replay
from cli.server import register as register_server
from cli.sources import register as register_sources
from cli.spool import register as register_spool

if TYPE_CHECKING:
    from ledger.config import LedgerConfig
    from ledger.tenant_export import TenantExportReport
    from ledger.verify import VerifyReport

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
console = Console(stderr=True)

DataDir = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Data directory (default $CITELEDGER_DATA_DIR or ./citeledger-data)"),
]
PublicKey = Annotated[
    Path | None,
    typer.Option("--public-key", help="Trusted root public key (default <data-dir>/keys/root.pub)"),
]


def _config(data_dir: Path | None, *, checkpointer: bool = False) -> LedgerConfig:
    from ledger.config import LedgerConfig

    return LedgerConfig.from_env(data_dir, run_checkpointer=checkpointer)


def _trusted_key(config: LedgerConfig, public_key: Path | None) -> bytes:
    from ledger.signing import KeyDirectory, KeyFileError, read_public_key_file

    path = public_key or KeyDirectory(config.keys_dir).root_public_key_path
    try:
        return read_public_key_file(path)
    except (OSError, KeyFileError) as exc:
        console.print(f"[red]cannot read trusted public key: {exc}")
        raise typer.Exit(2) from None


def _print_report(report: VerifyReport, *, as_json: bool) -> None:
    """One fact per line for people; `--json` prints one JSON object for machines."""
    latest = report.latest_checkpoint
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "ok": report.ok,
                    "entries": report.entries,
                    "covered": report.covered,
                    "pending": report.pending,
                    "signatures_checked": report.signatures_checked,
                    "checkpoints": report.checkpoints,
                    "latest_checkpoint_size": latest.tree_size if latest else 0,
                    "first_bad_position": report.first_bad.position if report.first_bad else None,
                    "problem": report.first_bad.problem if report.first_bad else None,
                }
            )
        )
        return
    if report.ok:
        typer.echo("OK: no problem found")
    else:
        typer.echo(f"FAILED: {report.first_bad}")
    typer.echo(f"entries read: {report.entries}")
    typer.echo(
        f"entries under a signed checkpoint (root recomputed, checkpoint signature checked): {report.covered}"
    )
    typer.echo(f"entries after the latest checkpoint (no signed root yet): {report.pending}")
    every = report.signatures_checked >= report.entries > 0
    typer.echo(
        f"entry signatures checked: {report.signatures_checked} of {report.entries}"
        + ("" if every else " (key entries and the pending tail; --deep checks every one)")
    )
    typer.echo(f"signed checkpoints: {report.checkpoints}; latest covers {latest.tree_size if latest else 0}")


def _print_tenant_report(report: TenantExportReport, *, as_json: bool) -> None:
    """What a partial (tenant) export proves, and what it cannot."""
    record = report.checkpoint
    proves = (
        "each listed entry is signed by the ledger key in force at its position (key chain checked "
        "from the root public key) and is included in the log the checkpoint signed"
    )
    cannot = (
        "that the tenant has no other entries (a partial export cannot show absence); anything about "
        "other tenants; that the checkpoint is the newest (compare it with one you hold)"
    )
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "ok": report.ok,
                    "scope": "tenant",
                    "partial": True,
                    "tenant_id": report.tenant_id,
                    "entries": report.entries,
                    "signatures_checked": report.entries,
                    "inclusion_proofs_checked": report.entries,
                    "key_entries": report.key_entries,
                    "checkpoint_seq": record.seq if record else None,
                    "checkpoint_size": record.tree_size if record else 0,
                    "first_bad_position": report.first_bad.position if report.first_bad else None,
                    "problem": report.first_bad.problem if report.first_bad else None,
                    "proves": proves,
                    "does_not_prove": cannot,
                }
            )
        )
        return
    typer.echo("OK: no problem found" if report.ok else f"FAILED: {report.first_bad}")
    typer.echo(f"export: partial, tenant {report.tenant_id!r} only (not the whole log)")
    span = f" (positions {report.first_position}..{report.last_position})" if report.entries else ""
    typer.echo(f"tenant entries read: {report.entries}{span}")
    typer.echo(f"entry signatures checked: {report.entries} of {report.entries}")
    typer.echo(f"inclusion proofs checked: {report.entries} of {report.entries}")
    typer.echo(f"key chain entries checked from the root public key: {report.key_entries}")
    if record is not None:
        typer.echo(f"signed checkpoint #{record.seq} covers {record.tree_size} entries of the whole log")
    typer.echo(f"proves: {proves}")
    typer.echo(f"does not prove: {cannot}")


@app.command()
def verify(
    data_dir: DataDir = None,
    public_key: PublicKey = None,
    export_file: Annotated[
        Path | None, typer.Option("--export", help="Verify this export file offline instead of the store")
    ] = None,
    deep: Annotated[bool, typer.Option("--deep", help="Check every entry signature")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead")] = False,
    held_checkpoint: Annotated[
        list[Path] | None,
        typer.Option(
            "--held-checkpoint",
            help="A checkpoint note kept outside the store (e.g. from `citeledger checkpoint`); "
            "the log must still match it. Repeatable.",
        ),
    ] = None,
) -> None:
    """Check signatures, Merkle roots and checkpoints; exit 1 naming the first bad position."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from ledger.audit import verify_export, verify_store
    from ledger.store import Store
    from ledger.tenant_export import is_tenant_export, verify_tenant_export

    config = _config(data_dir)
    trusted = _trusted_key(config, public_key)
    try:
        # A note ends in one newline; one saved with `jq -r` or by an editor has another.
        held = [path.read_text(encoding="utf-8").rstrip("\n") + "\n" for path in held_checkpoint or []]
        partial = export_file is not None and is_tenant_export(export_file)
    except OSError as exc:
        console.print(f"[red]cannot read: {exc}")
        raise typer.Exit(2) from None
    if partial and export_file is not None:
        if held:
            console.print(
                "[red]--held-checkpoint needs a whole-log export (a tenant export holds one checkpoint)"
            )
            raise typer.Exit(2)
        tenant_report = verify_tenant_export(export_file, trusted)
        _print_tenant_report(tenant_report, as_json=as_json)
        raise typer.Exit(0 if tenant_report.ok else 1)
    with Progress(
        TextColumn("verifying"),
        BarColumn(),
        TextColumn("{task.completed} entries"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("verify", total=None)

        def tick(done: int) -> None:
            progress.update(task, completed=done)

        if export_file is not None:
            try:
                report = verify_export(export_file, trusted, deep=deep, progress=tick, held=held)
            except (OSError, ValueError) as exc:  # not an export at all: say so, no traceback
                typer.echo(f"FAILED: {exc}", err=True)  # one line, never wrapped
                raise typer.Exit(1) from None
        else:
            store = Store(config)
            try:
                report = verify_store(store, trusted, deep=deep, progress=tick, held=held)
            finally:
                store.close()
    _print_report(report, as_json=as_json)
    raise typer.Exit(0 if report.ok else 1)


@app.command()
def export(
    out: Annotated[Path, typer.Option("--out", help="JSONL file to write")],
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", help="Only this tenant's entries, with proofs (what GET /v1/export serves)"),
    ] = None,
    data_dir: DataDir = None,
) -> None:
    """Write the log and its checkpoints as JSONL for offline `verify --export` (or one tenant's part)."""
    if tenant is not None:
        from ledger.application import Ledger
        from ledger.tenant_export import iter_tenant_export

        with Ledger(_config(data_dir)) as ledger, out.open("wb") as handle:
            for line in iter_tenant_export(ledger, tenant):
                handle.write(line)
        console.print(f"exported tenant {tenant!r} to {out}")
        return
    from ledger.audit import write_export
    from ledger.signing import KeyDirectory
    from ledger.store import Store

    config = _config(data_dir)
    store = Store(config)
    try:
        with out.open("wb") as handle:
            entries, checkpoints = write_export(
                store, handle, KeyDirectory(config.keys_dir).root_public_key()
            )
    finally:
        store.close()
    console.print(f"exported {entries} entries and {checkpoints} checkpoints to {out}")


@app.command()
def checkpoint(data_dir: DataDir = None) -> None:
    """Issue a signed checkpoint over the whole log now and print its note."""
    from ledger.application import Ledger

    with Ledger(_config(data_dir)) as ledger:
        record = ledger.issue_checkpoint()
    if record is None:
        console.print("log is empty")
        raise typer.Exit(1)
    typer.echo(record.note, nl=False)


@app.command()
def bundle(
    position: Annotated[int, typer.Argument(help="Log position of the entry")],
    out: Annotated[Path | None, typer.Option("--out")] = None,
    data_dir: DataDir = None,
) -> None:
    """Write the portable bundle (entry, checkpoint, inclusion proof, key chain) for one entry."""
    import orjson

    from ledger.application import Ledger
    from ledger.bundle import build_bundle

    with Ledger(_config(data_dir)) as ledger:
        try:
            document = build_bundle(ledger, position)
        except LookupError as exc:
            console.print(f"[red]{exc}")
            raise typer.Exit(1) from None
    text = orjson.dumps(document, option=orjson.OPT_INDENT_2)
    if out is None:
        sys.stdout.buffer.write(text + b"\n")
    else:
        out.write_bytes(text + b"\n")


@app.command("verify-bundle")
def verify_bundle_command(
    bundle_file: Annotated[Path, typer.Argument(help="Bundle JSON file")],
    public_key: Annotated[Path, typer.Option("--public-key", help="Trusted root public key")],
) -> None:
    """Check a bundle offline with nothing but the root public key."""
    import orjson

    from ledger.bundle import BundleError, verify_bundle
    from ledger.signing import read_public_key_file

    trusted = read_public_key_file(public_key)
    try:
        document = orjson.loads(bundle_file.read_bytes())
        if isinstance(document, dict) and isinstance(document.get("bundle"), dict):
            document = document["bundle"]  # as downloaded from GET /v1/receipts/{id}/bundle
        entry = verify_bundle(document, trusted)
    except (BundleError, orjson.JSONDecodeError) as exc:
        console.print(f"[red]FAILED[/red] {exc}")
        raise typer.Exit(1) from None
    console.print(
        f"[green]OK[/green] entry at position {entry['position']} ({entry['type']}) is signed and "
        f"included in checkpoint of size {document['checkpoint']['tree_size']}"
    )


@app.command("rotate-key")
def rotate_key(data_dir: DataDir = None) -> None:
    """Introduce a new signing key, announced in the log and signed by the current one."""
    from ledger.application import Ledger

    with Ledger(_config(data_dir)) as ledger:
        event = ledger.rotate_signing_key()
    console.print(f"new signing key {event.payload['new_kid']} at position {event.position}")


@app.command()
def demo(
    data_dir: DataDir = None,
    events: Annotated[int, typer.Option(help="How many external retrievals to record")] = 200,
    corpus: Annotated[
        Path | None, typer.Option(help="Markdown folder to sync (default: tests/corpus of this checkout)")
    ] = None,
) -> None:
    """Sync the sample corpus, search, cite, apply a policy, erase, replay, checkpoint, bundle and
    verify: the embedded default end to end."""
    from cli.demo import run_demo

    raise typer.Exit(run_demo(_config(data_dir, checkpointer=True), events, console, corpus))


register_server(app)
register_projections(app)
register_sources(app)
register_spool(app)
register_replay(app)
register_receipts(app)

if __name__ == "__main__":  # pragma: no cover
    app()
