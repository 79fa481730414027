"""`citeledger spool status|flush`: what a service's client spool holds, and delivering it
(in order, through POST /v1/retrievals/batch, with the records' original keys)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from cli.common import fail

spool_app = typer.Typer(no_args_is_help=True, help="The client's durable spool of undelivered writes.")

SpoolDir = Annotated[
    Path, typer.Option("--dir", envvar="CITELEDGER_SPOOL_DIR", help="Spool directory ($CITELEDGER_SPOOL_DIR)")
]


@spool_app.command("status")
def status(
    directory: SpoolDir,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
) -> None:
    """Pending records (count, bytes, oldest age), refused records, segments."""
    from client.spool import Spool

    if not directory.is_dir():
        fail(f"no spool at {directory}", 2)
    state = Spool(directory).status()
    if as_json:
        print(json.dumps(state.__dict__))
        return
    age = "-" if state.oldest_age_s is None else f"{state.oldest_age_s:.0f} s"
    print(f"pending   {state.pending} records ({state.pending_bytes} bytes), oldest {age}")
    print(f"rejected  {state.rejected} records (refused for good: see rejected.jsonl)")
    print(f"segments  {state.segments} in {state.directory}")


@spool_app.command("flush")
def flush(
    directory: SpoolDir,
    url: Annotated[
        str, typer.Option("--url", envvar="CITELEDGER_URL", help="Ledger base URL ($CITELEDGER_URL)")
    ],
    token: Annotated[
        str, typer.Option("--token", envvar="CITELEDGER_TOKEN", help="Bearer token ($CITELEDGER_TOKEN)")
    ],
    max_seconds: Annotated[float | None, typer.Option("--max-seconds", help="Stop after this long")] = None,
) -> None:
    """Deliver the pending records now; exit 1 if some are still pending."""
    from client import Client

    if not directory.is_dir():
        fail(f"no spool at {directory}", 2)
    with Client(url, token, spool_dir=str(directory), drain_interval_s=None) as ledger:
        report = ledger.flush_spool(max_seconds=max_seconds)
    print(
        f"delivered {report.delivered}, rejected {report.rejected}, pending {report.pending} "
        f"in {report.seconds:.2f} s"
    )
    if report.pending:
        typer.echo(f"stopped: {report.stopped_by}", err=True)
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(spool_app, name="spool")
