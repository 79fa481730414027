"""Reading receipts for people: one receipt's body and a filtered page of them, the same for
every surface (the HTTP routes, `citeledger receipts list|show`). Plain content is added
only through `ledger.usecases.content.read_content` (scope `audit.content`, recorded)."""

from __future__ import annotations

from typing import Any

from ledger.domain.entries import RecordedEvent, with_continuations
from ledger.retrieval.question_words import search_words
from ledger.usecases.citations import document_rules
from ledger.usecases.content import read_content, record_question_search, require_content_scope
from ledger.usecases.context import Caller, UseCaseContext
from ledger.usecases.errors import Invalid
from ledger.usecases.ports import Order, ReceiptFilter, ReceiptLister, receipt_kind


def receipt_body(event: RecordedEvent) -> dict[str, Any]:
    """A receipt as its signed entries say, with the entries themselves for offline checks
    (`continued_events`: the `RetrievalContinued` entries of a receipt too large for one)."""
    envelope, payload = event.envelope, event.payload
    snapshot = payload.get("policy_snapshot")
    return {
        "receipt_id": payload["receipt_id"],
        "position": envelope["position"],
        "recorded_at": envelope["recorded_at"],
        "actor": envelope["actor"],
        "engine": payload["engine"],
        "mode": payload["mode"],
        "status": payload["status"],
        "parent_receipt_id": payload.get("parent_receipt_id"),
        "context_hash": payload["context_hash"],
        "policy_bundle_hash": snapshot.get("bundle_hash") if snapshot else None,
        "citations": [
            {
                "citation_id": e["citation_id"],
                "document_id": e["document_id"],
                "version_id": e.get("version_id"),
                "chunk_id": e["chunk_id"],
                "source": e.get("source"),
                "path": e["path"],
                "locator": {"start_line": e["locator"]["start_line"], "end_line": e["locator"]["end_line"]},
                "score": e.get("score"),
                "sensitivity": e["sensitivity"],
                "expires_at": e.get("expires_at"),
            }
            for e in payload["selected_entries"]
        ],
        # Documents the engine reported that the ledger cannot check (OTLP spans), by rank.
        **({"unverifiable": payload["unverifiable"]} if payload.get("unverifiable") else {}),
        "kid": envelope["kid"],
        "signature": envelope["signature"],
        "event": envelope,
        **({"continued_events": [c.envelope for c in event.continuations]} if event.continuations else {}),
    }


def receipt_summary(view: Any) -> dict[str, Any]:
    """One line of a listing (a row of the receipt index: `projections.views.ReceiptView`)."""
    return {
        "receipt_id": view.receipt_id,
        "position": view.position,
        "recorded_at": view.recorded_at,
        "actor": view.actor,
        "run_id": view.run_id,
        "trace_id": view.trace_id,
        "task_id": view.body.get("task", {}).get("task_id"),
        "kind": receipt_kind(view.engine, view.mode),
        "engine": view.engine,
        "mode": view.mode,
        "status": view.status,
        "parent_receipt_id": view.parent_receipt_id,
        "context_hash": view.context_hash,
        "citation_count": view.citation_count,
        "citation_ids": [e["citation_id"] for e in view.body.get("selected_entries", [])],
        "kid": view.kid,
        "signature": view.signature,
    }


def receipts_page(
    ctx: UseCaseContext,
    read_models: ReceiptLister,
    caller: Caller,
    flt: ReceiptFilter,
    *,
    cursor: str | None,
    limit: int,
    order: Order = "desc",
    content: bool = False,
) -> dict[str, Any]:
    """A page of the caller's tenant's receipts and how many match in all (`total`, exact or
    `total_exact: false` for "more than"); with `content`, their sealed fields in plain (one
    recorded read for the page); with `flt.q`, those whose question holds its words (a recorded
    read as well). Raises InvalidCursor / ValueError on a bad page request."""
    if content or flt.q is not None:
        require_content_scope(caller)  # before anything is read: no count, no timing of matches
    page = read_models.receipts(caller.tenant_id, flt, cursor=cursor, limit=limit, order=order)
    if flt.q is not None:
        record_question_search(ctx, caller, page.items, len(search_words(flt.q)))
    summaries = [receipt_summary(view) for view in page.items]
    if content:
        found = (ctx.ledger.get(view.position) for view in page.items)
        events = [with_continuations(e, ctx.ledger.read) for e in found if e is not None]
        plain = read_content(ctx, caller, events)
        for summary in summaries:
            summary["content"] = plain.get(summary["position"])
    return {
        "receipts": summaries,
        "next_cursor": page.next_cursor,
        "total": page.total,
        "total_exact": page.total_exact,
    }


EXPORT_PAGE = 500


def receipts_export(
    read_models: ReceiptLister, caller: Caller, flt: ReceiptFilter, *, order: Order, max_rows: int
) -> list[dict[str, Any]]:
    """Every receipt the filter matches, as listed (`receipt_summary`), in `order`; refused
    (nothing returned) when more than `max_rows` match, so an export is never silently cut."""
    rows: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page = read_models.receipts(
            caller.tenant_id, flt, cursor=cursor, limit=EXPORT_PAGE, order=order, count=False
        )
        rows.extend(receipt_summary(view) for view in page.items)
        if len(rows) > max_rows:
            raise Invalid(
                f"more than {max_rows:,} receipts match; narrow the filter (since/until, status, "
                "kind, ...) and export each part",
                code="export_too_large",
            )
        cursor = page.next_cursor
        if cursor is None:
            return rows


def receipt_detail(
    ctx: UseCaseContext,
    caller: Caller,
    event: RecordedEvent,
    chain: dict[str, Any],
    *,
    content: bool = False,
) -> dict[str, Any]:
    """One receipt with its replay chain (`receipt_with_chain`) and, with `content`, its sealed
    fields in plain."""
    if content:
        require_content_scope(caller)
    body = {**receipt_body(event), "replay_chain": chain}
    cited = [(c["document_id"], c["chunk_id"]) for c in body["citations"]]
    chunks = ctx.lookups.chunks(caller.tenant_id, cited) if cited else {}
    read: dict[int, Any] = {}
    for citation in body["citations"]:
        chunk = chunks.get((citation["document_id"], citation["chunk_id"]))
        if (
            citation["version_id"] is not None
            and chunk is not None
            and chunk.version_id != citation["version_id"]
        ):
            chunk = ctx.lookups.chunk_in_version(
                caller.tenant_id, citation["document_id"], citation["chunk_id"], citation["version_id"]
            )
        if citation["source"] is None and chunk is not None:
            # Recorded before entries named their source: the cited document knows it.
            citation["source"] = chunk.source
        citation["rules"] = document_rules(ctx, chunk, read)
    if content:
        body["content"] = read_content(ctx, caller, [event]).get(event.position)
    return body
