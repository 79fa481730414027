"""`GET /v1/receipts/export.csv` and `.jsonl`: what a filtered list of receipts found, each
row with its receipt id and log position so it can be checked against a bundle or a tenant
export. The console's receipts list links to its twins (`/console/receipts.{csv,jsonl}`)."""

from __future__ import annotations

import csv
import io
from typing import Any

import orjson
from litestar import Response, Router, get
from litestar.di import Provide

from api.routes import listing
from api.routes.common import CallDep, operation
from api.routes.listing import order_of
from api.routes.receipts import ReceiptFilters
from api.services import Services
from ledger.domain.timestamps import format_timestamp
from ledger.usecases.context import Caller
from ledger.usecases.receipt_reads import receipts_export

FORMATS = ("csv", "jsonl")
MAX_ROWS = 10_000  # more matching is refused whole (422 `export_too_large`), never cut
MEDIA_TYPES = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson"}
COLUMNS = (
    "receipt_id",
    "position",
    "recorded_at",
    "actor",
    "kind",
    "engine",
    "mode",
    "status",
    "task_id",
    "trace_id",
    "run_id",
    "parent_receipt_id",
    "citation_count",
    "citation_ids",
    "context_hash",
    "kid",
    "signature",
)
# A spreadsheet runs a cell that starts with one of these as a formula (CSV injection).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    text = " ".join(value) if isinstance(value, list) else str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def export_body(rows: list[dict[str, Any]], fmt: str) -> bytes:
    """The rows as CSV (a header, then `COLUMNS`, formula-safe cells) or JSONL (one object a line)."""
    if fmt == "jsonl":
        return b"".join(orjson.dumps({k: row.get(k) for k in COLUMNS}) + b"\n" for row in rows)
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    writer.writerows([_cell(row.get(column)) for column in COLUMNS] for row in rows)
    return text.getvalue().encode()


def export_response(services: Services, caller: Caller, filters: ReceiptFilters, fmt: str) -> Response[bytes]:
    """The export of `filters` as a download (the HTTP route and the console's link)."""
    listing.choice(fmt, "format", FORMATS)
    flt, order = filters.filter(), order_of(filters.order)
    rows = receipts_export(services.read_models, caller, flt, order=order, max_rows=MAX_ROWS)
    stamp = format_timestamp(services.context.clock(), timespec="seconds").replace(":", "")
    name = f"receipts-{caller.tenant_id}-{stamp}.{fmt}"
    return Response(
        export_body(rows, fmt),
        media_type=MEDIA_TYPES[fmt],
        headers={
            "Content-Disposition": f'attachment; filename="{name}"',
            "Cache-Control": "no-store",
            "X-Export-Rows": str(len(rows)),
        },
    )


EXPORT_SUMMARY = f"Export the receipts a filter matches as {{}} (at most {MAX_ROWS:,} rows)"
FILTERS = {"filters": Provide(ReceiptFilters, sync_to_thread=False)}


@get(
    "/export.csv",
    media_type=MEDIA_TYPES["csv"],
    dependencies=FILTERS,
    **operation("audit.read", EXPORT_SUMMARY.format("CSV"), 422),
)
async def export_csv(call: CallDep, filters: ReceiptFilters) -> Response[bytes]:
    """The same filters as `GET /v1/receipts`; more than the row cap matching is a 422
    `export_too_large` (narrow the filter), never a cut file."""
    return await call.services.blocking(export_response, call.services, call.caller, filters, "csv")


@get(
    "/export.jsonl",
    media_type=MEDIA_TYPES["jsonl"],
    dependencies=FILTERS,
    **operation("audit.read", EXPORT_SUMMARY.format("JSON lines"), 422),
)
async def export_jsonl(call: CallDep, filters: ReceiptFilters) -> Response[bytes]:
    """As `export.csv`, one JSON object a line."""
    return await call.services.blocking(export_response, call.services, call.caller, filters, "jsonl")


router = Router(path="/v1/receipts", route_handlers=[export_csv, export_jsonl], tags=["receipts"])
