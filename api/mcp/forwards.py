"""Each tool's and resource's `/v1` twin as a request, for `citeledger mcp --url` (a stdio
server in front of a remote ledger): the same route, body, query and Idempotency-Key the HTTP
client would send, so the remote ledger applies its own rules and records the same events."""

from __future__ import annotations

import datetime as dt
from typing import Any
from urllib.parse import quote

from api.mcp.arguments import (
    CitationRef,
    DocumentsAt,
    IngestDocumentArgs,
    ReceiptQuery,
    ReceiptRead,
    ReceiptRef,
    RecordRetrievalArgs,
    ReplayArgs,
)
from api.mcp.calls import Forward
from ledger.domain.timestamps import format_timestamp
from ledger.schemas.requests import SearchIn

HISTORY_LIMIT = 500


def search(data: SearchIn) -> Forward:
    return Forward("POST", "/v1/search", json=data.model_dump(mode="json"))


def get_document_chunk(ref: CitationRef) -> Forward:
    return Forward("GET", f"/v1/citations/{quote(ref.citation_id, safe='')}")


def record_retrieval(args: RecordRetrievalArgs) -> Forward:
    body = args.command().model_dump(mode="json")
    return Forward("POST", "/v1/retrievals", json=body, idempotency_key=args.idempotency_key)


def ingest_document(args: IngestDocumentArgs) -> Forward:
    body = args.command().model_dump(mode="json")
    return Forward("POST", "/v1/documents", json=body, idempotency_key=args.idempotency_key)


def get_receipt(ref: ReceiptRead) -> Forward:
    params = {"content": "plain"} if ref.content == "plain" else None
    return Forward("GET", f"/v1/receipts/{ref.receipt_id}", params=params)


def list_receipts(query: ReceiptQuery) -> Forward:
    params = {key: value for key, value in query.model_dump().items() if value is not None}
    return Forward("GET", "/v1/receipts", params=params)


def find_documents(target: DocumentsAt) -> Forward:
    return Forward("GET", "/v1/documents", params=target.model_dump(exclude_none=True))


def replay_receipt(args: ReplayArgs) -> Forward:
    params = {"at_position": args.at_position} if args.at_position is not None else None
    path = f"/v1/receipts/{args.receipt_id}/replay"
    return Forward("POST", path, params=params, idempotency_key=args.idempotency_key)


def verify_receipt(ref: ReceiptRef) -> Forward:
    """The receipt's bundle, checked here with the trusted root key (`then`, set by the remote
    surface: `--public-key`, else the key the ledger publishes)."""
    return Forward("GET", f"/v1/receipts/{ref.receipt_id}/bundle", then=_verified)


async def _verified(remote: Any, body: dict[str, Any]) -> dict[str, Any]:
    verified: dict[str, Any] = await remote.verify_bundle(body)
    return verified


def latest_checkpoint(_: Any) -> Forward:
    return Forward("GET", "/v1/checkpoints/latest")


def keys(_: Any) -> Forward:
    return Forward("GET", "/v1/keys")


def receipt(ref: ReceiptRef) -> Forward:
    return Forward("GET", f"/v1/receipts/{ref.receipt_id}")


def history_today(_: Any) -> Forward:
    since = format_timestamp(today_utc())

    async def with_since(remote: Any, body: dict[str, Any]) -> dict[str, Any]:
        return {"since": since, **body}

    return Forward("GET", "/v1/events", params={"since": since, "limit": HISTORY_LIMIT}, then=with_since)


def today_utc(now: dt.datetime | None = None) -> dt.datetime:
    """00:00 UTC of the day of `now` (default: the clock's)."""
    moment = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)
