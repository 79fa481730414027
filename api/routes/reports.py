"""Record-keeping reports (`ledger.usecases.report`): issue one, download it as a zip."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import orjson
from litestar import Response, Router, get, post
from litestar.params import JSONBody, Parameter

from api.auth import requires
from api.openapi import contract
from api.routes.common import AnyRequest, CallerDep, ServicesDep, ok
from api.services import Services
from ledger.schemas.answers import ReportManifestOut, ReportOut
from ledger.schemas.requests import ReportIn
from ledger.usecases.context import Caller
from ledger.usecases.report import archived_report, issue_archived, read_member, report_period

ReportId = Annotated[str, Parameter(pattern=r"^[0-9a-f]{32}$", max_length=32)]


def reports_dir(services: Services) -> Path:
    return services.config.ledger.data_dir / "reports"


def issue(services: Services, caller: Caller, body: ReportIn) -> dict[str, object]:
    period = report_period(body.period_from, body.period_to, now=services.context.clock())
    outcome = issue_archived(services.context, caller, period, reports_dir(services), pdf=body.pdf)
    return {
        "report_id": outcome.report_id,
        "tenant_id": caller.tenant_id,
        "manifest_sha256": outcome.manifest_sha256,
        "position": outcome.position,
        "entries": outcome.entries,
        "pdf": outcome.pdf,
        "download": f"/v1/reports/{outcome.report_id}",
    }


def read_archive(services: Services, caller: Caller, report_id: str, member: str | None) -> bytes:
    """The zip of one of the caller's tenant's reports, or one file of it (404 otherwise)."""
    path = archived_report(reports_dir(services), caller.tenant_id, report_id)
    return path.read_bytes() if member is None else read_member(path, member)


@post(
    "/v1/reports",
    guards=[requires("audit.read")],
    status_code=201,
    summary="Issue the tenant's record-keeping report for a period (its manifest's hash is appended "
    "to the log as a signed ReportIssued entry)",
    **contract(403, 413, 422),
)
async def post_report(
    request: AnyRequest, services: ServicesDep, caller: CallerDep, data: JSONBody[ReportIn]
) -> Response[ReportOut]:
    return ok(request, services, await services.blocking(issue, services, caller, data), 201)


@get(
    "/v1/reports/{report_id:str}",
    guards=[requires("audit.read")],
    summary="The report's directory as a zip (unzip, then `citeledger verify-report`)",
    media_type="application/zip",
    **contract(404),
)
async def get_report(services: ServicesDep, caller: CallerDep, report_id: ReportId) -> Response[bytes]:
    body = await services.blocking(read_archive, services, caller, report_id, None)
    return Response(
        body,
        media_type="application/zip",
        headers={"Content-Disposition": f'attachment; filename="report-{report_id}.zip"'},
    )


@get(
    "/v1/reports/{report_id:str}/manifest",
    guards=[requires("audit.read")],
    summary="The report's machine manifest (every figure and the positions it came from)",
    **contract(404),
)
async def get_manifest(
    request: AnyRequest, services: ServicesDep, caller: CallerDep, report_id: ReportId
) -> Response[ReportManifestOut]:
    body = await services.blocking(read_archive, services, caller, report_id, "manifest.json")
    return ok(request, services, {"manifest": orjson.loads(body)})


router = Router(path="/", route_handlers=[post_report, get_report, get_manifest], tags=["reports"])
