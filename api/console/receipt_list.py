"""The console's receipts list and its export: the filters of `GET /v1/receipts` in the URL
(a filtered view is a link to share), newest first unless `order=asc`, how many match, and
the same filter as CSV or JSONL (`GET /v1/receipts/export.csv`'s twin)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

from litestar import Response, get
from litestar.di import NamedDependency
from litestar.response import Template

from api.api_error import ApiError
from api.console.pages import HISTORY_PAGE, blank, console_order, form_moment, id_filters, listing_page
from api.console.web import AnyRequest, ConsoleRefusal, ConsoleUser, services_of
from api.routes.listing import RECEIPT_KINDS, RECEIPT_STATUSES
from api.routes.receipt_export import export_response
from api.routes.receipts import ReceiptFilters, receipt_page
from ledger.retrieval.question_words import MAX_SEARCH_CHARS
from ledger.usecases.ports import ReceiptFilter

User = NamedDependency[ConsoleUser]
ID_FILTERS = ("engine", "task_id", "trace_id", "run_id", "document_id", "actor")
CHOICES = {"status": RECEIPT_STATUSES, "kind": RECEIPT_KINDS}


def _filters(request: AnyRequest) -> tuple[ReceiptFilters, ReceiptFilter, dict[str, Any]]:
    """The form's filters (blanks dropped), checked as `/v1` checks them: the API's filters,
    the read model's filter and what the form shows back."""
    query = request.query_params
    raw = {
        name: blank(str(query.get(name) or "")[:200]) for name in (*ID_FILTERS, *CHOICES, "since", "until")
    }
    given: dict[str, Any] = id_filters({name: raw[name] for name in ID_FILTERS})
    for name in (*CHOICES, "since", "until"):
        given[name] = raw[name]
    given["order"] = console_order(query.get("order"))
    filters = ReceiptFilters(
        **{**given, "since": _form(given["since"]), "until": _form(given["until"])},
    )
    try:
        flt = filters.filter()
    except ApiError as exc:
        raise ConsoleRefusal(400, "Bad filter", exc.message) from None
    return filters, flt, given


def _form(value: str | None) -> str | None:
    return None if value is None else form_moment(value)


def _shown_bound(bound: str | None) -> str:
    """A bound as `<input type=datetime-local step=1>` shows it (UTC, to the second)."""
    return "" if bound is None else bound[:19]


@get("/receipts", name="console:receipts")
async def receipts(request: AnyRequest, user: User) -> Template:
    """Receipts newest first, filtered as `GET /v1/receipts`; with `audit.content` each
    question in plain (one recorded read for the page), and the search of the questions'
    words (`q`, a recorded read too; not part of the export)."""
    user.require("audit.read")
    services = services_of(request)
    filters, flt, given = _filters(request)
    q = blank(str(request.query_params.get("q") or "")[:MAX_SEARCH_CHARS])
    if q is not None:
        user.require("audit.content")
        flt = replace(flt, q=q)
    content = "plain" if user.may("audit.content") else "sealed"
    cursor = blank(str(request.query_params.get("cursor") or "")[:64])
    order = console_order(filters.order)
    body = await services.blocking(
        receipt_page, services, user.caller, flt, cursor, HISTORY_PAGE, order, content
    )
    shown_filters = {k: v for k, v in given.items() if v is not None and not (k == "order" and v == "desc")}
    return listing_page(
        "receipts.html",
        user,
        body,
        "receipts",
        {**given, "q": q},
        plain=content == "plain",
        statuses=RECEIPT_STATUSES,
        kinds=RECEIPT_KINDS,
        since_shown=_shown_bound(flt.recorded_from),
        until_shown=_shown_bound(flt.recorded_to),
        export_query=urlencode(shown_filters),
    )


async def _export(request: AnyRequest, user: ConsoleUser, fmt: str) -> Response[bytes]:
    user.require("audit.read")
    services = services_of(request)
    filters, _, _ = _filters(request)
    # Too many rows is the API's 422 `export_too_large`, shown as the console's error page.
    return await services.blocking(export_response, services, user.caller, filters, fmt)


@get("/receipts.csv", name="console:receipts-csv")
async def receipts_csv(request: AnyRequest, user: User) -> Response[bytes]:
    return await _export(request, user, "csv")


@get("/receipts.jsonl", name="console:receipts-jsonl")
async def receipts_jsonl(request: AnyRequest, user: User) -> Response[bytes]:
    return await _export(request, user, "jsonl")


RECEIPT_PAGES = [receipts, receipts_csv, receipts_jsonl]
