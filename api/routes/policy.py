"""Policy bundles: publish a YAML bundle as the tenant's live policy (`ledger.usecases.policy`)."""

from __future__ import annotations

from litestar import Response, Router, post
from litestar.params import JSONBody

from api.auth import requires
from api.openapi import contract
from api.routes.common import AnyRequest, CallerDep, IdempotencyKeyHeader, ServicesDep, write
from ledger.schemas.answers import PolicyOut
from ledger.schemas.requests import PolicyBundleIn
from ledger.usecases.policy import publish_policy


@post(
    "/",
    guards=[requires("admin")],
    status_code=201,
    summary="Publish a policy bundle (YAML)",
    **contract(409, 413, 422, dedup=PolicyOut),
)
async def post_policy_bundle(
    request: AnyRequest,
    services: ServicesDep,
    caller: CallerDep,
    data: JSONBody[PolicyBundleIn],
    idempotency_key: IdempotencyKeyHeader = None,
) -> Response[PolicyOut]:
    return await write(
        request,
        services,
        caller,
        idempotency_key,
        "POST /v1/policy-bundles",
        data.model_dump(mode="json"),
        lambda idem: publish_policy(services.context, caller, data, idem),
    )


router = Router(path="/v1/policy-bundles", route_handlers=[post_policy_bundle], tags=["policy"])
