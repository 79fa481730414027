"""The console's read pages: overview, history, one event, one receipt, a citation read
back, the erasures list and the export. Each handler gathers what a use case or a read
model answers and renders it; the rules (scopes, tenant isolation, 403/404) are the same
as `/v1`'s because the same functions decide them."""

from __future__ import annotations

import datetime as dt
import re
from functools import partial
from typing import Annotated, Any

import orjson
from litestar import Response, get
from litestar.di import NamedDependency
from litestar.params import FromPath, QueryParameter
from litestar.response import Stream, Template

from api.api_error import ApiError
from api.console import explain
from api.console.charts import events_chart
from api.console.web import AnyRequest, ConsoleRefusal, ConsoleUser, page, services_of
from api.routes.events import history_page
from api.routes.listing import ID_PATTERN, order_of, time_bound
from api.routes.receipts import receipt_answer
from ledger.domain.payloads import EventType
from ledger.domain.timestamps import format_timestamp
from ledger.usecases.citations import read_citation
from ledger.usecases.export import tenant_export
from ledger.usecases.ports import Order
from ledger.usecases.receipts import receipt_bundle, verify_receipt
from projections.views import HistoryFilter

User = NamedDependency[ConsoleUser]

OVERVIEW_DAYS = 14
HISTORY_PAGE = 50
EVENT_TYPES: tuple[str, ...] = EventType.__args__  # type: ignore[attr-defined]


def _field(name: str, max_length: int = 128) -> Any:
    """An optional text filter of a console form (checked by the handler, which answers a page)."""
    return QueryParameter(name=name, required=False, max_length=max_length)


def blank(value: str | None) -> str | None:
    value = (value or "").strip()
    return value or None


@get("/", name="console:overview")
async def overview(request: AnyRequest, user: User) -> Template:
    user.require("audit.read")
    services = services_of(request)
    since = (services.context.clock() - dt.timedelta(days=OVERVIEW_DAYS - 1)).date()
    counts = await services.blocking(
        services.read_models.event_counts, user.caller.tenant_id, since.isoformat()
    )
    checkpoint = await services.blocking(services.ledger.latest_checkpoint)
    healthy, lag = await services.blocking(services.projection_health)
    totals: dict[str, int] = {}
    for _, event_type, count in counts:
        totals[event_type] = totals.get(event_type, 0) + count
    days = [(since + dt.timedelta(days=i)).isoformat() for i in range(OVERVIEW_DAYS)]
    return page(
        "overview.html",
        user,
        chart=events_chart(days, counts),
        totals=sorted(totals.items()),
        denials=totals.get("AccessDenied", 0),
        erasures=totals.get("RetentionScrubbed", 0),
        replays=totals.get("ReplayRecorded", 0),
        checkpoint=checkpoint.to_json() if checkpoint is not None else None,
        lag=lag,
        healthy=healthy,
        days=OVERVIEW_DAYS,
    )


@get("/history", name="console:history")
async def history(
    request: AnyRequest,
    user: User,
    event_type: Annotated[str | None, _field("type", 40)] = None,
    actor: Annotated[str | None, _field("actor")] = None,
    trace_id: Annotated[str | None, _field("trace_id")] = None,
    run_id: Annotated[str | None, _field("run_id")] = None,
    receipt_id: Annotated[str | None, _field("receipt_id")] = None,
    since: Annotated[str | None, _field("since", 40)] = None,
    until: Annotated[str | None, _field("until", 40)] = None,
    from_position: Annotated[str | None, _field("from_position", 20)] = None,
    to_position: Annotated[str | None, _field("to_position", 20)] = None,
    order: Annotated[str | None, _field("order", 10)] = None,
    cursor: Annotated[str | None, _field("cursor", 64)] = None,
) -> Template:
    """Filters live in the query string, so a filtered view is a URL to share. Newest first
    unless `order=asc`."""
    user.require("audit.read")
    services = services_of(request)
    chosen = blank(event_type)
    if chosen is not None and chosen not in EVENT_TYPES:
        raise ConsoleRefusal(400, "Bad filter", f"type: one of {', '.join(EVENT_TYPES)}")
    ids = id_filters({"actor": actor, "trace_id": trace_id, "run_id": run_id, "receipt_id": receipt_id})
    filters = {
        "type": chosen,
        **ids,
        "since": blank(since),
        "until": blank(until),
        "from_position": blank(from_position),
        "to_position": blank(to_position),
        "order": console_order(order),
    }
    flt = HistoryFilter(
        types=[chosen] if chosen else None,
        **ids,
        from_position=_position(filters["from_position"], "from_position"),
        to_position=_position(filters["to_position"], "to_position"),
        recorded_from=_moment(filters["since"], "since"),
        recorded_to=_moment(filters["until"], "until", end=True),
    )
    page_of = partial(history_page, cursor=blank(cursor), limit=HISTORY_PAGE, order=filters["order"])
    body = await services.blocking(page_of, services, user.caller, flt)
    shown_bounds = {
        "since_shown": (flt.recorded_from or "")[:19],
        "until_shown": (flt.recorded_to or "")[:19],
    }
    denied = [e for e in body["events"] if e.get("type") == "AccessDenied"]
    said = await services.blocking(_denials, services, user, denied) if denied else []
    denials = {e["position"]: text for e, text in zip(denied, said, strict=True)}
    return listing_page(
        "history.html",
        user,
        body,
        "events",
        filters,
        event_types=EVENT_TYPES,
        denials=denials,
        **shown_bounds,
    )


def listing_page(
    template: str, user: ConsoleUser, body: dict[str, Any], rows: str, filters: dict[str, Any], **extra: Any
) -> Template:
    """A filtered list page: its rows, the next page's cursor, the filters (the given ones shown)."""
    shown = {k: v for k, v in filters.items() if v is not None and not (k == "order" and v == "desc")}
    return page(
        template,
        user,
        **{rows: body[rows]},
        next_cursor=body["next_cursor"],
        total=body["total"],
        total_exact=body["total_exact"],
        filters=filters,
        shown=shown,
        **extra,
    )


def id_filters(values: dict[str, str | None]) -> dict[str, Any]:
    """The form's id filters, blanks dropped, each checked as `/v1` checks it (text or None:
    `Any` so they spread into a filter dataclass by name)."""
    given = {name: blank(value) for name, value in values.items()}
    for name, value in given.items():
        if value is not None and re.fullmatch(ID_PATTERN, value) is None:
            raise ConsoleRefusal(400, "Bad filter", f"{name}: letters, digits and ._:@- only")
    return given


def _position(value: str | None, name: str) -> int | None:
    if value is None:
        return None
    if not value.isdigit() or not 1 <= int(value) <= 2**53 - 1:
        raise ConsoleRefusal(400, "Bad filter", f"{name}: a whole number from 1")
    return int(value)


def form_moment(value: str) -> str:
    """A time as the form's `<input type=datetime-local step=1>` sends it (no zone: UTC; the
    seconds may be left out) in RFC 3339; a day or an RFC 3339 time as given."""
    if len(value) == 16:
        return value + ":00Z"
    return value + "Z" if len(value) == 19 else value


def _moment(value: str | None, name: str, *, end: bool = False) -> str | None:
    """A `since`/`until` bound (a day: the whole UTC day), or the refusal page naming it."""
    try:
        return time_bound(None if value is None else form_moment(value), name, end=end)
    except ApiError as exc:
        raise ConsoleRefusal(400, "Bad filter", exc.message) from None


def console_order(value: str | None) -> Order:
    try:
        return order_of(blank(value))
    except ApiError as exc:
        raise ConsoleRefusal(400, "Bad filter", exc.message) from None


@get("/events/{position:int}", name="console:event")
async def event(request: AnyRequest, user: User, position: FromPath[int]) -> Template:
    user.require("audit.read")
    services = services_of(request)
    found = await services.blocking(services.ledger.get, position)
    if found is None or found.tenant_id != user.caller.tenant_id:
        raise ConsoleRefusal(404, "Not found", "event not found")
    envelope = found.envelope
    payload = envelope.get("payload", {})
    denied = None
    if envelope.get("type") == "AccessDenied":
        denied = (await services.blocking(_denials, services, user, [envelope]))[0]
    return page(
        "event.html",
        user,
        position=position,
        envelope=envelope,
        fields=explain.fields(payload),
        denied=denied,
        pretty=orjson.dumps(envelope, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode(),
        receipt_id=payload.get("receipt_id"),
    )


def _denials(services: Any, user: ConsoleUser, envelopes: list[dict[str, Any]]) -> list[str]:
    """What each `AccessDenied` denied, its path looked up when it names a citation."""
    said = []
    for envelope in envelopes:
        payload, path, sensitivity = envelope.get("payload", {}), None, None
        if payload.get("resource_type") == "citation":
            cited = services.read_models.citation(user.caller.tenant_id, str(payload.get("resource_id")))
            if cited is not None:
                path, sensitivity = cited.path, cited.sensitivity
        said.append(explain.denial(payload, path, sensitivity, user.caller.scopes))
    return said


@get("/receipts/{receipt_id:str}", name="console:receipt")
async def receipt(request: AnyRequest, user: User, receipt_id: FromPath[str]) -> Template:
    """The receipt as `GET /v1/receipts/{id}` reads it; with `audit.content` the question and
    the snippets in plain (a recorded read, as the API's `content=plain`)."""
    user.require("audit.read")
    services = services_of(request)
    ctx = services.context
    tenant = user.caller.tenant_id
    receipt_id = receipt_id[:128]
    plain = user.may("audit.content")
    body = await receipt_answer(services, user.caller, receipt_id, content=plain)
    integrity = await services.blocking(verify_receipt, ctx, tenant, receipt_id)
    payload = body["event"]["payload"]
    # A receipt written as several entries reads as one: the head's lists, then each part's.
    parts = [payload, *(c["payload"] for c in body.get("continued_events", []))]
    selected = [e for part in parts for e in part.get("selected_entries", [])]
    filters = [f for part in parts for f in part.get("filters_applied", [])]
    content = body.get("content") or {}
    by_citation = {c["citation_id"]: c for c in content.get("citations", [])}
    redacted_by = explain.redactions(filters)
    entries = [
        {
            **cited,
            "entry": entry,
            "content": by_citation.get(cited["citation_id"]),
            "score_rank": rank,
            "redacted_by": redacted_by.get(str(entry["chunk_id"])),
        }
        for cited, entry, rank in zip(body["citations"], selected, explain.score_ranks(selected), strict=True)
    ]
    return page(
        "receipt.html",
        user,
        receipt=body,
        payload=payload,
        question=content.get("query") if plain else None,
        entries=entries,
        filters_applied=filters,
        nothing_cited=None if entries else explain.empty_receipt(payload, filters),
        snapshot=payload.get("policy_snapshot") or {},
        integrity=integrity,
        chain=body["replay_chain"],
        may_replay=user.may("replay.run"),
        may_read_content=plain,
    )


@get("/citations/{citation_id:str}", name="console:citation")
async def citation(request: AnyRequest, user: User, citation_id: FromPath[str]) -> Template:
    """The API's read-back: 200 with the text, 403 (recorded) for a restricted chunk without
    the scope, one 404 whatever the reason."""
    services = services_of(request)
    cited = await services.blocking(
        read_citation, services.context, services.read_models, user.caller, citation_id
    )
    text = cited["chunk_text"]
    span = cited.get("cited_span")
    before, quoted, after = text, "", ""
    if span:
        before, quoted, after = text[: span["start"]], text[span["start"] : span["end"]], text[span["end"] :]
    return page("citation.html", user, cited=cited, before=before, quoted=quoted, after=after)


@get("/erasures", name="console:erasures")
async def erasures(request: AnyRequest, user: User) -> Template:
    user.require("audit.read")
    services = services_of(request)
    flt = HistoryFilter(types=["RetentionScrubbed", "LegalHoldPlaced", "LegalHoldReleased"])
    body = await services.blocking(partial(history_page, limit=200), services, user.caller, flt)
    return page("erasures.html", user, events=body["events"], may_admin=user.may("admin"))


@get("/export", name="console:export")
async def export(request: AnyRequest, user: User) -> Template:
    user.require("audit.read")
    return page("export.html", user)


@get("/export.jsonl", name="console:export-file")
async def export_file(request: AnyRequest, user: User) -> Stream:
    user.require("audit.read")
    services = services_of(request)
    stamp = format_timestamp(services.context.clock())[:19].replace(":", "")
    return Stream(
        tenant_export(services.context, user.caller),
        media_type="application/x-ndjson",
        headers={
            "Content-Disposition": f'attachment; filename="citeledger-{user.caller.tenant_id}-{stamp}.jsonl"',
            "Cache-Control": "no-store",
        },
    )


@get("/receipts/{receipt_id:str}/bundle.json", name="console:bundle")
async def bundle_file(request: AnyRequest, user: User, receipt_id: FromPath[str]) -> Response[bytes]:
    """The receipt's portable bundle (as `GET /v1/receipts/{id}/bundle`), for a third party
    to check offline with the root key alone."""
    user.require("audit.read")
    services = services_of(request)
    bundle = await services.blocking(
        receipt_bundle, services.context, user.caller.tenant_id, receipt_id[:128]
    )
    return Response(
        orjson.dumps(bundle, option=orjson.OPT_INDENT_2),
        media_type="application/json",
        headers={
            "Content-Disposition": f'attachment; filename="receipt-{receipt_id[:32]}.bundle.json"',
            "Cache-Control": "no-store",
        },
    )


@get("/proofs", name="console:proofs")
async def proofs(request: AnyRequest, user: User) -> Template:
    user.require("audit.read")
    services = services_of(request)
    latest = await services.blocking(services.ledger.latest_checkpoint)
    note = services.ledger.cosigned(latest).note if latest is not None else None
    return page("proofs.html", user, note=note, verdict=None, held="")


READ_PAGES = [
    overview,
    history,
    event,
    receipt,
    bundle_file,
    citation,
    erasures,
    proofs,
    export,
    export_file,
]
