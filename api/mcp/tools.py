"""The MCP tools: each the twin of one HTTP route, calling the same use case the same way
(`api.routes.common.run_write` for writes, so a write's Idempotency-Key means the same over
both surfaces and the same input records the same events). Input schemas are the
commands' (`ledger.schemas.requests`, `api.mcp.arguments`), output schemas the HTTP
answers' (`ledger.schemas`): one source for both contracts, and for the Python client."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import BaseModel

from api.mcp import forwards
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
from api.mcp.calls import Call, Forward, Operation, Surface, Work
from api.mcp.outcomes import log_call, refusal, success, tool_error
from api.routes.common import run_write
from api.routes.listing import listing_filter
from api.routes.receipts import receipt_answer, receipt_page
from api.services import Services
from ledger.schemas.answers import CitationOut, DocumentOut, ReceiptRecordedOut, SearchOut
from ledger.schemas.reads import (
    DocumentsAtPathOut,
    ReceiptOut,
    ReceiptPage,
    ReceiptVerificationOut,
    ReplayOut,
)
from ledger.schemas.requests import SearchIn
from ledger.usecases.citations import read_citation
from ledger.usecases.content import require_content_scope
from ledger.usecases.context import Caller, Result
from ledger.usecases.document_lookup import documents_by_path
from ledger.usecases.documents import ingest_document
from ledger.usecases.ports import ReceiptFilter
from ledger.usecases.receipts import verify_receipt
from ledger.usecases.replay import replay
from ledger.usecases.retrievals import record_retrieval
from ledger.usecases.search import search


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    arguments: type[BaseModel]
    answer: type[BaseModel]
    scopes: tuple[str, ...]
    work: Work
    forward: Callable[[Any], Forward]
    read_only: bool = False
    # Only where a repeat with the same arguments changes nothing: a search, a recorded
    # retrieval or a replay records a new receipt on each call (unless idempotency_key repeats).
    idempotent: bool = False

    @property
    def operation(self) -> Operation:
        return Operation(self.scopes, self.arguments, self.work, self.forward)


async def _search(services: Services, caller: Caller, data: SearchIn) -> dict[str, Any]:
    def run(keyed: Caller) -> Result:
        return search(services.context, keyed, data)

    body = data.model_dump(mode="json")
    return (await run_write(services, caller, data.idempotency_key, "POST /v1/search", body, run)).body


async def _get_document_chunk(services: Services, caller: Caller, ref: CitationRef) -> dict[str, Any]:
    chunk = await services.blocking(
        read_citation, services.context, services.read_models, caller, ref.citation_id
    )
    return {"data": chunk}


async def _record_retrieval(services: Services, caller: Caller, args: RecordRetrievalArgs) -> dict[str, Any]:
    data = args.command()

    def run(keyed: Caller) -> Result:
        return record_retrieval(services.context, keyed, data)

    body = data.model_dump(mode="json")
    return (await run_write(services, caller, args.idempotency_key, "POST /v1/retrievals", body, run)).body


async def _ingest_document(services: Services, caller: Caller, args: IngestDocumentArgs) -> dict[str, Any]:
    doc = args.command()

    def run(keyed: Caller) -> Result:
        return ingest_document(services.context, services.claims, keyed, doc)

    body = doc.model_dump(mode="json")
    return (await run_write(services, caller, args.idempotency_key, "POST /v1/documents", body, run)).body


async def _get_receipt(services: Services, caller: Caller, ref: ReceiptRead) -> dict[str, Any]:
    plain = ref.content == "plain"
    if plain:
        require_content_scope(caller)  # before anything is looked up, as the route does
    return await receipt_answer(services, caller, ref.receipt_id, content=plain)


async def _list_receipts(services: Services, caller: Caller, query: ReceiptQuery) -> dict[str, Any]:
    flt = listing_filter(ReceiptFilter, query.model_dump())
    page = (flt, query.cursor, query.limit, query.order, query.content)
    return await services.blocking(receipt_page, services, caller, *page)


async def _find_documents(services: Services, caller: Caller, target: DocumentsAt) -> dict[str, Any]:
    return await services.blocking(documents_by_path, services.context, caller, target)


async def _replay_receipt(services: Services, caller: Caller, args: ReplayArgs) -> dict[str, Any]:
    def run(keyed: Caller) -> Result:
        return replay(services.context, keyed, args.receipt_id, args.at_position)

    body = {"receipt_id": args.receipt_id, "at_position": args.at_position}
    route = "POST /v1/receipts/{id}/replay"
    return (await run_write(services, caller, args.idempotency_key, route, body, run)).body


async def _verify_receipt(services: Services, caller: Caller, ref: ReceiptRef) -> dict[str, Any]:
    return await services.blocking(verify_receipt, services.context, caller.tenant_id, ref.receipt_id)


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "search",
        "Search the tenant's documents",
        "Rank the tenant's documents for `input.query` and record the search as a signed receipt "
        "(POST /v1/search): status, citations (path, snippet, locator, score), gaps, receipt id. "
        "Each call records a new receipt unless idempotency_key repeats. Needs retrieval.write.",
        SearchIn,
        SearchOut,
        ("retrieval.write",),
        _search,
        forwards.search,
    ),
    ToolSpec(
        "get_document_chunk",
        "Read a cited chunk back",
        "The chunk text a citation points at, as recorded at ingest, and the cited span in it "
        "(GET /v1/citations/{id}). An unknown, expired or erased citation is one not-found error "
        "(code chunk_not_found or chunk_retention_expired); a restricted chunk needs "
        "knowledge.restricted.read (code restricted_scope_required, the denial is recorded).",
        CitationRef,
        CitationOut,
        (),
        _get_document_chunk,
        forwards.get_document_chunk,
        read_only=True,
        idempotent=True,
    ),
    ToolSpec(
        "record_retrieval",
        "Record a retrieval your engine made",
        "Record a retrieval made by another engine (engine `external:<name>`, scores as decimal "
        "strings) as a signed receipt (POST /v1/retrievals); every snippet must occur in the chunk "
        "it cites (else snippet_not_in_chunk). Answers the receipt id and a citation id per entry. "
        "Needs retrieval.write.",
        RecordRetrievalArgs,
        ReceiptRecordedOut,
        ("retrieval.write",),
        _record_retrieval,
        forwards.record_retrieval,
    ),
    ToolSpec(
        "ingest_document",
        "Record a markdown document",
        "Record a markdown document version (POST /v1/documents): its chunks and their ids; an "
        "unchanged text is the current version (dedup). Needs ingest.write.",
        IngestDocumentArgs,
        DocumentOut,
        ("ingest.write",),
        _ingest_document,
        forwards.ingest_document,
        idempotent=True,
    ),
    ToolSpec(
        "get_receipt",
        "Read one receipt",
        "One receipt (GET /v1/receipts/{id}): what was selected, position, signature, signed entry, "
        "replay chain; content=plain adds the question (audit.content, recorded). Needs audit.read.",
        ReceiptRead,
        ReceiptOut,
        ("audit.read",),
        _get_receipt,
        forwards.get_receipt,
        read_only=True,
        idempotent=True,
    ),
    ToolSpec(
        "list_receipts",
        "List receipts",
        "The tenant's receipts, newest first, with GET /v1/receipts' filters, one page at a time "
        "(next_cursor) and how many match (total, total_exact); q keeps those whose question holds "
        "every word and content=plain adds each question (both audit.content, recorded). Needs audit.read.",
        ReceiptQuery,
        ReceiptPage,
        ("audit.read",),
        _list_receipts,
        forwards.list_receipts,
        read_only=True,
        idempotent=True,
    ),
    ToolSpec(
        "find_documents",
        "Find a document by its path",
        "The documents recorded at a path (GET /v1/documents): each one's document_id (what "
        "list_receipts' document_id takes), versions, how many receipts cite it, its erasure and "
        "legal holds; metadata only, never text. None the token may see there is a not-found. "
        "Needs audit.read.",
        DocumentsAt,
        DocumentsAtPathOut,
        ("audit.read",),
        _find_documents,
        forwards.find_documents,
        read_only=True,
        idempotent=True,
    ),
    ToolSpec(
        "replay_receipt",
        "Replay a receipt",
        "Re-run a receipt under its frozen policy (POST /v1/receipts/{id}/replay): integrity and "
        "the diff envelope (data drift, policy drift); records a signed replay receipt. Needs "
        "replay.run.",
        ReplayArgs,
        ReplayOut,
        ("replay.run",),
        _replay_receipt,
        forwards.replay_receipt,
    ),
    ToolSpec(
        "verify_receipt",
        "Check that a receipt is intact",
        "Check a receipt's signature and its inclusion proof against the latest signed checkpoint "
        "(with that checkpoint's signature and the key chain to the root key): intact, or the "
        "first part that fails. Needs audit.read.",
        ReceiptRef,
        ReceiptVerificationOut,
        ("audit.read",),
        _verify_receipt,
        forwards.verify_receipt,
        read_only=True,
        idempotent=True,
    ),
)


def untitled(schema: Any) -> Any:
    """`schema` without pydantic's generated titles (a property's title repeats its name, a
    definition's its key): every agent reads `tools/list`, so it carries only what informs."""
    if isinstance(schema, dict):
        return {k: untitled(v) for k, v in schema.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(schema, list):
        return [untitled(value) for value in schema]
    return schema


@cache
def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    return dict(untitled(model.model_json_schema(mode="validation")))


@cache
def output_schema(model: type[BaseModel]) -> dict[str, Any]:
    return dict(untitled(model.model_json_schema(mode="serialization")))


class LedgerTool(Tool):
    """A tool whose arguments are validated by its command model (not by a function
    signature) and whose answer is built here, success or refusal."""

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        result: CallToolResult = await self.fn(arguments)
        return result


def call_tool(spec: ToolSpec, surface: Surface) -> Callable[[dict[str, Any]], Awaitable[CallToolResult]]:
    async def run(arguments: dict[str, Any]) -> CallToolResult:
        started = time.perf_counter()
        call = Call.begin(surface)
        error_code: str | None = None
        try:
            return success(await call.answer(spec.operation, arguments))
        except Exception as exc:  # noqa: BLE001 - every refusal and failure is the call's result, never a traceback
            body = refusal(exc, call.ids)
            error_code = body["error"]["code"]
            return tool_error(body)
        finally:
            log_call(surface.transport, "tool", spec.name, call.ids, call.principal, started, error_code)

    return run


def ledger_tools(surface: Surface) -> list[Tool]:
    return [
        LedgerTool(
            fn=call_tool(spec, surface),
            name=spec.name,
            title=spec.title,
            description=spec.description,
            parameters=input_schema(spec.arguments),
            fn_metadata=FuncMetadata(arg_model=ArgModelBase, output_schema=output_schema(spec.answer)),
            is_async=True,
            annotations=ToolAnnotations(
                title=spec.title,
                read_only_hint=spec.read_only,
                destructive_hint=False,  # the ledger only appends
                idempotent_hint=spec.idempotent,
                open_world_hint=False,
            ),
        )
        for spec in TOOLS
    ]
