"""The client, as async code: the source `scripts/gen_sync_client.py` turns into the
synchronous `client/_sync/client.py` with unasync (edit here, then regenerate). Calls,
answers, retry and breaker decisions, spool bookkeeping and the checkpoint check are the
sans-I/O core's (`client/_core/`); this drives them over httpx, and `client/_io.py` does
what each flavour does its own way (waiting, file work, background delivery)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx

from client._core.calls import BatchEntry, ClientCore, Retrieval, as_retrieval
from client._core.http import Answer, Call, ClientSettings, new_key
from client._core.retry import Attempts
from client._io import AsyncDrainer, AsyncRuntime, transport_error
from client.checkpoints import CheckpointMemory, Seen
from client.errors import LedgerError, NotFound
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
from client.spool import DrainReport, ItemVerdict, Spool, SpoolRecord
from client.verify import verify_bundle


class AsyncClient(ClientCore):
    """A ledger client for one service. `AsyncClient(base_url, token, spool_dir=...)`."""

    def __init__(self, base_url: str, token: str, **settings: Any) -> None:
        settings.setdefault("drain_interval_s", AsyncRuntime.drain_interval_s)
        config = ClientSettings(base_url=base_url.rstrip("/"), token=token, **settings)
        spool = Spool(config.spool_dir) if config.spool_dir else None
        super().__init__(config, spool, CheckpointMemory(config.spool_dir, config.log_vkeys))
        self._http = httpx.AsyncClient(base_url=config.base_url, limits=httpx.Limits(max_connections=64))
        interval = config.drain_interval_s if spool is not None else None
        self._drainer = AsyncDrainer(self.flush_spool, self.breaker, interval)

    # -- one call, with the contract's retries ---------------------------------------------------
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
                answer = Answer(call, settings, response.status_code, response.headers)
                async for chunk in response.aiter_bytes():
                    answer.feed(chunk)
                return answer.data()
        except httpx.HTTPError as exc:
            raise transport_error(call, settings, exc) from None

    async def _send(self, call: Call) -> dict[str, Any]:
        attempts = Attempts(self.settings, self.breaker, call)
        while True:
            attempts.start()
            try:
                data = await self._exchange(call)
            except LedgerError as error:
                wait = attempts.failed(error)
                if wait is None:
                    raise
                await AsyncRuntime.sleep(wait)
                continue
            attempts.succeeded()
            return data

    # -- writes ------------------------------------------------------------------------------
    async def record_retrieval(
        self, retrieval: Retrieval, *, idempotency_key: str | None = None, trace_id: str | None = None
    ) -> RetrievalReceipt | Spooled:
        """Record one retrieval. When the ledger cannot take it now (and a spool is set) it is
        spooled — fsynced before this returns — and delivered later with the same key."""
        model = as_retrieval(retrieval)
        key = idempotency_key or new_key()
        call = self.retrieval_call(model, key, trace_id)
        try:
            return RetrievalReceipt.model_validate(await self._send(call))
        except LedgerError as error:
            spool = self.spool_for(error)
            if spool is None:
                raise
            record = self.spool_record(model, key, call)
            await AsyncRuntime.offload(spool.append, record)
            return self.spooled(record)

    async def record_retrievals(
        self, entries: Sequence[BatchEntry], *, trace_id: str | None = None
    ) -> list[BatchItemResult | Spooled]:
        """Record many retrievals through POST /v1/retrievals/batch (1,000 per request): one
        result per entry, in order. Entries the ledger could not take now are spooled."""
        results: list[BatchItemResult | Spooled] = []
        for start in range(0, len(entries), 1000):
            items = self.batch_items(entries[start : start + 1000], trace_id)
            call = self.batch_call(items, trace_id)
            try:
                answer = BatchAnswer.model_validate(await self._send(call))
            except LedgerError as error:
                spool = self.spool_for(error)
                if spool is None:
                    raise
                records = self.batch_records(items, call)
                await AsyncRuntime.offload(spool.append_many, records)
                results += self.batch_spooled(records)
                continue
            results += self.in_order(answer)
        return results

    async def ingest_document(
        self,
        document: DocumentIn | Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        trace_id: str | None = None,
    ) -> DocumentRecorded:
        """Record a markdown document (not spooled: a service ingests, then cites)."""
        call = self.document_call(document, idempotency_key or new_key(), trace_id)
        return DocumentRecorded.model_validate(await self._send(call))

    async def replay(
        self, receipt_id: str, *, at_position: int | None = None, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """POST /v1/receipts/{id}/replay: re-run a receipt under its frozen policy; the answer
        (integrity, diff, the replay receipt's id) as the server gives it. Keyed: a retry is
        answered, not replayed twice."""
        return await self._send(self.replay_call(receipt_id, idempotency_key, at_position))

    # -- reads -------------------------------------------------------------------------------
    async def search(self, query: str, **options: Any) -> SearchAnswer:
        """POST /v1/search (the 2 s search timeout): the ledger runs and records the search."""
        return SearchAnswer.model_validate(await self._send(self.search_call(query, **options)))

    async def get_citation(self, citation_id: str) -> CitationAnswer:
        return CitationAnswer.model_validate(await self._send(self.citation_call(citation_id)))

    async def events(self, **filters: Any) -> AsyncIterator[EventsPage]:
        """Pages of GET /v1/events, following `next_cursor` until the end."""
        params = dict(filters)
        while True:
            page = EventsPage.model_validate(await self._send(self.events_call(params)))
            yield page
            if not self.next_page(params, page.next_cursor):
                return

    async def latest_checkpoint(self) -> Seen:
        """GET /v1/checkpoints/latest, trusted only if it extends the newest checkpoint this
        client has seen (consistency proof checked; then remembered beside the spool).
        Raises CheckpointMismatch when the server was rolled back or forked."""
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
        """GET /v1/receipts/{id}; `content=True` asks for the sealed fields in plain
        (scope `audit.content`; the server records the read)."""
        return await self._send(self.receipt_call(receipt_id, content=content))

    async def receipt_bundle(self, receipt_id: str, *, latest: bool = False) -> dict[str, Any]:
        """The receipt's portable bundle (check it with `verify_bundle` and the root key)."""
        bundle: dict[str, Any] = (await self._send(self.bundle_call(receipt_id, latest=latest)))["bundle"]
        return bundle

    async def keys(self) -> dict[str, Any]:
        return await self._send(self.keys_call())

    verify_bundle = staticmethod(verify_bundle)

    # -- the spool ---------------------------------------------------------------------------
    async def _deliver(self, records: Sequence[SpoolRecord]) -> list[ItemVerdict]:
        answer = BatchAnswer.model_validate(await self._send(self.record_batch_call(records)))
        return self.verdicts(answer, len(records))

    async def flush_spool(self, *, max_seconds: float | None = None) -> DrainReport:
        """Deliver what the spool holds, in order, through the batch endpoint."""
        if self.spool is None:
            return DrainReport(0, 0, 0, 0.0, "no spool configured")
        return await AsyncRuntime.drain(self.spool, self._deliver, max_seconds)

    async def aclose(self) -> None:
        self._drainer.stop()
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
