"""The synchronous client (httpx.Client): retries, the breaker, the spool."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx

from client.base import BatchEntry, Retrieval, Shared, as_retrieval, by_index
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


class Client(Shared):
    """A ledger client for one service. `Client(base_url, token, spool_dir=...)`."""

    def __init__(self, base_url: str, token: str, **settings: Any) -> None:
        super().__init__(ClientSettings(base_url=base_url.rstrip("/"), token=token, **settings))
        self._http = httpx.Client(base_url=self.settings.base_url, limits=httpx.Limits(max_connections=64))
        self._stop = threading.Event()
        self._drainer: threading.Thread | None = None
        if self.spool is not None and self.settings.drain_interval_s:
            self._drainer = threading.Thread(target=self._drain_loop, name="citeledger-spool", daemon=True)
            self._drainer.start()

    # -- one call, with the contract's retries ---------------------------------------------------
    def _exchange(self, call: Call) -> dict[str, Any]:
        settings = self.settings
        try:
            with self._http.stream(
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
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > settings.max_response_bytes:
                        raise too_large(call, settings, response.status_code)
                    chunks.append(chunk)
                return interpret(call, settings, response.status_code, response.headers, b"".join(chunks))
        except httpx.HTTPError as exc:
            raise transport_error(call, settings, exc) from None

    def _send(self, call: Call) -> dict[str, Any]:
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
                data = self._exchange(call)
            except LedgerError as error:
                if is_outage(error):
                    self.breaker.failure()
                else:
                    self.breaker.success()  # it answered: a refusal is not an outage
                if not error.retryable or attempt == self.settings.max_attempts:
                    raise
                time.sleep(delay_s(self.settings, attempt, error))
                continue
            self.breaker.success()
            return data
        raise AssertionError("unreachable")  # the loop returns or raises

    # -- writes ------------------------------------------------------------------------------
    def record_retrieval(
        self, retrieval: Retrieval, *, idempotency_key: str | None = None, trace_id: str | None = None
    ) -> RetrievalReceipt | Spooled:
        """Record one retrieval. When the ledger cannot take it now (and a spool is set) it is
        spooled — fsynced before this returns — and delivered later with the same key."""
        model = as_retrieval(retrieval)
        key = idempotency_key or new_key()
        call = self.retrieval_call(model, key, trace_id)
        try:
            return RetrievalReceipt.model_validate(self._send(call))
        except LedgerError as error:
            if self.spool is None or not should_spool(error):
                raise
            self.spool.tell_outage(self.settings.base_url, error.code)
            self.spool.append(self.spool_record(model, key, self.settings, call))
            return Spooled(idempotency_key=key, run_id=self.settings.run_id, trace_id=call.trace_id)

    def record_retrievals(
        self, entries: Sequence[BatchEntry], *, trace_id: str | None = None
    ) -> list[BatchItemResult | Spooled]:
        """Record many retrievals through POST /v1/retrievals/batch (1,000 per request): one
        result per entry, in order. Entries the ledger could not take now are spooled."""
        results: list[BatchItemResult | Spooled] = []
        for start in range(0, len(entries), 1000):
            items = self.batch_items(entries[start : start + 1000], trace_id)
            call = self.batch_call(items, trace_id)
            try:
                answer = BatchAnswer.model_validate(self._send(call))
            except LedgerError as error:
                if self.spool is None or not should_spool(error):
                    raise
                self.spool.tell_outage(self.settings.base_url, error.code)
                records = [
                    SpoolRecord(i.idempotency_key, i.retrieval.model_dump(mode="json", exclude_none=True),
                                self.settings.run_id, call.trace_id)
                    for i in items
                ]  # fmt: skip
                self.spool.append_many(records)
                results += [
                    Spooled(idempotency_key=r.idempotency_key, trace_id=call.trace_id) for r in records
                ]
                continue
            ordered: list[BatchItemResult] = sorted(answer.results, key=by_index)
            results.extend(ordered)
        return results

    def ingest_document(
        self,
        document: DocumentIn | Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        trace_id: str | None = None,
    ) -> DocumentRecorded:
        """Record a markdown document (not spooled: a service ingests, then cites)."""
        call = self.document_call(document, idempotency_key or new_key(), trace_id)
        return DocumentRecorded.model_validate(self._send(call))

    def replay(
        self, receipt_id: str, *, at_position: int | None = None, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """POST /v1/receipts/{id}/replay: re-run a receipt under its frozen policy; the answer
        (integrity, diff, the replay receipt's id) as the server gives it. Keyed: a retry is
        answered, not replayed twice."""
        return self._send(self.replay_call(receipt_id, idempotency_key, at_position))

    # -- reads -------------------------------------------------------------------------------
    def search(self, query: str, **options: Any) -> SearchAnswer:
        """POST /v1/search (the 2 s search timeout): the ledger runs and records the search."""
        return SearchAnswer.model_validate(self._send(self.search_call(query, **options)))

    def get_citation(self, citation_id: str) -> CitationAnswer:
        return CitationAnswer.model_validate(self._send(self.citation_call(citation_id)))

    def events(self, **filters: Any) -> Iterator[EventsPage]:
        """Pages of GET /v1/events, following `next_cursor` until the end."""
        params = dict(filters)
        while True:
            page = EventsPage.model_validate(self._send(self.events_call(params)))
            yield page
            if not page.next_cursor:
                return
            params["cursor"] = page.next_cursor

    def latest_checkpoint(self) -> Seen:
        """GET /v1/checkpoints/latest, trusted only if it extends the newest checkpoint this
        client has seen (consistency proof checked; then remembered beside the spool).
        Raises CheckpointMismatch when the server was rolled back or forked."""
        try:
            answer = self._send(self.latest_checkpoint_call())
        except NotFound as error:
            raise self.checkpoints.no_checkpoint(error) from None
        new = self.checkpoints.parse(str(answer["checkpoint"]["note"]))
        needed = self.checkpoints.proof_range(new)
        try:
            proof = self.proof_of(self._send(self.consistency_call(*needed)), new) if needed else []
        except NotFound as error:
            raise self.checkpoints.no_tree(new, error) from None
        return self.checkpoints.accept(new, proof)

    def receipts(self, **filters: Any) -> dict[str, Any]:
        """One page of GET /v1/receipts (filters as its query parameters; `cursor` for the next)."""
        return self._send(self.receipts_call(filters))

    def receipt(self, receipt_id: str, *, content: bool = False) -> dict[str, Any]:
        """GET /v1/receipts/{id}; `content=True` asks for the sealed fields in plain
        (scope `audit.content`; the server records the read)."""
        return self._send(self.receipt_call(receipt_id, content=content))

    def receipt_bundle(self, receipt_id: str, *, latest: bool = False) -> dict[str, Any]:
        """The receipt's portable bundle (check it with `verify_bundle` and the root key)."""
        bundle: dict[str, Any] = self._send(self.bundle_call(receipt_id, latest=latest))["bundle"]
        return bundle

    def keys(self) -> dict[str, Any]:
        return self._send(self.keys_call())

    verify_bundle = staticmethod(verify_bundle)

    # -- the spool ---------------------------------------------------------------------------
    def _deliver(self, records: Sequence[SpoolRecord]) -> list[ItemVerdict]:
        answer = BatchAnswer.model_validate(self._send(self.record_batch_call(records)))
        return self.verdicts(answer, len(records))

    def flush_spool(self, *, max_seconds: float | None = None) -> DrainReport:
        """Deliver what the spool holds, in order, through the batch endpoint."""
        if self.spool is None:
            return DrainReport(0, 0, 0, 0.0, "no spool configured")
        return self.spool.drain(self._deliver, max_seconds=max_seconds)

    def _drain_loop(self) -> None:
        assert self.settings.drain_interval_s is not None
        while not self._stop.wait(self.settings.drain_interval_s):
            if self.breaker.state == "open":
                continue
            try:
                self.flush_spool(max_seconds=self.settings.drain_interval_s * 4)
            except Exception:  # noqa: BLE001, S112 - the records stay; the next round tries again
                continue

    def close(self) -> None:
        self._stop.set()
        if self._drainer is not None:
            self._drainer.join(timeout=30)
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
