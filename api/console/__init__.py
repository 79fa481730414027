"""The compliance console at `/console`: server-rendered pages (Jinja templates, one
stylesheet and one small script served by the server itself) over the same use cases
as `/v1`. `console_router()` is mounted by `api.app`; `template_config()` and
`ConsoleSessions` are wired there too."""

from __future__ import annotations

from pathlib import Path

from litestar import Router
from litestar.di import Provide
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.static_files import create_static_files_router
from litestar.template.config import TemplateConfig
from litestar.types import ControllerRouterHandler

from api.console.actions import ACTIONS
from api.console.documents import DOCUMENT_PAGES
from api.console.pages import READ_PAGES
from api.console.receipt_list import RECEIPT_PAGES
from api.console.reports import REPORT_PAGES
from api.console.session import ConsoleSessions
from api.console.web import console_user, error_page, with_asset_headers, with_security_headers

HERE = Path(__file__).parent
__all__ = ["ConsoleSessions", "console_router", "template_config"]


def template_config() -> TemplateConfig[JinjaTemplateEngine]:
    return TemplateConfig(directory=HERE / "templates", engine=JinjaTemplateEngine)


def console_router() -> list[ControllerRouterHandler]:
    pages = Router(
        path="/console",
        route_handlers=[*READ_PAGES, *RECEIPT_PAGES, *DOCUMENT_PAGES, *ACTIONS, *REPORT_PAGES],
        dependencies={"user": Provide(console_user)},
        exception_handlers={Exception: error_page},
        after_request=with_security_headers,
        include_in_schema=False,
    )
    assets = create_static_files_router(
        path="/console/static",
        directories=[HERE / "static"],
        after_request=with_asset_headers,
        include_in_schema=False,
        name="console:static",
    )
    return [pages, assets]
