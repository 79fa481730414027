"""Policy bundles: publish a YAML bundle as the tenant's live policy (`ledger.usecases.policy`)."""

from __future__ import annotations

from litestar import Response, Router, post
from litestar.params import JSONBody

from api.routes.common import CallDep, IdempotencyKeyHeader, operation
from ledger.schemas.answers import PolicyOut
from ledger.schemas.requests import PolicyBundleIn
from ledger.usecases.policy import publish_policy


@post(
    "/",
    status_code=201,
    **operation("admin", "Publish a policy bundle (YAML)", 409, 413, 422, dedup=PolicyOut),
)
async def post_policy_bundle(
    call: CallDep, data: JSONBody[PolicyBundleIn], idempotency_key: IdempotencyKeyHeader = None
) -> Response[PolicyOut]:
    return await call.write_command("POST /v1/policy-bundles", publish_policy, data, idempotency_key)


router = Router(path="/v1/policy-bundles", route_handlers=[post_policy_bundle], tags=["policy"])
