"""`citeledger` command line: demo, verify, export, bundles, checkpoints, keys, replay."""

# Each command imports what it needs inside its body: an auditor's `verify-bundle` loads the
# bundle checker, not the store, the projections or (ever) the web package.

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from cli.checkpoint_check import register as register_checkpoint_check
from cli.common import CommandGroup, fail, ledger_config, open_output
from cli.documents import register as register_documents
from cli.mcp import register as register_mcp
from cli.migrate import register as register_migrate
from cli.operations import register as register_operations
from cli.options import DataDir, ReceiptTenant, tenant_or_default
from cli.options import existing_config as _config
from cli.projections import register as register_projections
from cli.receipts import register as register_receipts
from cli.replay import register as register_replay
from cli.report import register as register_report
from cli.server import register as register_server
from cli.sources import register as register_sources
from cli.spool import register as register_spool
from cli.tokens import register as register_tokens
from cli.verify import export, verify, verify_bundle_command
from cli.witness import register as register_witness

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__, cls=CommandGroup)
console = Console(stderr=True)

# Verification (`cli.verify`), registered here to keep the order `--help` lists.
app.command()(verify)
app.command()(export)


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
    tenant: ReceiptTenant = None,
) -> None:
    """Write the portable bundle (entry, checkpoint, inclusion proof, key chain) of a receipt, with
    the proofs of the documents it cites (as GET /v1/receipts/{id}/bundle), or of the entry at a
    log position."""
    import orjson

    from ledger.domain.fields import IDENTIFIER_PATTERN
    from ledger.evidence.bundle import build_bundle
    from ledger.usecases.errors import NotFound
    from ledger.usecases.receipts import receipt_bundle
    from ledger.writing.application import Ledger

    if not entry.isdigit() and not re.fullmatch(IDENTIFIER_PATTERN, entry):
        fail(f"{entry[:64]!r}: give a receipt id or a log position", 2)
    owner = tenant_or_default(tenant)
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


app.command("verify-bundle")(verify_bundle_command)


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
register_documents(app)
register_checkpoint_check(app)
register_migrate(app)
register_tokens(app)
register_operations(app)
register_report(app)

if __name__ == "__main__":  # pragma: no cover
    app()
