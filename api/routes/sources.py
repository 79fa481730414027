"""Sources: sync an allowlisted markdown folder of the caller's tenant (`ledger.usecases.sources`).

Adding and removing sources is the operator's job on the machine (`citeledger sources add`):
no request can point the server at a folder.
"""

from __future__ import annotations

from typing import Annotated

from litestar import Response, Router, get, post
from litestar.params import Body, Parameter

from api.auth import requires
from api.openapi import contract
from api.routes.common import AnyRequest, CallerDep, ServicesDep, ok
from ledger.schemas.answers import SourcesOut, SourceSyncOut
from ledger.schemas.requests import SourceSyncIn
from ledger.usecases.sources import list_sources, sync_source

# Any other shape of name is just a name that is not there (404), never a 400 that tells more.
SourceName = Annotated[str, Parameter(max_length=256)]
DEADLINE_SHARE = 0.8  # of the request deadline: stop in time to answer with what was done


@post(
    "/{name:str}/sync",
    guards=[requires("ingest.write")],
    status_code=200,
    summary="Sync a source: record new, changed and removed markdown files",
    **contract(404, 409, 422),
)
async def post_sync(
    request: AnyRequest,
    services: ServicesDep,
    caller: CallerDep,
    name: SourceName,
    data: Annotated[SourceSyncIn | None, Body()] = None,
) -> Response[SourceSyncOut]:
    report = await services.blocking(
        lambda: sync_source(
            services.context,
            services.claims,
            services.sources,
            services.config.source_limits,
            caller,
            name,
            under=data.under if data is not None else None,
            time_budget_s=services.config.request_deadline_s * DEADLINE_SHARE,
        )
    )
    return ok(request, services, report)


@get(
    "/",
    guards=[requires("ingest.write")],
    summary="The caller's tenant's sources (names)",
    **contract(),
)
async def get_sources(request: AnyRequest, services: ServicesDep, caller: CallerDep) -> Response[SourcesOut]:
    listed = await services.blocking(lambda: list_sources(services.sources, caller.tenant_id))
    return ok(request, services, {"sources": [{"name": s["name"]} for s in listed]})


router = Router(path="/v1/sources", route_handlers=[post_sync, get_sources], tags=["sources"])
