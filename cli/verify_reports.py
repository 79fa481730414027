"""How `citeledger verify` reports: one fact per line for people, one JSON object with `--json`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from ledger.evidence.tenant_export import TenantExportReport
    from ledger.evidence.verify import VerifyReport


def print_report(report: VerifyReport, *, as_json: bool) -> None:
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


def print_tenant_report(report: TenantExportReport, *, as_json: bool) -> None:
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
