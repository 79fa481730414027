"""Retrievals: a service posts a retrieval it ran itself, or up to 1,000 in one batch
(`ledger.usecases.retrievals`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from litestar import Response, Router, post
from litestar.params import JSONBody

from api.contract import describe
from api.routes.common import CallDep, IdempotencyKeyHeader, fingerprint, operation
from ledger.schemas.answers import ReceiptRecordedOut, RetrievalBatchOut
from ledger.schemas.requests import RetrievalBatchIn, RetrievalBatchItemIn, RetrievalIn
from ledger.storage.adapters import store_unavailable
from ledger.usecases.context import Caller
from ledger.usecases.retrievals import BatchItem, ItemOutcome, record_retrieval, record_retrievals
from ledger.writing.idempotency import IdempotencyKey

# A batch item is "the same request" as a single POST of its retrieval with its key: a write
# first tried alone and then delivered in a batch (a client's spool) is answered, not refused.
ROUTE = "POST /v1/retrievals"


def _key(caller: Caller, key: str, body: RetrievalIn) -> IdempotencyKey:
    return IdempotencyKey(caller.tenant_id, key, fingerprint(ROUTE, body.model_dump(mode="json"), caller))


@post(
    "/",
    status_code=201,
    **operation(
        "retrieval.write",
        "Record an external retrieval receipt",
        404,
        409,
        413,
        422,
        dedup=ReceiptRecordedOut,
    ),
)
async def post_retrieval(
    call: CallDep, data: JSONBody[RetrievalIn], idempotency_key: IdempotencyKeyHeader = None
) -> Response[ReceiptRecordedOut]:
    return await call.write_command(ROUTE, record_retrieval, data, idempotency_key)


def _item(caller: Caller, item: RetrievalBatchItemIn) -> BatchItem:
    if item.problem is not None:
        return BatchItem(None, None, problem=item.problem)
    return BatchItem(
        _key(caller, item.idempotency_key, item.retrieval), item.retrieval, item.run_id, item.trace_id
    )


def _results(outcomes: Sequence[ItemOutcome]) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    for outcome in outcomes:
        if outcome.result is not None:
            status = 201 if outcome.result.created else 200
            results.append({"index": outcome.index, "http_status": status, **outcome.result.body})
        else:
            assert outcome.error is not None
            status, code, message, retryable, _, _ = describe(outcome.error)
            results.append(
                {
                    "index": outcome.index,
                    "http_status": status,
                    "error": {"code": code, "message": message, "retryable": retryable},
                }
            )
    refused = sum(1 for item in results if "error" in item)
    repeated = sum(1 for item in results if item.get("dedup") is True)
    return {
        "results": results,
        "recorded": len(results) - refused - repeated,
        "dedup": repeated,
        "refused": refused,
    }


BATCH_SUMMARY = "Record up to 1,000 retrievals, each with its own Idempotency-Key and its own result"


@post("/batch", status_code=200, **operation("retrieval.write", BATCH_SUMMARY, 413, 422))
async def post_retrieval_batch(
    call: CallDep, data: JSONBody[RetrievalBatchIn]
) -> Response[RetrievalBatchOut]:
    """Per-item results: a bad item is refused by its index and reason while the others are
    recorded (all in one transaction); 200 whenever the batch itself was well-formed."""
    items = [_item(call.caller, item) for item in data.items]
    outcomes = await call.services.blocking(record_retrievals, call.services.context, call.caller, items)
    for outcome in outcomes:
        if outcome.error is not None and store_unavailable(outcome.error):
            raise outcome.error  # the batch's one transaction did not commit: 503 for the whole
    return call.ok(_results(outcomes))


router = Router(
    path="/v1/retrievals", route_handlers=[post_retrieval, post_retrieval_batch], tags=["retrievals"]
)
