"""The asynchronous client (httpx.AsyncClient): the same calls, retries, breaker and spool
as `client.sync.Client`; spool file work runs in a thread so the event loop never waits
on an fsync."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx

from client.base import BatchEntry, Retrieval, Shared, as_retrieval, body, by_index
from client.checkpoints import Seen
from client.errors import CircuitOpen, LedgerError, NotFound
from client.models import (
    BatchAnswer,
    BatchItemResult,
    CitationAnswer,
    DocumentIn,
    DocumentRecorded,
    EventsPage,
    RetrievalReceipt,
    SearchAnswer,
    Spooled,
)
from client.spool import DrainReport, ItemVerdict, SpoolRecord
from client.transport import (
    Call,
    ClientSettings,
    delay_s,
    interpret,
    is_outage,
    new_key,
    should_spool,
    too_large,
    transport_error,
)
from client.verify import verify_bundle


class AsyncClient(Shared):
    def __init__(self, base_url: str, token: str, **settings: Any) -> None:
        settings.setdefault("drain_interval_s", None)  # no background thread: call flush_spool()
        super().__init__(ClientSettings(base_url=base_url.rstrip("/"), token=token, **settings))
        self._http = httpx.AsyncClient(
            base_url=self.settings.base_url, limits=httpx.Limits(max_connections=64)
        )

    async def _exchange(self, call: Call) -> dict[str, Any]:
        settings = self.settings
        try:
            async with self._http.stream(
                call.method,
                call.path,
                json=call.json,
                params=call.params,
                headers=call.headers(settings),
                timeout=httpx.Timeout(settings.timeout(call.kind)),
            ) as response:
                declared = response.headers.get("content-length")
                if declared and declared.isdigit() and int(declared) > settings.max_response_bytes:
                    raise too_large(call, settings, response.status_code)
                chunks, size = [], 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > settings.max_response_bytes:
                        raise too_large(call, settings, response.status_code)
                    chunks.append(chunk)
                return interpret(call, settings, response.status_code, response.headers, b"".join(chunks))
        except httpx.HTTPError as exc:
            raise transport_error(call, settings, exc) from None

    async def _send(self, call: Call) -> dict[str, Any]:
        for attempt in range(1, self.settings.max_attempts + 1):
            if not self.breaker.allow():
                raise CircuitOpen(
                    "circuit_open",
                    "the circuit breaker is open after repeated failures",
                    retryable=True,
                    run_id=self.settings.run_id,
                    trace_id=call.trace_id,
                )
            try:
                data = await self._exchange(call)
            except LedgerError as error:
                if is_outage(error):
                    self.breaker.failure()
                else:
                    self.breaker.success()
                if not error.retryable or attempt == self.settings.max_attempts:
                    raise
                await asyncio.sleep(delay_s(self.settings, attempt, error))
                continue
            self.breaker.success()
            return data
        raise AssertionError("unreachable")

    async def record_retrieval(
        self, retrieval: Retrieval, *, idempotency_key: str | None = None, trace_id: str | None = None
    ) -> RetrievalReceipt | Spooled:
        model = as_retrieval(retrieval)
        key = idempotency_key or new_key()
        call = self.retrieval_call(model, key, trace_id)
        try:
            return RetrievalReceipt.model_validate(await self._send(call))
        except LedgerError as error:
            if self.spool is None or not should_spool(error):
                raise
            self.spool.tell_outage(self.settings.base_url, error.code)
            await asyncio.to_thread(self.spool.append, self.spool_record(model, key, self.settings, call))
            return Spooled(idempotency_key=key, run_id=self.settings.run_id, trace_id=call.trace_id)

    async def record_retrievals(
        self, entries: Sequence[BatchEntry], *, trace_id: str | None = None
    ) -> list[BatchItemResult | Spooled]:
        results: list[BatchItemResult | Spooled] = []
        for start in range(0, len(entries), 1000):
            items = self.batch_items(entries[start : start + 1000], trace_id)
            call = self.batch_call(items, trace_id)
            try:
                answer = BatchAnswer.model_validate(await self._send(call))
            except LedgerError as error:
                if self.spool is None or not should_spool(error):
                    raise
                self.spool.tell_outage(self.settings.base_url, error.code)
                records = [
                    SpoolRecord(i.idempotency_key, body(i.retrieval), self.settings.run_id, call.trace_id)
                    for i in items
                ]
                await asyncio.to_thread(self.spool.append_many, records)
                results += [
                    Spooled(idempotency_key=r.idempotency_key, trace_id=call.trace_id) for r in records
                ]
                continue
            ordered: list[BatchItemResult] = sorted(answer.results, key=by_index)
            results.extend(ordered)
        return results

    async def ingest_document(
        self,
        document: DocumentIn | Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        trace_id: str | None = None,
    ) -> DocumentRecorded:
        call = self.document_call(document, idempotency_key or new_key(), trace_id)
        return DocumentRecorded.model_validate(await self._send(call))

    async def replay(
        self, receipt_id: str, *, at_position: int | None = None, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """POST /v1/receipts/{id}/replay: re-run a receipt under its frozen policy; the answer
        (integrity, diff, the replay receipt's id) as the server gives it. Keyed: a retry is
        answered, not replayed twice."""
        return await self._send(self.replay_call(receipt_id, idempotency_key, at_position))

    async def search(self, query: str, **options: Any) -> SearchAnswer:
        """POST /v1/search (the 2 s search timeout): the ledger runs and records the search."""
        return SearchAnswer.model_validate(await self._send(self.search_call(query, **options)))

    async def get_citation(self, citation_id: str) -> CitationAnswer:
        return CitationAnswer.model_validate(await self._send(self.citation_call(citation_id)))

    async def events(self, **filters: Any) -> AsyncIterator[EventsPage]:
        params = dict(filters)
        while True:
            page = EventsPage.model_validate(await self._send(self.events_call(params)))
            yield page
            if not page.next_cursor:
                return
            params["cursor"] = page.next_cursor

    async def latest_checkpoint(self) -> Seen:
        """As `Client.latest_checkpoint`: raises CheckpointMismatch on a rollback or fork."""
        try:
            answer = await self._send(self.latest_checkpoint_call())
        except NotFound as error:
            raise self.checkpoints.no_checkpoint(error) from None
        new = self.checkpoints.parse(str(answer["checkpoint"]["note"]))
        needed = self.checkpoints.proof_range(new)
        try:
            proof = self.proof_of(await self._send(self.consistency_call(*needed)), new) if needed else []
        except NotFound as error:
            raise self.checkpoints.no_tree(new, error) from None
        return self.checkpoints.accept(new, proof)

    async def receipts(self, **filters: Any) -> dict[str, Any]:
        """One page of GET /v1/receipts (filters as its query parameters; `cursor` for the next)."""
        return await self._send(self.receipts_call(filters))

    async def receipt(self, receipt_id: str, *, content: bool = False) -> dict[str, Any]:
        """GET /v1/receipts/{id}; `content=True`: the sealed fields in plain (audit.content; recorded)."""
        return await self._send(self.receipt_call(receipt_id, content=content))

    async def receipt_bundle(self, receipt_id: str, *, latest: bool = False) -> dict[str, Any]:
        bundle: dict[str, Any] = (await self._send(self.bundle_call(receipt_id, latest=latest)))["bundle"]
        return bundle

    async def keys(self) -> dict[str, Any]:
        return await self._send(self.keys_call())

    verify_bundle = staticmethod(verify_bundle)

    async def flush_spool(self, *, max_seconds: float | None = None) -> DrainReport:
        if self.spool is None:
            return DrainReport(0, 0, 0, 0.0, "no spool configured")
        loop = asyncio.get_running_loop()

        def deliver(records: Sequence[SpoolRecord]) -> list[ItemVerdict]:
            future = asyncio.run_coroutine_threadsafe(self._send(self.record_batch_call(records)), loop)
            return self.verdicts(BatchAnswer.model_validate(future.result()), len(records))

        return await asyncio.to_thread(self.spool.drain, deliver, max_seconds=max_seconds)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
