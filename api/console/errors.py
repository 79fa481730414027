"""Every answer under `/console` is a console page, errors included: an unknown path, a wrong
method, a bad query value, a refusal, a body too large, a bug, a request past its deadline.
Each is the HTML error page with the console's navigation and its security headers (CSP,
`X-Frame-Options`, `nosniff`), never the API's JSON envelope.

Two places produce errors outside the console's own router: the application's exception
handler (routing failures: 404, 405) and the contract's ASGI wrapper (400 for correlation
headers or a long query string, 408). `console_aware` wraps the first; `error_html` is the
second's page."""

from __future__ import annotations

from typing import Any

from litestar import Litestar, Response
from litestar.types import Scope

from api.console.web import SECURITY_HEADERS, AnyRequest, error_page
from api.contract import ErrorPage

PREFIX = "/console"
TITLES = {400: "Bad request", 404: "Not found", 405: "Not allowed here", 408: "Too slow", 413: "Too large"}


def is_console(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


def console_aware(api_handler: Any) -> Any:
    """The application's exception handler: console paths get the console's page."""

    def handler(request: AnyRequest, exc: Exception) -> Response[Any]:
        if is_console(request.url.path):
            return error_page(request, exc)
        response: Response[Any] = api_handler(request, exc)
        return response

    return handler


def error_html(app: Litestar, scope: Scope, status: int, message: str) -> ErrorPage | None:
    """The page for an error the ASGI wrapper answers itself; None outside the console."""
    if not is_console(str(scope.get("path", ""))) or app.template_engine is None:
        return None
    template = app.template_engine.get_template("error.html")
    title = TITLES.get(status, "Error")
    html = template.render(user=None, nav=True, title=title, message=message, csrf_field="", csrf_token="")
    return ErrorPage(html.encode("utf-8"), {"Content-Type": "text/html; charset=utf-8", **SECURITY_HEADERS})
