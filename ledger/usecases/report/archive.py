"""Reports kept for download: what the HTTP API and the console issue, as one zip per report.

A zip holds the report's directory as `citeledger report` writes it (unzip, then
`citeledger verify-report`). Zips live under the data directory, one folder per tenant: a
tenant asking for another tenant's report id finds nothing (404). With several hosts on one
PostgreSQL, a zip is on the host that made it.
"""

from __future__ import annotations

import re
import shutil
import uuid
import zipfile
from pathlib import Path

from ledger.evidence.report_figures import Period
from ledger.usecases.context import Caller, UseCaseContext
from ledger.usecases.errors import NotFound
from ledger.usecases.report.issue import ReportOutcome, issue_report

MAX_ARCHIVED_ENTRIES = 200_000  # over HTTP; the command line reports larger periods
_REPORT_ID = re.compile(r"^[0-9a-f]{32}$")


def issue_archived(
    ctx: UseCaseContext, caller: Caller, period: Period, reports_dir: Path, *, pdf: bool
) -> ReportOutcome:
    """Issue the report, zip its directory as `<tenant>/<report id>.zip`, drop the directory."""
    tenant_dir = reports_dir / caller.tenant_id
    work = tenant_dir / f".work-{uuid.uuid4().hex}"
    try:
        outcome = issue_report(ctx, caller, period, work, max_entries=MAX_ARCHIVED_ENTRIES, pdf=pdf)
        partial = tenant_dir / f".{outcome.report_id}.zip"
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
            for path in sorted(work.rglob("*")):
                if path.is_file():
                    archive.write(path, f"report-{outcome.report_id}/{path.relative_to(work).as_posix()}")
        partial.replace(tenant_dir / f"{outcome.report_id}.zip")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return outcome


def archived_report(reports_dir: Path, tenant_id: str, report_id: str) -> Path:
    """The zip of one of the tenant's reports; NotFound for any other id."""
    path = reports_dir / tenant_id / f"{report_id}.zip"
    if not _REPORT_ID.fullmatch(report_id) or not path.is_file():
        raise NotFound("report")
    return path


def read_member(archive_path: Path, name: str) -> bytes:
    """One file of an archived report (`manifest.json`, `report.html`)."""
    with zipfile.ZipFile(archive_path) as archive:
        for member in archive.namelist():
            if member.split("/", 1)[-1] == name:
                return archive.read(member)
    raise NotFound("report file")
