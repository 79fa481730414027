"""Use case: the record-keeping report a regulator asks for (issue 31).

`issue_report` computes every figure of a period from the signed log
(`ledger.evidence.report_figures`), writes the human report (HTML, and a PDF when Chromium
is present), the machine manifest and the evidence an auditor checks offline
(`ledger.evidence.report_check`), and appends the manifest's hash to the log as a signed
`ReportIssued` entry.
"""

from ledger.usecases.report.archive import archived_report, issue_archived, read_member
from ledger.usecases.report.issue import ReportOutcome, issue_report, report_period

__all__ = [
    "ReportOutcome",
    "archived_report",
    "issue_archived",
    "issue_report",
    "read_member",
    "report_period",
]
