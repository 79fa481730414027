"""Operations: health, version, Prometheus metrics. No token needed."""

from __future__ import annotations

import time
from typing import Any

from litestar import Response, Router, get

from api.api_error import RETRY_AFTER_S
from api.contract import correlation, error_body
from api.openapi import contract
from api.routes.common import AnyRequest, ServicesDep, ok
from api.services import Services
from ledger.schemas.reads import HealthOut, VersionOut
from ledger.writing.integrity import report


def _health(services: Services) -> dict[str, Any]:
    """Read-only: the log's head and the projections' tracking (never writes)."""
    store_ok, projections_ok, lag = True, False, None
    findings = services.ledger.findings
    try:
        projections_ok, lag = services.projection_health()
        findings = services.ledger.held_findings()  # as stored: any worker's finding, a CLI repair
        services.metrics.projection_lag.set(lag or 0)
    except Exception as exc:  # noqa: BLE001 - health reports, never raises
        store_ok = False
        services.last_error = f"store unreachable: {type(exc).__name__}"
    return {
        "store_ok": store_ok,
        "projections_ok": projections_ok and store_ok,
        "lag": lag,
        "uptime_s": round(time.monotonic() - services.started, 3),
        "last_error": services.last_error,
        # Reads and verification go on while the ledger holds writes: reported, not a 503.
        "integrity": {
            **report(findings),
            "witness_alarms": list(cosigner.alarms) if (cosigner := services.ledger.cosigner) else [],
        },
    }


@get("/healthz", summary="Liveness and readiness", **contract(public=True))
async def healthz(request: AnyRequest, services: ServicesDep) -> Response[HealthOut]:
    health = await services.blocking(_health, services)
    if not health["store_ok"]:
        body = {
            **error_body(
                "store_unavailable", "the event store is not answering", True, correlation(request.scope)
            ),
            **health,
        }
        return Response(
            content=body,  # type: ignore[arg-type]
            status_code=503,
            media_type="application/json",
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )
    return ok(request, services, health)


@get("/version", summary="Server and policy versions", **contract(public=True))
async def version(request: AnyRequest, services: ServicesDep) -> Response[VersionOut]:
    return ok(request, services, {"api": "v1", "origin": services.ledger.origin})


@get(
    "/metrics",
    summary="Prometheus metrics",
    media_type="text/plain; version=0.0.4",
    **contract(public=True),
)
async def metrics(request: AnyRequest, services: ServicesDep) -> Response[bytes]:
    # Litestar appends `; charset=utf-8` to a text/* type: naming it here would send it twice.
    return Response(content=services.metrics.render(), media_type="text/plain; version=0.0.4")


router = Router(path="/v1", route_handlers=[healthz, version, metrics], tags=["ops"])
