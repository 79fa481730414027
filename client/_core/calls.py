"""What the async client and the sync one generated from it share, without I/O: the
request each method makes, the spool bookkeeping (what is spooled, the records, the
verdicts of a delivery), and the paging of the events feed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel

from client._core.http import Call, ClientSettings, make_call, new_key
from client._core.retry import CircuitBreaker
from client.checkpoints import CheckpointMemory, Seen
from client.errors import CheckpointMismatch, LedgerError, RateLimited, Unavailable
from client.models import (
    MAX_BATCH_ITEMS,
    BatchAnswer,
    BatchItemResult,
    DocumentIn,
    RetrievalBatchIn,
    RetrievalBatchItemIn,
    RetrievalIn,
    SearchFiltersIn,
    SearchIn,
    SearchInput,
    Spooled,
)
from client.spool import ItemVerdict, Spool, SpoolRecord

Retrieval = RetrievalIn | Mapping[str, Any]
BatchEntry = Retrieval | tuple[str, Retrieval]  # a retrieval, or (idempotency key, retrieval)


def as_retrieval(value: Retrieval) -> RetrievalIn:
    return value if isinstance(value, RetrievalIn) else RetrievalIn.model_validate(value)


def by_index(result: BatchItemResult) -> int:
    return result.index


def body(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", exclude_none=True)


def should_spool(error: LedgerError) -> bool:
    """A write the ledger could not take now (unreachable, failing, rate limited, breaker
    open) waits in the spool; a refusal of the request itself never does."""
    return error.retryable or isinstance(error, Unavailable | RateLimited)


class ClientCore:
    """The state of one client (settings, breaker, spool, checkpoint memory) and its
    decisions; the driver opens the spool and the memory and hands them in."""

    def __init__(self, settings: ClientSettings, spool: Spool | None, checkpoints: CheckpointMemory) -> None:
        self.settings = settings
        self.breaker = CircuitBreaker(settings.breaker_threshold, settings.breaker_cooldown_s)
        self.spool = spool
        self.checkpoints = checkpoints

    # -- calls -------------------------------------------------------------------------------
    @staticmethod
    def retrieval_call(retrieval: RetrievalIn, key: str, trace_id: str | None) -> Call:
        return make_call(
            "POST", "/v1/retrievals", "write", json=body(retrieval), idempotency_key=key, trace_id=trace_id
        )

    @staticmethod
    def batch_items(entries: Sequence[BatchEntry], trace_id: str | None) -> list[RetrievalBatchItemIn]:
        items = []
        for entry in entries:
            key, value = entry if isinstance(entry, tuple) else (new_key(), entry)
            items.append(
                RetrievalBatchItemIn(idempotency_key=key, retrieval=as_retrieval(value), trace_id=trace_id)
            )
        return items

    @staticmethod
    def batch_call(items: Sequence[RetrievalBatchItemIn], trace_id: str | None = None) -> Call:
        if len(items) > MAX_BATCH_ITEMS:
            raise ValueError(f"at most {MAX_BATCH_ITEMS} items per batch request")
        return make_call(
            "POST",
            "/v1/retrievals/batch",
            "write",
            json=body(RetrievalBatchIn(items=list(items))),
            trace_id=trace_id,
        )

    @staticmethod
    def record_batch_call(records: Sequence[SpoolRecord]) -> Call:
        return make_call("POST", "/v1/retrievals/batch", "write", json={"items": [r.item() for r in records]})

    @staticmethod
    def document_call(document: DocumentIn | Mapping[str, Any], key: str, trace_id: str | None) -> Call:
        model = document if isinstance(document, DocumentIn) else DocumentIn.model_validate(document)
        return make_call(
            "POST", "/v1/documents", "write", json=body(model), idempotency_key=key, trace_id=trace_id
        )

    @staticmethod
    def search_call(
        query: str,
        *,
        target_roots: Sequence[str] = (),
        top_k: int = 5,
        filters: Mapping[str, Any] | None = None,
        task_id: str | None = None,
        deadline_ms: int | None = None,
        auth_scope: Sequence[str] | None = None,
        idempotency_key: str | None = None,
        trace_id: str | None = None,
    ) -> Call:
        key = idempotency_key or new_key()
        call = make_call("POST", "/v1/search", "search", idempotency_key=key, trace_id=trace_id)
        request = SearchIn(
            # Only a trace id the caller chose goes in the envelope: the generated one travels in
            # the header, so the same key with the same question is the same request (dedup).
            trace_id=trace_id,
            task_id=task_id,
            deadline_ms=deadline_ms,
            auth_scope=list(auth_scope or ()),
            idempotency_key=key,
            input=SearchInput(
                query=query,
                target_roots=list(target_roots),
                top_k=top_k,
                filters=SearchFiltersIn.model_validate(dict(filters or {})),
            ),
        )
        return Call(
            call.method, call.path, call.kind, body(request), None, key, call.trace_id, call.traceparent
        )

    @staticmethod
    def latest_checkpoint_call() -> Call:
        return make_call("GET", "/v1/checkpoints/latest", "read")

    @staticmethod
    def consistency_call(old: int, new: int) -> Call:
        return make_call("GET", "/v1/checkpoints/consistency", "read", params={"from": old, "to": new})

    @staticmethod
    def proof_of(answer: dict[str, Any], seen: Seen) -> list[bytes]:
        """The proof hashes of a consistency answer, which must be for `seen`'s root."""
        if answer.get("new_root") != seen.root.hex():
            raise CheckpointMismatch("checkpoint_inconsistent", "the consistency proof is for another root")
        return [bytes.fromhex(h) for h in answer.get("hashes", [])[:64]]

    @staticmethod
    def citation_call(citation_id: str) -> Call:
        return make_call("GET", f"/v1/citations/{citation_id}", "read")

    @staticmethod
    def replay_call(receipt_id: str, key: str | None, at_position: int | None = None) -> Call:
        params = {"at_position": at_position} if at_position is not None else None
        return make_call(
            "POST",
            f"/v1/receipts/{receipt_id}/replay",
            "write",
            params=params,
            idempotency_key=key or new_key(),
        )

    @staticmethod
    def events_call(params: dict[str, Any]) -> Call:
        # The client's events feed follows the log oldest first (the route's default is newest
        # first); `order="desc"` asks for the other way.
        given = {"order": "asc", **params}
        return make_call(
            "GET", "/v1/events", "read", params={k: v for k, v in given.items() if v is not None}
        )

    @staticmethod
    def receipts_call(params: dict[str, Any]) -> Call:
        return make_call(
            "GET", "/v1/receipts", "read", params={k: v for k, v in params.items() if v is not None}
        )

    @staticmethod
    def receipt_call(receipt_id: str, *, content: bool = False) -> Call:
        params = {"content": "plain"} if content else None
        return make_call("GET", f"/v1/receipts/{quote(receipt_id, safe='')}", "read", params=params)

    @staticmethod
    def bundle_call(receipt_id: str, *, latest: bool = False) -> Call:
        path = f"/v1/receipts/{quote(receipt_id, safe='')}/bundle" + ("?checkpoint=latest" if latest else "")
        return make_call("GET", path, "read")

    @staticmethod
    def keys_call() -> Call:
        return make_call("GET", "/v1/keys", "read")

    @staticmethod
    def next_page(params: dict[str, Any], next_cursor: str | None) -> bool:
        """Whether the events feed goes on; if so `params` now ask for the next page."""
        if not next_cursor:
            return False
        params["cursor"] = next_cursor
        return True

    # -- the spool ---------------------------------------------------------------------------
    def spool_for(self, error: LedgerError) -> Spool | None:
        """The spool a write that failed with `error` goes to (said once, loudly), or None
        when it is not spooled: no spool is set, or the ledger refused the request itself."""
        if self.spool is None or not should_spool(error):
            return None
        self.spool.tell_outage(self.settings.base_url, error.code)
        return self.spool

    def spool_record(self, retrieval: RetrievalIn, key: str, call: Call) -> SpoolRecord:
        return SpoolRecord(
            idempotency_key=key,
            retrieval=body(retrieval),
            run_id=self.settings.run_id,
            trace_id=call.trace_id,
        )

    def spooled(self, record: SpoolRecord) -> Spooled:
        return Spooled(
            idempotency_key=record.idempotency_key, run_id=self.settings.run_id, trace_id=record.trace_id
        )

    def batch_records(self, items: Sequence[RetrievalBatchItemIn], call: Call) -> list[SpoolRecord]:
        return [
            SpoolRecord(i.idempotency_key, body(i.retrieval), self.settings.run_id, call.trace_id)
            for i in items
        ]

    @staticmethod
    def batch_spooled(records: Sequence[SpoolRecord]) -> list[Spooled]:
        return [Spooled(idempotency_key=r.idempotency_key, trace_id=r.trace_id) for r in records]

    @staticmethod
    def in_order(answer: BatchAnswer) -> list[BatchItemResult]:
        return sorted(answer.results, key=by_index)

    @staticmethod
    def verdicts(answer: BatchAnswer, count: int) -> list[ItemVerdict]:
        by_index = {result.index: result for result in answer.results}
        verdicts = []
        for index in range(count):
            result = by_index.get(index)
            if result is None:
                verdicts.append(ItemVerdict(False, retryable=True, reason="missing from the answer"))
            elif result.error is None:
                verdicts.append(ItemVerdict(True))
            else:
                reason = f"{result.http_status} {result.error.code}: {result.error.message}"
                verdicts.append(ItemVerdict(False, retryable=result.error.retryable, reason=reason))
        return verdicts


def describe(error: LedgerError) -> str:
    return f"{error.code}: {error.message}"
