"""What the report tests over HTTP and in the console share: unpacking a downloaded report zip
and checking it offline against the ledger's root key, as an auditor would."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from ledger.config import LedgerConfig
from ledger.evidence.report_check import ReportCheck, verify_report
from ledger.tlog.signing import KeyDirectory


def verify_report_zip(
    zip_bytes: bytes, report_id: str, ledger_config: LedgerConfig, into: Path, tenant: str = "acme"
) -> ReportCheck:
    """Unpack the zip into `into` and verify the report folder it holds; the check must pass."""
    with zipfile.ZipFile(io.BytesIO(zip_bytes)) as archive:
        archive.extractall(into)
    result = verify_report(
        into / f"report-{report_id}", KeyDirectory(ledger_config.keys_dir).root_public_key(), tenant=tenant
    )
    assert result.ok, result.problem
    return result
