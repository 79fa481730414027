"""`citeledger mcp --url`: a stdio MCP server in front of a remote ledger. Each call is
forwarded to its `/v1` twin (`api.mcp.forwards`) with the token and the call's correlation
ids; the remote ledger checks the token, scopes and rate limit, applies its rules and records
the entries. Its answer is passed through; its refusal becomes the same tool error as in the
ledger's own process (the read-back reason comes from `x-replay-reason`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
from mcp.server.context import ServerRequestContext

from api.api_error import ApiError
from api.contract import Correlation, correlation_of
from api.mcp.calls import Call, Forward, Operation, parse
from ledger.evidence.bundle import BundleError, verify_bundle
from ledger.tlog.signing import unb64

MAX_ANSWER_BYTES = 8 * 1024 * 1024


class RemoteSurface:
    transport = "stdio"

    def __init__(
        self, base_url: str, bearer: str, *, timeout_s: float = 30.0, trusted_root_key: bytes | None = None
    ) -> None:
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {bearer}"},
            timeout=timeout_s,
            follow_redirects=False,
        )
        self._trusted_root_key = trusted_root_key

    async def aclose(self) -> None:
        await self._http.aclose()

    def correlation(self, request: ServerRequestContext[Any, Any]) -> Correlation:
        return correlation_of(None, None, None)

    async def answer(
        self, call: Call, operation: Operation, arguments: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        if call.ids.problem is not None:
            raise ApiError(400, "bad_request", call.ids.problem)
        forward = operation.forward(parse(operation.model, arguments))
        body = await self.send(forward, call.ids)
        return await forward.then(self, body) if forward.then is not None else body

    async def send(self, forward: Forward, ids: Correlation) -> dict[str, Any]:
        headers = {"X-Run-Id": ids.run_id, "X-Trace-Id": ids.trace_id}
        if forward.idempotency_key is not None:
            headers["Idempotency-Key"] = forward.idempotency_key
        try:
            response = await self._http.request(
                forward.method, forward.path, json=forward.json, params=forward.params, headers=headers
            )
        except httpx.HTTPError:
            raise ApiError(503, "unavailable", "the ledger at --url did not answer", retryable=True) from None
        try:
            if len(response.content) > MAX_ANSWER_BYTES:
                raise ValueError("too large")
            body = response.json()
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError:
            raise _outside_contract() from None
        if response.status_code >= 400:
            raise _refusal(response.status_code, body, response.headers)
        return body

    async def verify_bundle(self, body: dict[str, Any]) -> dict[str, Any]:
        """`verify_receipt` against a remote ledger: its bundle checked here, with the root key
        given to `citeledger mcp --public-key`, else the one the ledger publishes."""
        bundle = body.get("bundle")
        if not isinstance(bundle, dict):
            raise _outside_contract()
        root = self._trusted_root_key
        if root is None:
            ids = correlation_of(body.get("run_id"), body.get("trace_id"), None)
            keys = await self.send(Forward("GET", "/v1/keys"), ids)
            try:
                root = unb64(str(keys.get("root_public_key", "")))
            except ValueError:
                raise _outside_contract() from None
        problem: str | None = None
        try:
            verify_bundle(bundle, root)
        except BundleError as exc:
            problem = str(exc)[:300]
        entry = bundle.get("entry") or {}
        answer_ids = ("run_id", "trace_id", "server_version", "policy_version")
        return {
            **{key: body[key] for key in answer_ids if key in body},
            "receipt_id": (entry.get("payload") or {}).get("receipt_id"),
            "position": entry.get("position"),
            "intact": problem is None,
            "problem": problem,
            "kid": entry.get("kid"),
            "checkpoint": bundle.get("checkpoint"),
            "inclusion_proof": bundle.get("inclusion_proof"),
        }


def _outside_contract() -> ApiError:
    return ApiError(502, "bad_gateway", "the ledger at --url answered outside its contract", retryable=True)


def _refusal(status: int, body: dict[str, Any], headers: httpx.Headers) -> ApiError:
    found = body.get("error")
    error: dict[str, Any] = found if isinstance(found, dict) else {}
    passed = {name: headers[name] for name in ("x-replay-reason", "retry-after") if name in headers}
    return ApiError(
        status,
        str(error.get("code") or "error")[:80],
        str(error.get("message") or "refused")[:400],
        retryable=bool(error.get("retryable", False)),
        headers=passed,
    )
