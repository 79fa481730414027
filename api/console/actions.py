"""The console's forms: sign in and out, run a replay, erase, place and release holds.
Every state-changing form is same-origin and carries the session's CSRF token; erasures
and holds take a confirmation step. Each calls the same use case as its `/v1` route."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import get, post
from litestar.di import NamedDependency
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromPath, QueryParameter
from litestar.response import Redirect, Template

from api.console.documents import resolve
from api.console.session import COOKIE, SESSION_SECONDS
from api.console.web import (
    SECURITY_HEADERS,
    AnyRequest,
    ConsoleRefusal,
    ConsoleUser,
    check_form,
    field,
    form_command,
    page,
    safe_next,
    services_of,
    sessions_of,
)
from ledger.schemas.requests import ErasureIn, LegalHoldIn
from ledger.usecases.held_checkpoint import check_held_checkpoint
from ledger.usecases.replay import replay
from ledger.usecases.retention import erase, place_hold, release_hold

Form = Annotated[dict[str, Any], Body(media_type=RequestEncodingType.URL_ENCODED)]
User = NamedDependency[ConsoleUser]
MAX_TOKEN_CHARS = 512


@get("/sign-in", name="console:sign-in")
async def sign_in_form(
    next_page: Annotated[str | None, QueryParameter(name="next", required=False, max_length=2048)] = None,
) -> Template:
    return page("sign_in.html", None, next_page=safe_next(next_page), problem=None)


@post("/sign-in", name="console:sign-in-post", status_code=303)
async def sign_in(request: AnyRequest, data: Form) -> Any:
    """Exchange a bearer token for a session; the token itself is never stored or shown."""
    check_form(request, None, data)
    services = services_of(request)
    bearer, next_page = field(data, "token"), safe_next(field(data, "next") or None)
    principal = services.tokens.authenticate(bearer) if 0 < len(bearer) <= MAX_TOKEN_CHARS else None
    if principal is None or principal.operator:
        problem = (
            "An operator token has no console: it only exports the whole log."
            if principal is not None
            else "That token is not valid."
        )
        return page("sign_in.html", None, status_code=401, next_page=next_page, problem=problem)
    await services.rate_limiter.check(principal.token_id)
    session = await sessions_of(request).open(bearer)
    response = Redirect(next_page, status_code=303, headers=SECURITY_HEADERS)
    response.set_cookie(
        COOKIE,
        session.session_id,
        max_age=SESSION_SECONDS,
        path="/console",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@post("/sign-out", name="console:sign-out", status_code=303)
async def sign_out(request: AnyRequest, user: User, data: Form) -> Redirect:
    check_form(request, user, data)
    await sessions_of(request).close(user.session.session_id)
    response = Redirect("/console/sign-in", status_code=303, headers=SECURITY_HEADERS)
    response.delete_cookie(COOKIE, path="/console")
    return response


@post("/receipts/{receipt_id:str}/replay", name="console:replay", status_code=200)
async def run_replay(request: AnyRequest, user: User, receipt_id: FromPath[str], data: Form) -> Template:
    """Replay as `POST /v1/receipts/{id}/replay`; `at_position` replays as of that position."""
    check_form(request, user, data, "replay.run")
    at = field(data, "at_position")
    if at and (not at.isdigit() or not 1 <= int(at) <= 2**53 - 1):
        raise ConsoleRefusal(422, "Not accepted", "at_position: a whole number from 1")
    at_position = int(at) if at else None
    services = services_of(request)
    result = await services.blocking(replay, services.context, user.caller, receipt_id[:128], at_position)
    return page("replay.html", user, receipt_id=receipt_id, replay=result.body)


@post("/proofs", name="console:proofs-check", status_code=200)
async def check_held(request: AnyRequest, user: User, data: Form) -> Template:
    """Paste the checkpoint kept from the last audit: checked from its size on (signatures,
    the consistency proof to the newest signed checkpoint, the entries since), within the
    request's deadline (`ledger.usecases.held_checkpoint`)."""
    check_form(request, user, data, "audit.read")
    held = field(data, "checkpoint")
    if not held or len(held) > 16_384:
        raise ConsoleRefusal(
            422, "Not accepted", "checkpoint: paste a signed checkpoint note (at most 16 KiB)"
        )
    services = services_of(request)
    verdict = await services.blocking(
        check_held_checkpoint, services.context, held.replace("\r\n", "\n"), user.caller.deadline
    )
    latest = await services.blocking(services.ledger.latest_checkpoint)
    note = services.ledger.cosigned(latest).note if latest is not None else None
    return page("proofs.html", user, note=note, verdict=verdict, held=held)


def _ids(text: str) -> list[str]:
    return [part for part in text.replace(",", " ").split() if part]


async def _confirmed(
    request: AnyRequest,
    user: User,
    data: Form,
    step: tuple[str, str, str],
    use_case: Any,
    document: dict[str, Any] | None = None,
    **target: Any,
) -> Template:
    """An admin action in two posts to `action`: the first shows what it will do, the second
    (confirm=yes) runs `use_case(context, caller, value)` and shows the outcome. `step` is
    (action, what, title); `target` the one value acted on, named as confirm.html shows it;
    `document` the document it names, as both pages show it (path, versions, citing receipts)."""
    action, what, title = step
    if field(data, "confirm") != "yes":
        return page("confirm.html", user, action=action, what=what, document=document, **target)
    services = services_of(request)
    (value,) = target.values()
    outcome = await services.blocking(use_case, services.context, user.caller, value)
    return page(
        "done.html",
        user,
        title=title,
        what=what,
        outcome=outcome,
        document=document,
        back="/console/erasures",
    )


@post("/erasures", name="console:erase", status_code=200)
async def erase_target(request: AnyRequest, user: User, data: Form) -> Template:
    """First post: the confirmation page; the second (confirm=yes) erases."""
    check_form(request, user, data, "admin")
    document = await resolve(request, user, data)  # by path (and source) or by id
    document_id = document["document_id"] if document else field(data, "document_id") or None
    command = form_command(
        ErasureIn, {"document_id": document_id, "subject_id": field(data, "subject_id") or None}
    )
    return await _confirmed(
        request, user, data, ("/console/erasures", "erase", "Erased"), erase, document, command=command
    )


@post("/holds", name="console:hold", status_code=200)
async def hold(request: AnyRequest, user: User, data: Form) -> Template:
    check_form(request, user, data, "admin")
    named = await resolve(request, user, {"path": field(data, "path"), "source": field(data, "source")})
    command = form_command(
        LegalHoldIn,
        {
            "document_ids": _ids(field(data, "document_ids")) + ([named["document_id"]] if named else []),
            "subject_ids": _ids(field(data, "subject_ids")),
            "legal_basis": field(data, "legal_basis"),
        },
    )
    return await _confirmed(
        request, user, data, ("/console/holds", "hold", "Hold placed"), place_hold, named, command=command
    )


@post("/holds/release", name="console:release", status_code=200)
async def release(request: AnyRequest, user: User, data: Form) -> Template:
    check_form(request, user, data, "admin")
    hold_id = field(data, "hold_id")
    if not hold_id or len(hold_id) > 128:
        raise ConsoleRefusal(422, "Not accepted", "hold_id: the id of a hold")
    return await _confirmed(
        request,
        user,
        data,
        ("/console/holds/release", "release", "Hold released"),
        release_hold,
        hold_id=hold_id,
    )


ACTIONS = [sign_in_form, sign_in, sign_out, run_replay, check_held, erase_target, hold, release]
