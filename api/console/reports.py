"""The console's reports page: issue the tenant's record-keeping report for a period, list the
reports issued (the `ReportIssued` entries of the log) and download each one's zip. The same
use cases as `/v1/reports` decide (scopes, tenant, limits)."""

from __future__ import annotations

from typing import Any

from litestar import Response, get, post
from litestar.params import FromPath
from litestar.response import Template

from api.console.actions import Form, User
from api.console.web import (
    SECURITY_HEADERS,
    AnyRequest,
    ConsoleUser,
    check_form,
    field,
    form_command,
    page,
    services_of,
)
from api.routes.events import history_page
from api.routes.reports import issue, read_archive, reports_dir
from ledger.schemas.requests import ReportIn
from projections.views import HistoryFilter


async def _page(request: AnyRequest, user: ConsoleUser, **context: Any) -> Template:
    services = services_of(request)
    flt = HistoryFilter(types=["ReportIssued"])
    body = await services.blocking(history_page, services, user.caller, flt)  # the first 100, sealed
    folder = reports_dir(services) / user.caller.tenant_id
    issued = [
        {**event, "kept": (folder / f"{event['payload']['report_id']}.zip").is_file()}
        for event in body["events"]
    ]
    return page("reports.html", user, issued=issued, **{"outcome": None, **context})


@get("/reports", name="console:reports")
async def reports(request: AnyRequest, user: User) -> Template:
    user.require("audit.read")
    return await _page(request, user)


@post("/reports", name="console:report-issue", status_code=200)
async def issue_report_form(request: AnyRequest, user: User, data: Form) -> Template:
    check_form(request, user, data, "audit.read")
    values = {"from": field(data, "from"), "to": field(data, "to"), "pdf": field(data, "pdf") == "yes"}
    command = form_command(ReportIn, values)
    services = services_of(request)
    outcome = await services.blocking(issue, services, user.caller, command)
    return await _page(request, user, outcome=outcome)


@get("/reports/{report_id:str}/download", name="console:report-download")
async def download(request: AnyRequest, user: User, report_id: FromPath[str]) -> Response[bytes]:
    user.require("audit.read")
    services = services_of(request)
    body = await services.blocking(read_archive, services, user.caller, report_id[:64], None)
    return Response(
        body,
        media_type="application/zip",
        headers={**SECURITY_HEADERS, "Content-Disposition": f'attachment; filename="report-{report_id}.zip"'},
    )


REPORT_PAGES = [reports, issue_report_form, download]
