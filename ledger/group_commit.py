"""Group commit: concurrent writers share one transaction.

Each caller's drafts are validated in the caller's thread (so a bad request
fails alone and writes nothing); a single writer thread then takes everything
queued and commits it in one transaction, idempotency records included. While
one transaction is in flight the next batch accumulates, so throughput grows
with concurrency instead of stopping at one commit per request. A caller
returns only after its entries are committed.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from concurrent.futures import Future

from ledger.application import MAX_BATCH_EVENTS, Ledger, Write, WriteOutcome, prepare_all
from ledger.entries import EventDraft, RecordedEvent
from ledger.events import EventRejected
from ledger.idempotency import IdempotentWrite

_Request = tuple[Write, "Future[WriteOutcome]"]


class GroupCommitter:
    def __init__(self, ledger: Ledger, *, max_batch_events: int = 500, timeout_s: float = 30.0) -> None:
        self.ledger = ledger
        self.max_batch_events = min(max_batch_events, MAX_BATCH_EVENTS)
        self.timeout_s = timeout_s
        self._queue: queue.Queue[_Request | None] = queue.Queue()
        self._writer = threading.Thread(target=self._run, name="citeledger-group-commit", daemon=True)
        self._writer.start()
        self.batches = 0  # transactions committed, for metrics and the benchmark

    def submit(self, drafts: Sequence[EventDraft], *, tenant_id: str | None = None) -> list[RecordedEvent]:
        return self.write(drafts, tenant_id=tenant_id).events

    def write(
        self,
        drafts: Sequence[EventDraft],
        *,
        tenant_id: str | None = None,
        idempotent: IdempotentWrite | None = None,
    ) -> WriteOutcome:
        """Commit one caller's drafts (with its idempotency record); raises its error."""
        if len(drafts) > self.max_batch_events:
            raise EventRejected("events", f"at most {self.max_batch_events} events per request")
        if not drafts and idempotent is None:
            return WriteOutcome([], None)
        future: Future[WriteOutcome] = Future()
        self._queue.put((Write(prepare_all(drafts, tenant_id=tenant_id), idempotent), future))
        outcome = future.result(timeout=self.timeout_s)
        if outcome.error is not None:
            raise outcome.error
        return outcome

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            events = len(first[0].prepared)
            while events < self.max_batch_events:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)  # finish this batch, then stop
                    break
                if events + len(item[0].prepared) > self.max_batch_events:
                    self._commit(batch)
                    batch, events = [], 0
                batch.append(item)
                events += len(item[0].prepared)
            self._commit(batch)

    def _commit(self, batch: list[_Request]) -> None:
        if not batch:
            return
        try:
            outcomes = self.ledger.commit_writes([write for write, _ in batch])
        except Exception as exc:  # noqa: BLE001 - forwarded to every caller of the batch
            for _, future in batch:
                future.set_exception(exc)
            return
        self.batches += 1
        for (_, future), outcome in zip(batch, outcomes, strict=True):
            future.set_result(outcome)

    def close(self) -> None:
        self._queue.put(None)
        self._writer.join(timeout=self.timeout_s)
