"""`citeledger verify`, `export` and `verify-bundle`: whole-log, tenant and bundle verification.

Each command imports what it needs inside its body: `verify --export` and `verify-bundle` load
no store, no projections and (ever) no web package (`tests/test_cli_imports.py`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from cli.common import InputError, fail, open_output, progress_bar, read_input
from cli.options import DataDir, MinWitnesses, PublicKey, WitnessKeys
from cli.options import existing_config as _config
from cli.trust import read_trusted_key, read_witnesses
from cli.verify_reports import print_report as _print_report
from cli.verify_reports import print_tenant_report as _print_tenant_report

if TYPE_CHECKING:
    from ledger.config import LedgerConfig
    from ledger.tlog.cosignature import Witness

console = Console(stderr=True)


def _trusted_key(config: LedgerConfig, public_key: Path | None) -> bytes:
    from ledger.tlog.signing import KeyDirectory

    return read_trusted_key(public_key or KeyDirectory(config.keys_dir).root_public_key_path)


def _text(raw: bytes, path: Path) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None


def _check_cosigned(note: str, witnesses: list[Witness], required: int) -> str | None:
    """A line naming which trusted witnesses cosigned (None when none is trusted);
    exit 1 when fewer than `required` did."""
    from ledger.tlog.cosignature import require_cosignatures
    from ledger.tlog.note import NoteError

    if not witnesses:
        return None
    try:
        found = require_cosignatures(note, witnesses, required)
    except NoteError as exc:
        typer.echo(f"FAILED: {exc}")
        raise typer.Exit(1) from None
    names = ", ".join(f"{c.witness} (at {c.timestamp})" for c in found) or "none"
    return f"cosigned by {len(found)} of {len(witnesses)} trusted witnesses: {names}"


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
    witness_key: WitnessKeys = None,
    min_witnesses: MinWitnesses = None,
) -> None:
    """Check signatures, Merkle roots and checkpoints; exit 1 naming the first bad position."""

    from ledger.config import LedgerConfig
    from ledger.evidence.export_file import verify_export
    from ledger.evidence.tenant_export import is_tenant_export, verify_tenant_export

    # Offline (--export) needs no store: only the trusted key, by default the data dir's.
    config = LedgerConfig.from_env(data_dir) if export_file is not None else _config(data_dir)
    trusted = _trusted_key(config, public_key)
    # A note ends in one newline; one saved with `jq -r` or by an editor may have another.
    held = [
        _text(read_input(path, "held checkpoint"), path).rstrip("\n") + "\n" for path in held_checkpoint or []
    ]
    witnesses, required = read_witnesses(witness_key, min_witnesses)
    if witnesses and export_file is None:
        fail("--witness-key checks an export's checkpoint: give --export FILE", 2)
    try:
        partial = export_file is not None and is_tenant_export(export_file)
    except OSError as exc:
        raise InputError(f"cannot read export {export_file}: {exc.strerror or exc}") from None
    if partial and export_file is not None:
        if held:
            fail("--held-checkpoint needs a whole-log export (a tenant export holds one checkpoint)", 2)
        tenant_report = verify_tenant_export(export_file, trusted)
        _print_tenant_report(tenant_report, as_json=as_json)
        if tenant_report.ok and tenant_report.checkpoint is not None:
            line = _check_cosigned(tenant_report.checkpoint.note, witnesses, required)
            if line:
                typer.echo(line)
        raise typer.Exit(0 if tenant_report.ok else 1)
    with progress_bar("verifying", console, done="{task.completed} entries") as progress:
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
            # The store's side only here: an auditor's offline check loads no database driver.
            from ledger.storage.audit import verify_store
            from ledger.storage.store import Store
            from ledger.writing.integrity_records import size_findings

            store = Store(config)
            try:
                report = verify_store(store, trusted, deep=deep, progress=tick, held=held)
                # What the store itself holds as evidence beside the log (tiles, witnesses' sizes):
                # a log cut back together with its checkpoints does not verify clean.
                findings = size_findings(store)
            finally:
                store.close()
            if findings and not report.ok and not as_json:  # named beside what verify found
                for finding in findings:
                    typer.echo(f"FAILED: integrity: {finding.line()}")
            if findings and report.ok:
                for finding in findings:
                    typer.echo(f"FAILED: integrity: {finding.line()}")
                if not as_json:
                    _print_report(report, as_json=False)
                else:
                    typer.echo(json.dumps({"ok": False, "integrity": [f.describe() for f in findings]}))
                raise typer.Exit(1)
    _print_report(report, as_json=as_json)
    if report.ok and witnesses:
        latest = report.latest_checkpoint
        line = _check_cosigned(latest.note if latest else "", witnesses, required)
        if line:
            typer.echo(f"latest checkpoint {line}")
    raise typer.Exit(0 if report.ok else 1)


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
        from ledger.evidence.tenant_export import iter_tenant_export
        from ledger.writing.application import Ledger

        with Ledger(_config(data_dir)) as ledger, open_output(out) as handle:
            for line in iter_tenant_export(ledger, tenant):
                handle.write(line)
        console.print(f"exported tenant {tenant!r} to {out}")
        return
    from ledger.storage.audit import write_export
    from ledger.storage.store import Store
    from ledger.tlog.signing import KeyDirectory

    config = _config(data_dir)
    store = Store(config)
    try:
        with open_output(out) as handle:
            entries, checkpoints = write_export(
                store, handle, KeyDirectory(config.keys_dir).root_public_key()
            )
    finally:
        store.close()
    console.print(f"exported {entries} entries and {checkpoints} checkpoints to {out}")


def verify_bundle_command(
    bundle_file: Annotated[Path, typer.Argument(help="Bundle JSON file")],
    public_key: Annotated[Path, typer.Option("--public-key", help="Trusted root public key")],
    witness_key: WitnessKeys = None,
    min_witnesses: MinWitnesses = None,
) -> None:
    """Check a bundle offline with nothing but the root public key (and witnesses' keys)."""
    import orjson

    from ledger.evidence.bundle import BundleError, verify_bundle

    trusted = read_trusted_key(public_key)
    raw = read_input(bundle_file, "bundle")
    witnesses, required = read_witnesses(witness_key, min_witnesses)
    try:
        document = orjson.loads(raw)
        if isinstance(document, dict) and isinstance(document.get("bundle"), dict):
            document = document["bundle"]  # as downloaded from GET /v1/receipts/{id}/bundle
        entry = verify_bundle(document, trusted, witnesses=witnesses, min_witnesses=required)
    except (BundleError, orjson.JSONDecodeError) as exc:
        typer.echo(f"FAILED {exc}", err=True)  # invalid evidence: exit 1 (unreadable input is 2)
        raise typer.Exit(1) from None
    # The verdict is the command's result: stdout (refusals and errors go to stderr).
    typer.echo(
        f"OK entry at position {entry['position']} ({entry['type']}) is signed and "
        f"included in checkpoint of size {document['checkpoint']['tree_size']}"
    )
    cosigned = _check_cosigned(document["checkpoint"]["note"], witnesses, required)
    if cosigned:
        typer.echo(f"checkpoint {cosigned}")
