"""`citeledger` command line: demo, verify, export, bundles, checkpoints, keys, replay."""

# Each command imports what it needs inside its body: an auditor's `verify-bundle` loads the
# bundle checker, not the store, the projections or (ever) the web package.

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from cli.checkpoint_check import register as register_checkpoint_check
from cli.common import CommandGroup, InputError, fail, ledger_config, open_output, read_input
from cli.mcp import register as register_mcp
from cli.migrate import register as register_migrate
from cli.operations import register as register_operations
from cli.projections import register as register_projections
from cli.receipts import register as register_receipts
from cli.replay import register as register_replay
from cli.server import register as register_server
from cli.sources import register as register_sources
from cli.spool import register as register_spool
from cli.tokens import register as register_tokens
from cli.trust import read_trusted_key, read_witnesses
from cli.witness import register as register_witness

if TYPE_CHECKING:
    from ledger.config import LedgerConfig
    from ledger.evidence.tenant_export import TenantExportReport
    from ledger.evidence.verify import VerifyReport
    from ledger.tlog.cosignature import Witness

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__, cls=CommandGroup)
console = Console(stderr=True)

DataDir = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Data directory (default $CITELEDGER_DATA_DIR or ./citeledger-data)"),
]
WitnessKeys = Annotated[
    list[Path] | None,
    typer.Option(
        "--witness-key",
        help="A file holding a witness's vkey (`citeledger witness vkey`); repeatable",
    ),
]
MinWitnesses = Annotated[
    int | None,
    typer.Option(
        "--min-witnesses",
        min=0,
        help="How many of the --witness-key witnesses must have cosigned (default 1 with keys, else 0)",
    ),
]
PublicKey = Annotated[
    Path | None,
    typer.Option("--public-key", help="Trusted root public key (default <data-dir>/keys/root.pub)"),
]


def _config(data_dir: Path | None, *, checkpointer: bool = False) -> LedgerConfig:
    """An existing ledger's configuration (a directory or schema without one is refused)."""
    return ledger_config(data_dir, run_checkpointer=checkpointer)


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
    witness_key: WitnessKeys = None,
    min_witnesses: MinWitnesses = None,
) -> None:
    """Check signatures, Merkle roots and checkpoints; exit 1 naming the first bad position."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

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


@app.command()
def checkpoint(data_dir: DataDir = None) -> None:
    """Issue a signed checkpoint over the whole log now and print its note."""
    from ledger.writing.application import Ledger

    with Ledger(_config(data_dir)) as ledger:
        record = ledger.issue_checkpoint()
    if record is None:
        console.print("log is empty")
        raise typer.Exit(1)
    typer.echo(record.note, nl=False)


@app.command()
def bundle(
    entry: Annotated[str, typer.Argument(help="A receipt id, or the log position of any entry")],
    out: Annotated[Path | None, typer.Option("--out")] = None,
    data_dir: DataDir = None,
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", help="Tenant of the receipt (default $CITELEDGER_TENANT or 'default')"),
    ] = None,
) -> None:
    """Write the portable bundle (entry, checkpoint, inclusion proof, key chain) of a receipt, with
    the proofs of the documents it cites (as GET /v1/receipts/{id}/bundle), or of the entry at a
    log position."""
    import orjson

    from ledger.domain.events import IDENTIFIER_PATTERN
    from ledger.evidence.bundle import build_bundle
    from ledger.usecases.errors import NotFound
    from ledger.usecases.receipts import receipt_bundle
    from ledger.writing.application import Ledger

    if not entry.isdigit() and not re.fullmatch(IDENTIFIER_PATTERN, entry):
        fail(f"{entry[:64]!r}: give a receipt id or a log position", 2)
    owner = tenant or os.environ.get("CITELEDGER_TENANT", "default")
    with Ledger(_config(data_dir)) as ledger:
        try:
            if entry.isdigit():
                document = build_bundle(ledger, int(entry))
            else:
                from bootstrap import ledger_context

                document = receipt_bundle(ledger_context(ledger), owner, entry)
        except NotFound:
            fail(f"no receipt {entry} in tenant {owner}", 1)
        except LookupError as exc:
            fail(str(exc), 1)
    text = orjson.dumps(document, option=orjson.OPT_INDENT_2)
    if out is None:
        sys.stdout.buffer.write(text + b"\n")
    else:
        with open_output(out) as handle:
            handle.write(text + b"\n")


@app.command("verify-bundle")
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


@app.command()
def repair(
    data_dir: DataDir = None,
    actor: Annotated[str, typer.Option("--actor", help="Who repairs (recorded in the entry)")] = "operator",
    yes: Annotated[bool, typer.Option("--yes", help="Do it (without: only list the findings)")] = False,
) -> None:
    """Answer integrity findings (a log cut back or rewritten): append a signed IntegrityRepaired
    entry naming each finding and what was done, rebuild mismatched tiles, and accept writes again."""
    from ledger.writing.application import Ledger

    with Ledger(_config(data_dir)) as ledger:
        findings = list(ledger.findings)
        for finding in findings:
            typer.echo(finding.line())
        if not findings:
            typer.echo("no integrity finding: nothing to repair")
            return
        if not yes:
            console.print("[yellow]nothing done; run again with --yes to record the repair")
            raise typer.Exit(1)
        event = ledger.repair(actor=actor)
    typer.echo(f"recorded IntegrityRepaired at position {event.position}; writes are accepted again")


@app.command()
def vkey(
    data_dir: DataDir = None,
    witnesses: Annotated[bool, typer.Option("--witnesses", help="The witnesses' vkeys")] = False,
) -> None:
    """Print the log's verifier key (C2SP vkey of the key signing checkpoints), what
    `citeledger witness add-log` takes; with --witnesses, each configured witness's vkey."""
    from ledger.writing.application import Ledger

    with Ledger(_config(data_dir)) as ledger:
        if not witnesses:
            typer.echo(ledger.vkey)
            return
        for endpoint in ledger.cosigner.endpoints if ledger.cosigner is not None else []:
            typer.echo(f"{endpoint.witness.vkey} {endpoint.url}")


@app.command("rotate-key")
def rotate_key(data_dir: DataDir = None) -> None:
    """Introduce a new signing key, announced in the log and signed by the current one."""
    from ledger.writing.application import Ledger

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
    from ledger.storage.adapters import adapter_class
    from ledger.storage.adapters.migrations import migrate_store

    config = ledger_config(data_dir, create=True, run_checkpointer=True)
    migrate_store(config, upgrade=not adapter_class(config).scale_out)  # as `serve` does
    # The demo's narration is its result: stdout (logs and errors stay on stderr).
    raise typer.Exit(run_demo(config, events, Console(), corpus))


@app.command()
def init(data_dir: DataDir = None) -> None:
    """Create a ledger (keys, store, genesis entry) in the data directory or PostgreSQL schema;
    only `init`, `serve` and `demo` create one. A ledger already there is left as it is."""
    from ledger.storage.adapters import adapter_class
    from ledger.storage.adapters.migrations import migrate_store
    from ledger.storage.presence import NoLedger, require_ledger
    from ledger.writing.application import Ledger

    config = ledger_config(data_dir, create=True, run_checkpointer=False)
    try:
        require_ledger(config)
        existed = True
    except NoLedger:
        existed = False
    # SQLite is migrated here; a shared PostgreSQL schema only by `citeledger migrate`.
    outcome = migrate_store(config, upgrade=not adapter_class(config).scale_out)
    with Ledger(config) as ledger:
        size = ledger.size
    where = (
        f"PostgreSQL schema {config.eventsourcing_env()['POSTGRES_SCHEMA']!r}"
        if config.is_postgres
        else str(config.data_dir)
    )
    verb = "a ledger already exists in" if existed else "created a ledger in"
    typer.echo(
        f"{verb} {where} ({size} entries, {outcome.describe()}); "
        f"root public key: {config.keys_dir / 'root.pub'}"
    )


register_server(app)
register_projections(app)
register_mcp(app)
register_sources(app)
register_spool(app)
register_replay(app)
register_witness(app)
register_receipts(app)
register_checkpoint_check(app)
register_migrate(app)
register_tokens(app)
register_operations(app)

if __name__ == "__main__":  # pragma: no cover
    app()
