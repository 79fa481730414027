"""Sources: sync an allowlisted markdown folder of the caller's tenant (`ledger.usecases.sources`).

Adding and removing sources is the operator's job on the machine (`citeledger sources add`):
no request can point the server at a folder.
"""

from __future__ import annotations

from typing import Annotated

from litestar import Response, Router, get, post
from litestar.params import Body, Parameter

from api.routes.common import CallDep, operation
from ledger.schemas.answers import SourcesOut, SourceSyncOut
from ledger.schemas.requests import SourceSyncIn
from ledger.usecases.sources import list_sources, sync_source

# Any other shape of name is just a name that is not there (404), never a 400 that tells more.
SourceName = Annotated[str, Parameter(max_length=256)]
DEADLINE_SHARE = 0.8  # of the request deadline: stop in time to answer with what was done


SYNC_SUMMARY = "Sync a source: record new, changed and removed markdown files"


@post("/{name:str}/sync", status_code=200, **operation("ingest.write", SYNC_SUMMARY, 404, 409, 422))
async def post_sync(
    call: CallDep, name: SourceName, data: Annotated[SourceSyncIn | None, Body()] = None
) -> Response[SourceSyncOut]:
    services, config, caller = call.services, call.services.config, call.caller
    under = data.under if data is not None else None
    budget_s = config.request_deadline_s * DEADLINE_SHARE
    report = await services.blocking(
        lambda: sync_source(
            services.context,
            services.claims,
            services.sources,
            config.source_limits,
            caller,
            name,
            under=under,
            time_budget_s=budget_s,
        )
    )
    return call.ok(report)


@get("/", **operation("ingest.write", "The caller's tenant's sources (names)"))
async def get_sources(call: CallDep) -> Response[SourcesOut]:
    sources, tenant_id = call.services.sources, call.caller.tenant_id
    listed = await call.services.blocking(lambda: list_sources(sources, tenant_id))
    return call.ok({"sources": [{"name": s["name"]} for s in listed]})


router = Router(path="/v1/sources", route_handlers=[post_sync, get_sources], tags=["sources"])
