"""What a tool call or a resource read answers, and the one log line it leaves.

A refusal is the HTTP contract's error, mapped by the same table (`api.contract.describe`,
which applies `api.errors`): a tool answers it as a result with `isError: true` whose one
text content is the envelope as JSON (`error {code, message, retryable}`, `http_status`,
`run_id`, `trace_id`), and no `structuredContent`: a client that checks `structuredContent`
against the tool's `outputSchema` (the TypeScript SDK, the MCP Inspector) would find the
envelope is no answer of that schema and throw the refusal away; a resource, having no such
channel, as a JSON-RPC error carrying the same envelope in `data`. Where HTTP tells a
read-back's sub-state only in `x-replay-reason`, the MCP `code` is that reason
(`chunk_not_found`, `chunk_retention_expired`, `restricted_scope_required`); the message
stays the one of every not-found. Nothing of an unexpected failure but "internal error"
leaves the server.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, CallToolResult, TextContent
from pydantic import ValidationError

from api.api_error import ApiError
from api.contract import Correlation, describe, error_body
from ledger.domain.timestamps import utc_now

audit_log = logging.getLogger("citeledger.mcp")
error_log = logging.getLogger("citeledger.mcp.error")


def invalid_arguments(exc: ValidationError) -> ApiError:
    """A 400 naming the fields that break the schema, never echoing a value."""
    parts = []
    for item in exc.errors(include_url=False, include_input=False, include_context=False)[:5]:
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        parts.append(f"{where[:80]}: {str(item['msg'])[:200]}")
    return ApiError(400, "bad_request", "invalid request: " + "; ".join(parts or ["invalid arguments"]))


def refusal(exc: Exception, ids: Correlation) -> dict[str, Any]:
    """The HTTP contract's error envelope for `exc`, with its status and, for an MCP client
    that sees no headers, the read-back reason as the code and `retry_after_s`."""
    status, code, message, retryable, headers, extra = describe(exc)
    if status >= 500:
        error_log.error(
            "MCP call failed",
            exc_info=exc if not isinstance(exc, ApiError) else None,
            extra={"run_id": ids.run_id, "trace_id": ids.trace_id},
        )
    lowered = {name.lower(): value for name, value in headers.items()}
    body = {**error_body(lowered.get("x-replay-reason", code), message, retryable, ids), **extra}
    body["http_status"] = status
    if "retry-after" in lowered:
        body["retry_after_s"] = int(lowered["retry-after"])
    return body


def success(body: dict[str, Any]) -> CallToolResult:
    text = orjson.dumps(body).decode()
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=body)


def tool_error(body: dict[str, Any]) -> CallToolResult:
    # The envelope only as text: `structuredContent` is reserved for the output schema's shape.
    text = orjson.dumps(body).decode()
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def resource_error(body: dict[str, Any]) -> MCPError:
    status = int(body["http_status"])
    if status >= 500:
        code = INTERNAL_ERROR
    elif status in (400, 404, 413, 422):
        code = INVALID_PARAMS  # what the SDK answers for an unknown resource
    else:
        code = INVALID_REQUEST
    return MCPError(code=code, message=str(body["error"]["message"]), data=body)


def log_call(
    transport: str,
    kind: str,
    name: str,
    ids: Correlation,
    principal: Any,
    started: float,
    error_code: str | None,
) -> None:
    """The access line of one call (the `/v1` line's fields): ids and outcome, never arguments."""
    if not audit_log.isEnabledFor(logging.INFO):
        return
    line = {
        "ts": utc_now(timespec="seconds"),
        "transport": transport,
        "kind": kind,
        "name": name,
        "duration_ms": round((time.perf_counter() - started) * 1000, 2),
        "run_id": ids.run_id,
        "trace_id": ids.trace_id,
        "tenant": getattr(principal, "tenant", None),
        "token_id": getattr(principal, "token_id", None),
        "error": error_code,
    }
    audit_log.info(orjson.dumps(line).decode())
