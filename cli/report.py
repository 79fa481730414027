"""`citeledger report` (write a period's record-keeping report) and `verify-report` (check one offline).

`verify-report` loads the offline checker only: no store, no driver, no web package.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli.common import fail
from cli.options import DataDir, MinWitnesses, WitnessKeys, tenant_or_default
from cli.options import existing_config as _config
from cli.trust import read_trusted_key, read_witnesses


def report(
    out: Annotated[Path, typer.Option("--out", help="Directory to write (new or empty)")],
    period_from: Annotated[str, typer.Option("--from", help="First day (YYYY-MM-DD) or UTC timestamp")],
    period_to: Annotated[str, typer.Option("--to", help="Day after the last (YYYY-MM-DD) or UTC timestamp")],
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", help="Tenant reported on (default $CITELEDGER_TENANT or 'default')"),
    ] = None,
    actor: Annotated[str, typer.Option("--actor", help="Who issues it (recorded in the entry)")] = "operator",
    questions: Annotated[
        bool,
        typer.Option(
            "--questions", help="Show the sampled receipts' questions (an audit.content read, recorded)"
        ),
    ] = False,
    pdf: Annotated[
        bool, typer.Option("--pdf/--no-pdf", help="Print report.pdf with the system Chromium")
    ] = True,
    data_dir: DataDir = None,
) -> None:
    """Write a tenant's record-keeping report for a period (HTML, PDF, manifest, evidence) and record
    its manifest's hash in the log as a signed ReportIssued entry."""
    from bootstrap import ledger_context
    from ledger.usecases.context import Caller
    from ledger.usecases.errors import UseCaseError
    from ledger.usecases.report import issue_report, report_period
    from ledger.usecases.scopes import CONTENT_SCOPE
    from ledger.writing.application import Ledger

    owner = tenant_or_default(tenant)
    scopes = frozenset({"audit.read", *([CONTENT_SCOPE] if questions else [])})
    with Ledger(_config(data_dir)) as ledger:
        ctx = ledger_context(ledger)
        try:
            period = report_period(period_from, period_to, now=ctx.clock())
            outcome = issue_report(ctx, Caller(owner, actor, scopes), period, out, pdf=pdf)
        except UseCaseError as exc:
            fail(str(exc), 2)
    typer.echo(
        f"report {outcome.report_id} of tenant {owner}: {outcome.entries} entries; manifest sha256 "
        f"{outcome.manifest_sha256} recorded at position {outcome.position}; "
        f"{'HTML and PDF' if outcome.pdf else 'HTML (no PDF: Chromium absent or failed)'} in {out}"
    )


def verify_report_command(
    directory: Annotated[Path, typer.Argument(help="A report's directory (as `citeledger report` wrote it)")],
    public_key: Annotated[Path, typer.Option("--public-key", help="Trusted root public key")],
    witness_key: WitnessKeys = None,
    min_witnesses: MinWitnesses = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="The tenant the report must be of")] = None,
    deep: Annotated[
        bool, typer.Option("--deep", help="Also check every counted entry's own signature (slower)")
    ] = False,
) -> None:
    """Check a report offline: every figure against the entries it names, their signatures and
    inclusion, the period's continuity (consistency), the witnesses, and the HTML's numbers and hash."""
    from ledger.evidence.report_check import verify_report

    trusted = read_trusted_key(public_key)
    witnesses, required = read_witnesses(witness_key, min_witnesses)
    if not directory.is_dir():
        fail(f"{directory}: not a directory", 2)
    result = verify_report(
        directory, trusted, witnesses=witnesses, min_witnesses=required, tenant=tenant, deep=deep
    )
    if not result.ok:
        typer.echo(f"FAILED {result.problem}")
        raise typer.Exit(1)
    typer.echo(
        f"OK report of tenant {result.tenant_id} from {result.period['from']} to {result.period['to']}: "
        f"{result.figures} figures recomputed from {result.entries} signed entries of a continuous log; "
        f"{result.cited} cited entries proven; {result.signatures} entry signatures checked; "
        "the HTML carries the manifest's hash and numbers"
    )
    if witnesses:
        typer.echo(f"checkpoints cosigned by: {', '.join(result.cosigned_by) or 'none'}")


def register(app: typer.Typer) -> None:
    app.command()(report)
    app.command("verify-report")(verify_report_command)
