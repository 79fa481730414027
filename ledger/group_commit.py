"""Group commit: concurrent writers share one transaction.

Each caller's drafts are validated in the caller's thread (so a bad request
fails alone and writes nothing); a single writer thread then takes everything
queued and commits it in one transaction. While one transaction is in
flight the next batch accumulates, so throughput grows with concurrency
instead of stopping at one fsync per request. A caller returns only after
its entries are committed.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from concurrent.futures import Future

from ledger.application import MAX_BATCH_EVENTS, Ledger
from ledger.entries import EventDraft, PreparedDraft, RecordedEvent, prepare
from ledger.events import EventRejected

_Request = tuple[list[PreparedDraft], "Future[list[RecordedEvent]]"]


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
        if not drafts:
            return []
        if len(drafts) > self.max_batch_events:
            raise EventRejected("events", f"at most {self.max_batch_events} events per request")
        prepared = []
        for index, draft in enumerate(drafts):
            if tenant_id is not None and draft.tenant_id != tenant_id:
                raise EventRejected(f"events[{index}].tenant_id", "event is for another tenant")
            prepared.append(prepare(draft))
        future: Future[list[RecordedEvent]] = Future()
        self._queue.put((prepared, future))
        return future.result(timeout=self.timeout_s)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            events = len(first[0])
            while events < self.max_batch_events:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)  # finish this batch, then stop
                    break
                if events + len(item[0]) > self.max_batch_events:
                    self._commit(batch)
                    batch, events = [], 0
                batch.append(item)
                events += len(item[0])
            self._commit(batch)

    def _commit(self, batch: list[_Request]) -> None:
        if not batch:
            return
        prepared = [draft for drafts, _ in batch for draft in drafts]
        try:
            committed = self.ledger.append_prepared(prepared)
        except Exception as exc:  # noqa: BLE001 - forwarded to every caller of the batch
            for _, future in batch:
                future.set_exception(exc)
            return
        self.batches += 1
        offset = 0
        for drafts, future in batch:
            future.set_result(committed[offset : offset + len(drafts)])
            offset += len(drafts)

    def close(self) -> None:
        self._queue.put(None)
        self._writer.join(timeout=self.timeout_s)
