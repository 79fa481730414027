"""What every console page shares: who is signed in (a `Caller`, like any surface's), the
CSRF and origin checks of state-changing forms, HTML pages and HTML errors, and the
security headers. The console adds no rule: scopes and 403/404 come from the use cases
and the same guards' rules as `/v1`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from litestar import Request, Response
from litestar.exceptions import HTTPException
from litestar.response import Redirect, Template
from pydantic import ValidationError

from api.auth import Principal
from api.console.session import COOKIE, CSRF_FIELD, ConsoleSession, ConsoleSessions, principal_of_session
from api.contract import describe
from api.routes.common import caller_of
from api.services import Services
from ledger.usecases.context import Caller

AnyRequest = Request[Any, Any, Any]
SECURITY_HEADERS = {
    # No inline script or style, nothing from another origin, no framing, no referrer leak.
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


async def with_security_headers(response: Response[Any]) -> Response[Any]:
    """After every console response, pages, redirects and errors alike."""
    response.headers.update(SECURITY_HEADERS)
    return response


async def with_asset_headers(response: Response[Any]) -> Response[Any]:
    """Static assets: the same protections, cacheable for an hour."""
    response.headers.update({**SECURITY_HEADERS, "Cache-Control": "public, max-age=3600"})
    return response


class ConsoleRefusal(HTTPException):
    """A console refusal shown as a page (status, short title, what to do)."""

    def __init__(self, status_code: int, title: str, message: str) -> None:
        super().__init__(detail=message, status_code=status_code)
        self.title = title
        self.message = message


_STATE_USER = "citeledger.console_user"


class SignInRequired(Exception):
    """No (valid) session: the page redirects to the sign-in form."""


@dataclass(frozen=True)
class ConsoleUser:
    principal: Principal
    session: ConsoleSession
    caller: Caller

    def may(self, scope: str) -> bool:
        return scope in self.principal.scopes

    def require(self, scope: str) -> None:
        if not self.may(scope):
            raise ConsoleRefusal(403, "Not allowed", f"Your token lacks the scope {scope}.")


def sessions_of(request: AnyRequest) -> ConsoleSessions:
    sessions: ConsoleSessions = request.app.state.console_sessions
    return sessions


def services_of(request: AnyRequest) -> Services:
    services: Services = request.app.state.services
    return services


async def console_user(request: AnyRequest) -> ConsoleUser:
    """The signed-in user of this request (dependency of every page but sign-in)."""
    services = services_of(request)
    session = await sessions_of(request).find(request.cookies.get(COOKIE))
    principal = principal_of_session(services.tokens, session) if session is not None else None
    if session is None or principal is None or principal.operator:
        raise SignInRequired()
    request.scope.setdefault("state", {})["citeledger.principal"] = principal
    await services.rate_limiter.check(principal.token_id)
    # The caller's deadline is the request's: a write past it commits nothing.
    user = ConsoleUser(principal, session, caller_of(request))
    request.scope["state"][_STATE_USER] = user  # for the error page's header, if one follows
    return user


def check_form(
    request: AnyRequest, user: ConsoleUser | None, form: dict[str, Any], scope: str | None = None
) -> None:
    """A state-changing form: same origin, (once signed in) the session's CSRF token, and the
    `scope` the action needs, if it names one.

    Where the form came from must be shown, not assumed: the `Origin` header (every browser
    sends it on a POST), else the `Referer`, must name exactly this scheme, host and port. An
    opaque `Origin: null` (sandboxed frames, data: URLs, some redirects), a malformed one, a
    foreign `Referer`, or neither header at all is refused, even with a valid CSRF token."""
    own = _origin_of(f"{request.url.scheme}://{request.headers.get('host', '')}")
    origin = request.headers.get("origin")
    if origin is not None:
        claimed = _origin_of(origin, bare=True)
    else:
        referer = request.headers.get("referer")
        claimed = _origin_of(referer) if referer else None
    if own is None or claimed is None or claimed != own:
        raise ConsoleRefusal(403, "Refused", "This form was not posted from this site's own pages.")
    if request.headers.get("sec-fetch-site") in ("cross-site", "same-site"):
        raise ConsoleRefusal(403, "Refused", "This form was posted from another site.")
    if user is not None and not user.session.csrf_ok(_one(form.get(CSRF_FIELD))):
        raise ConsoleRefusal(403, "Refused", "The form's CSRF token is missing or wrong; reload the page.")
    if user is not None and scope is not None:
        user.require(scope)


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin_of(url: str, *, bare: bool = False) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an http(s) URL, default ports made explicit; None when it is
    not one (`null`, another scheme, user info, a bad port). `bare`: an `Origin` value, which
    has no path, query or fragment."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host or "@" in parts.netloc:
        return None
    if bare and (parts.path or parts.query or parts.fragment):
        return None
    return scheme, host, port if port is not None else _DEFAULT_PORTS[scheme]


def _one(value: Any) -> str | None:
    if isinstance(value, list):
        return str(value[0]) if value else None
    return None if value is None else str(value)


def field(form: dict[str, Any], name: str) -> str:
    return (_one(form.get(name)) or "").strip()


def page(template: str, user: ConsoleUser | None, status_code: int = 200, **context: Any) -> Template:
    return Template(
        template_name=template,
        context={
            "user": user,
            "csrf_field": CSRF_FIELD,
            "csrf_token": user.session.csrf_token if user is not None else "",
            **context,
        },
        status_code=status_code,
        headers=SECURITY_HEADERS,
        media_type="text/html",
    )


def back_to_sign_in(request: AnyRequest) -> Redirect:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return Redirect(f"/console/sign-in?next={quote(target, safe='')}", headers=SECURITY_HEADERS)


def safe_next(value: str | None) -> str:
    """Only a console path: never an open redirect to another site."""
    if not value:
        return "/console/"
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or not parts.path.startswith("/console/") or "\\" in value:
        return "/console/"
    return value


def error_page(request: AnyRequest, exc: Exception) -> Response[Any]:
    """Every console error as a page: the same status and code the API would answer, a safe
    message (`describe`, as `/v1`), never a traceback or document text."""
    if isinstance(exc, SignInRequired):
        return back_to_sign_in(request)
    headers: dict[str, str] = {}
    if isinstance(exc, ConsoleRefusal):
        status, title, message = exc.status_code, exc.title, exc.message
    else:
        status, code, message, _, headers, _ = describe(exc)
        title = {
            400: "Bad request",
            401: "Sign in",
            403: "Not allowed",
            404: "Not found",
            405: "Not allowed here",
            413: "Too large",
            422: "Not accepted",
            429: "Slow down",
            500: "Something went wrong",
        }.get(status, code)
    user = request.scope.get("state", {}).get(_STATE_USER)
    response = page("error.html", user, status_code=status, title=title, message=message, nav=True)
    kept = ("x-replay-reason", "retry-after", "allow")
    response.headers.update({k: v for k, v in headers.items() if k.lower() in kept})
    return response


def form_command(model: type[Any], values: dict[str, Any]) -> Any:
    """A form's values as the use case's command, or a 422 page naming the first bad field."""
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "form"
        raise ConsoleRefusal(422, "Not accepted", f"{where}: {first.get('msg', 'invalid')}") from None
