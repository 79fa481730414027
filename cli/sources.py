"""`citeledger sources`: the allowlist of markdown folders (add, list, remove) and `sync`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from cli.common import fail, ledger_config, progress_bar
from cli.options import DataDir

if TYPE_CHECKING:
    from ledger.retrieval.sources import SourceLimits

console = Console(stderr=True)
sources_app = typer.Typer(no_args_is_help=True, help="Allowlisted markdown folders, and syncing them.")

CLI_ACTOR = "cli"


def _data_dir(data_dir: Path | None) -> Path:
    """The data directory of an existing ledger (where the allowlist lives)."""
    return ledger_config(data_dir).data_dir


def _limits() -> SourceLimits:
    from ledger.config import SettingError
    from ledger.retrieval.sources import SourceLimits

    try:
        return SourceLimits.from_env()
    except SettingError as exc:
        fail(str(exc), 2)


def _fail(exc: Exception) -> typer.Exit:
    code = getattr(exc, "code", "error")
    typer.echo(f"refused ({code}): {getattr(exc, 'message', exc)}", err=True)
    return typer.Exit(1)


@sources_app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="Source name (a-z 0-9 _ -)")],
    path: Annotated[str, typer.Argument(help="The markdown folder")],
    tenant: Annotated[str, typer.Option("--tenant", help="Tenant the source belongs to")] = "default",
    sensitivity: Annotated[
        str | None,
        typer.Option(
            "--sensitivity", help="public, internal or restricted for every file (default internal)"
        ),
    ] = None,
    retention_days: Annotated[
        int | None, typer.Option("--retention-days", help="Retention of every file (default: the tenant's)")
    ] = None,
    data_dir: DataDir = None,
) -> None:
    """Allowlist a folder for a tenant (refused for system paths, with the rule named). A file's
    front matter (`sensitivity:`, `retention_days:`) may narrow the source's rules, never widen them."""
    from ledger.retrieval.source_registry import SourceRegistry
    from ledger.usecases.errors import UseCaseError
    from ledger.usecases.sources import add_source

    try:
        added = add_source(
            SourceRegistry(_data_dir(data_dir)),
            _limits(),
            name,
            path,
            tenant,
            sensitivity=sensitivity,
            retention_days=retention_days,
        )
    except UseCaseError as exc:
        raise _fail(exc) from None
    rules = f"sensitivity {added.get('sensitivity') or 'internal (default)'}, retention " + (
        f"{added['retention_days']} days" if added.get("retention_days") else "the tenant's default"
    )
    console.print(f"source {added['name']} -> {added['path']} (tenant {added['tenant_id']}; {rules})")


@sources_app.command("list")
def list_command(
    data_dir: DataDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON array")] = False,
) -> None:
    """The allowlist: name, folder, tenant."""
    from ledger.retrieval.source_registry import SourceRegistry
    from ledger.usecases.sources import list_sources

    listed = list_sources(SourceRegistry(_data_dir(data_dir)))
    if as_json:
        typer.echo(json.dumps(listed))
        return
    if not listed:
        console.print("no sources (nothing is readable until one is added)")
    for source in listed:
        typer.echo(f"{source['name']}\t{source['tenant_id']}\t{source['path']}")


@sources_app.command("remove")
def remove(name: Annotated[str, typer.Argument()], data_dir: DataDir = None) -> None:
    """Take a folder off the allowlist (what was recorded stays in the ledger)."""
    from ledger.retrieval.source_registry import SourceRegistry
    from ledger.usecases.errors import UseCaseError
    from ledger.usecases.sources import remove_source

    try:
        remove_source(SourceRegistry(_data_dir(data_dir)), name)
    except UseCaseError as exc:
        raise _fail(exc) from None
    console.print(f"source {name} removed")


def _rules_note(row: dict[str, Any]) -> str:
    """The rules a file got, when a source or its front matter set them."""
    if (
        row.get("sensitivity_origin", "default") == "default"
        and row.get("retention_origin", "default") == "default"
    ):
        return ""
    days = f"{row['retention_days']} days" if row.get("retention_days") else "tenant default"
    return (
        f"\t[{row['sensitivity']} ({row['sensitivity_origin']}), "
        f"retention {days} ({row['retention_origin']})]"
    )


def _print_report(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(report))
        return
    for row in report["files"]:
        reason = f" ({row['reason']})" if "reason" in row else ""
        typer.echo(f"{row['status']}{reason}\t{row['path']}{_rules_note(row)}")
    totals = report["totals"]
    typer.echo(
        f"{totals['ingested']} ingested, {totals['unchanged']} unchanged, {totals['removed']} removed, "
        f"{totals['skipped']} skipped, {totals['ignored']} not markdown"
        + (f"; truncated ({report['truncated']}): nothing removed" if report["truncated"] else "")
    )


@sources_app.command("sync")
def sync(
    name: Annotated[str, typer.Argument()],
    under: Annotated[
        str | None, typer.Option("--under", help="Only this folder of the source (relative to its root)")
    ] = None,
    readmit: Annotated[
        list[str] | None,
        typer.Option(
            "--readmit",
            help="Record this file again although it was erased (path relative to the root; repeatable)",
        ),
    ] = None,
    data_dir: DataDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="The report as one JSON object")] = False,
) -> None:
    """Record new and changed files, dedupe unchanged ones, record removals; one line per file.
    A file erased from the ledger stays out (`skipped (erased)`) until named with --readmit."""

    from bootstrap import ledger_context
    from ledger.retrieval.source_registry import SourceRegistry
    from ledger.storage.claims import DocumentClaims
    from ledger.usecases.context import Caller
    from ledger.usecases.errors import UseCaseError
    from ledger.usecases.sources import sync_source
    from ledger.writing.application import Ledger

    config = ledger_config(data_dir, run_checkpointer=True)
    registry = SourceRegistry(config.data_dir)
    limits = _limits()
    # The operator at the machine syncs for the tenant the source is bound to.
    bound = next((s for s in registry.all() if s.name == name), None)
    if bound is None:
        fail(f"no source named {name}", 1)
    caller = Caller(tenant_id=bound.tenant_id, actor=CLI_ACTOR, scopes=frozenset({"ingest.write"}))
    with Ledger(config) as ledger:
        ctx = ledger_context(ledger)
        claims = DocumentClaims(ledger.store)
        with progress_bar(f"syncing {name}", console) as bar:
            task = bar.add_task("sync", total=None)

            def tick(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            try:
                report = sync_source(
                    ctx,
                    claims,
                    registry,
                    limits,
                    caller,
                    name,
                    under=under,
                    progress=tick,
                    readmit=frozenset(readmit or ()),
                )
            except UseCaseError as exc:
                raise _fail(exc) from None
    _print_report(report, as_json)


def register(app: typer.Typer) -> None:
    app.add_typer(sources_app, name="sources")
