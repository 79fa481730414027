"""Policy bundles: publish a YAML bundle as the tenant's live policy."""

from __future__ import annotations

import hashlib
import re
from typing import Annotated, Any

import yaml
from litestar import Response, Router, post
from litestar.params import HeaderParameter

from api.auth import Principal, requires
from api.contract import ApiError, Correlation
from api.routes.common import AnyRequest, caller, fingerprint, ok
from api.schemas import LIMITS, PolicyBundleIn
from api.services import Services
from ledger.entries import EventDraft
from ledger.events import PolicyBundlePublished

_IDENTIFIER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")


def parse_bundle(text: str) -> dict[str, Any]:
    if len(text) > LIMITS.max_bundle_yaml_chars:
        raise ApiError(
            413, "bundle_too_large", f"bundle_yaml exceeds the {LIMITS.max_bundle_yaml_chars} character limit"
        )
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ApiError(422, "invalid_policy_bundle", f"bundle_yaml does not parse as YAML{where}") from None
    if not isinstance(document, dict):
        raise ApiError(422, "invalid_policy_bundle", "bundle_yaml must be a YAML mapping")
    return document


def publish(
    services: Services, principal: Principal, ids: Correlation, body: PolicyBundleIn
) -> tuple[int, dict[str, Any]]:
    tenant = principal.tenant
    document = parse_bundle(body.bundle_yaml)
    sha = hashlib.sha256(body.bundle_yaml.encode("utf-8")).hexdigest()
    declared = document.get("version") or document.get("policy_version")
    version = body.policy_version or (
        str(declared) if declared is not None and _IDENTIFIER.match(str(declared)) else None
    )
    version = version or f"sha256-{sha[:16]}"
    services.catalog.catch_up(services.ledger)
    current = services.catalog.policy(tenant)
    if current is not None and current.bundle_sha256 == sha and current.policy_version == version:
        return 200, {
            "policy_version": version,
            "bundle_sha256": sha,
            "position": current.position,
            "dedup": True,
        }
    draft = EventDraft(
        type="PolicyBundlePublished",
        tenant_id=tenant,
        actor=principal.actor,
        payload=PolicyBundlePublished(
            policy_version=version, bundle_sha256=sha, bundle_yaml=body.bundle_yaml
        ),
        run_id=ids.run_id,
        trace_id=ids.trace_id,
    )
    event = services.append([draft], tenant)[0]
    services.forget_policy(tenant)
    return 201, {
        "policy_version": version,
        "bundle_sha256": sha,
        "position": event.position,
        "event_id": event.event_id,
        "kid": event.kid,
        "signature": event.signature,
        "dedup": False,
    }


@post("/", guards=[requires("admin")], status_code=201, summary="Publish a policy bundle (YAML)")
async def post_policy_bundle(
    request: AnyRequest,
    data: PolicyBundleIn,
    idempotency_key: Annotated[
        str | None, HeaderParameter(name="Idempotency-Key", required=False, max_length=255)
    ] = None,
) -> Response[Any]:
    services, principal, ids = caller(request)
    fp = fingerprint("POST /v1/policy-bundles", data.model_dump(mode="json"))
    status, body = await services.blocking(
        services.idempotency.run,
        principal.tenant,
        idempotency_key,
        fp,
        lambda: publish(services, principal, ids, data),
    )
    return ok(request, body, status)


router = Router(path="/v1/policy-bundles", route_handlers=[post_policy_bundle], tags=["policy"])
