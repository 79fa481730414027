"""`citeledger replay RECEIPT_ID`: replay a receipt on the local ledger and print the diff."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from cli.common import ledger_config
from cli.options import DataDir, ReceiptTenant, tenant_or_default

# Piped or redirected, rich would cut tables to 80 columns: chunk ids and paths are the
# point of the table, so off a terminal it lays them out at their full width.
_terminal = Console()
out = _terminal if _terminal.is_terminal else Console(width=10_000)


def replay_command(
    receipt_id: Annotated[str, typer.Argument(help="The receipt to replay")],
    at_position: Annotated[
        int | None, typer.Option("--at-position", help="Compare with the ledger at this position, not now")
    ] = None,
    tenant: ReceiptTenant = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the answer as one JSON object")] = False,
    data_dir: DataDir = None,
) -> None:
    """Re-run a receipt under its frozen policy: integrity, data drift, policy drift.
    Appends a signed replay receipt; exit 1 on an integrity mismatch, 2 on a refusal."""
    from bootstrap import ledger_context
    from ledger.usecases.context import Caller
    from ledger.usecases.errors import UseCaseError
    from ledger.usecases.replay import replay
    from ledger.writing.application import Ledger

    caller = Caller(
        tenant_id=tenant_or_default(tenant),
        actor="cli",
        scopes=frozenset({"replay.run"}),
    )
    with Ledger(ledger_config(data_dir)) as ledger:
        try:
            result = replay(ledger_context(ledger), caller, receipt_id, at_position)
        except UseCaseError as exc:
            typer.echo(f"refused ({exc.code}): {exc.message}", err=True)
            raise typer.Exit(2) from None
    body = result.body
    if as_json:
        typer.echo(json.dumps(body, indent=2, sort_keys=True))
    else:
        print_replay(body)
    raise typer.Exit(1 if body.get("integrity") == "mismatch" else 0)


def print_replay(body: dict[str, Any]) -> None:
    out.print(
        f"receipt [bold]{body['original_receipt_id']}[/] ({body['engine']}) replayed at position "
        f"{body['at_position']}; replay receipt: {body['replay_receipt_id'] or '[red]not recorded[/]'}"
    )
    integrity = body["integrity"]
    colours = {"ok": "green", "reproduced_apart_from_erased": "green", "mismatch": "red"}
    colour = colours.get(integrity, "yellow")
    out.print(f"integrity: [{colour}]{integrity}[/]")
    reason = body.get("integrity_reason")
    if reason:
        erased = ", ".join(reason.get("document_ids", [])) or "-"
        out.print(f"  cause: {reason['cause']}; documents erased since: {erased}")
        for doc in reason.get("erased", []):
            out.print(
                f"  erased since: {doc['path']} ({doc['basis']}, position {doc['erased_position']}, "
                f"{doc['erased_at'] or 'time unknown'})",
                markup=False,
            )
    if "entries" in body:
        table = Table(title="recorded entries")
        for column in ("rank", "status", "path", "chunk", "now / rule"):
            table.add_column(column)
        for entry in body["entries"]:
            table.add_row(
                str(entry["rank"]),
                entry["status"],
                entry["path"],
                entry["chunk_id"],
                entry.get("rule_id") or entry.get("current_chunk_id") or "",
            )
        out.print(table)
    for name, envelope in body["diff"].items():
        out.print(_diff_table(name, envelope))
        _print_edits(envelope["selected_entries"].get("edited", []))


def _print_edits(edits: list[dict[str, Any]]) -> None:
    """A section edited since the receipt: its changed lines (when the caller may read them)."""
    for edit in edits:
        out.print(
            f"edited {edit['path']}: {edit['old_chunk_id']} (rank {edit['old_rank']}) -> "
            f"{edit['new_chunk_id']} (rank {edit['new_rank']})",
            markup=False,
        )
        if edit["diff"] is None:
            out.print(f"  (changed lines not shown: {edit['diff_withheld']})", markup=False)
            continue
        for line in edit["diff"]:
            style = "green" if line.startswith("+") else "red" if line.startswith("-") else None
            out.print("  " + line, style=style, markup=False, highlight=False)


def _diff_table(name: str, envelope: dict[str, Any]) -> Table:
    hashes = envelope["context_hash"]
    table = Table(
        title=f"{name}: context hash {'changed' if hashes['changed'] else 'unchanged'} "
        f"({hashes['original'][:12]} -> {hashes['replay'][:12]})"
    )
    for column in ("", "rank", "path", "chunk", "score"):
        table.add_column(column, overflow="fold")
    changes = envelope.get("changes")
    if changes:
        table.caption = "changed: " + (
            ", ".join(kind for kind, changed in changes.items() if changed) or "nothing"
        )
    entries = envelope["selected_entries"]
    for entry in entries["added"]:
        table.add_row(
            "[green]+ added", str(entry["rank"]), entry["path"], entry["chunk_id"], entry["score"] or "-"
        )
    for entry in entries["removed"]:
        table.add_row(
            "[red]- removed", str(entry["rank"]), entry["path"], entry["chunk_id"], entry["score"] or "-"
        )
    for entry in entries["common_entries"]:
        table.add_row(
            "~ moved" if entry["moved"] else "~ rescored" if entry.get("score_changed") else "= common",
            f"{entry['old_rank']} -> {entry['new_rank']}",
            entry["path"],
            entry["chunk_id"],
            f"{entry['old_score']} -> {entry['new_score']}",
        )
    filters = envelope["filters_applied"]
    for item in filters["added"]:
        table.add_row("[green]+ filter", "", item["rule_id"], item["chunk_id"], item["action"])
    for item in filters["removed"]:
        table.add_row("[red]- filter", "", item["rule_id"], item["chunk_id"], item["action"])
    return table


def register(app: typer.Typer) -> None:
    app.command("replay")(replay_command)
