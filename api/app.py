"""Builds the Litestar application: `create_app(config)`; `app_from_env()` is
the uvicorn factory used by `citeledger serve` in every worker."""

from __future__ import annotations

import logging
from typing import Any

from litestar import Litestar
from litestar.exceptions import HTTPException
from litestar.plugins.pydantic import PydanticPlugin
from litestar.types import ControllerRouterHandler, Scope

from api.config import ApiConfig, server_version
from api.console import ConsoleSessions, console_router, template_config
from api.console.errors import console_aware, error_html
from api.contract import ContractApp, ErrorPage, exception_handler
from api.mcp.mount import mcp_mount
from api.metrics import Metrics
from api.openapi import assets_router, openapi_config
from api.otlp.route import export_traces, otlp_error_page
from api.receipt_shortcut import receipt_shortcut
from api.routes import (
    checkpoints,
    citations,
    documents,
    events,
    ops,
    policy,
    receipt_export,
    receipts,
    reports,
    retention,
    retrievals,
    search,
    sources,
    tiles,
    tokens,
)
from api.routes.common import DEPENDENCIES, check_request
from api.services import Services
from ledger.storage import log_repeats

log = logging.getLogger("citeledger.api")

ROUTES: list[ControllerRouterHandler] = [
    documents.router,
    retrievals.router,
    search.router,
    policy.router,
    receipts.router,
    receipt_export.router,
    events.router,
    checkpoints.checkpoints_router,
    checkpoints.public_keys,
    checkpoints.export,
    checkpoints.whole_log_export_route,
    ops.router,
    citations.router,
    retention.router,
    reports.router,
    sources.router,
    tiles.router,
    tokens.router,
    export_traces,
    assets_router(),
]


def create_app(config: ApiConfig) -> ContractApp:
    metrics = Metrics()

    def startup(app: Any) -> None:
        app.state.services = Services(config, metrics)
        app.state.console_sessions = ConsoleSessions(config.ledger.data_dir / "console-sessions")

    def shutdown(app: Any) -> None:
        services = getattr(app.state, "services", None)
        if services is not None:
            services.close()

    mcp_endpoint, mcp_lifespan = mcp_mount(config)
    app = ContractApp(
        route_handlers=[*ROUTES, mcp_endpoint, *console_router()],
        template_config=template_config(),
        lifespan=[mcp_lifespan],
        dependencies=DEPENDENCIES,
        before_request=check_request,
        # Strict request bodies: "5" is no integer, true is no number of days.
        plugins=[PydanticPlugin(validate_strict=True)],
        on_startup=[startup],
        on_shutdown=[shutdown],
        exception_handlers={
            Exception: console_aware(exception_handler),
            HTTPException: console_aware(exception_handler),
        },
        request_max_body_size=config.limits.max_body_bytes,
        multipart_form_part_limit=20,
        debug=False,
        logging_config=None,
        openapi_config=openapi_config(server_version()),
    )
    app.deadline_s = config.request_deadline_s
    app.max_query_string_bytes = config.limits.max_query_string_bytes
    app.observers = [metrics.observe]
    app.error_page = _error_page
    app.shortcuts = [receipt_shortcut(app)]
    return app


def _error_page(app: Litestar, scope: Scope, status: int, message: str) -> ErrorPage | None:
    """Errors the ASGI wrapper answers itself: OTLP's form on /v1/traces, console pages in the console."""
    return otlp_error_page(scope, status, message) or error_html(app, scope, status, message)


def app_from_env() -> ContractApp:
    """uvicorn --factory entry point: configuration comes from CITELEDGER_* variables.
    Runs after uvicorn configured logging: a repeated failure is logged once, then counted."""
    config = ApiConfig.from_env()
    log_repeats.install(config.log_repeat_interval_s)
    return create_app(config)
