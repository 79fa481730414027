"""Group commit: concurrent writers share one transaction.

Each caller's drafts are validated in the caller's thread (so a bad request
fails alone and writes nothing); a single writer thread then takes everything
queued and commits it in one transaction. While one transaction is in
flight the next batch accumulates, so throughput grows with concurrency
instead of stopping at one fsync per request. A caller returns only after
its entries are committed and the ledger's commit listeners have run.

On PostgreSQL two writer threads take turns: while one runs the commit
listeners of its batch (the API's catalog index, a few round trips per
entry) the other drains the queue and sequences the next batch, so the
listeners are not on the sequencing path; every listener catches up to the
log's end, so a caller still reads its own writes. On SQLite the listeners
write to the same file as the next batch would, so one thread does both.
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
    def __init__(
        self,
        ledger: Ledger,
        *,
        max_batch_events: int = 500,
        timeout_s: float = 30.0,
        writers: int | None = None,
    ) -> None:
        self.ledger = ledger
        self.max_batch_events = min(max_batch_events, MAX_BATCH_EVENTS)
        self.timeout_s = timeout_s
        self._queue: queue.Queue[_Request | None] = queue.Queue()
        self._carry: _Request | None = None  # taken but did not fit the last batch
        # Writers take turns: one drains the queue and sequences a batch while the
        # previous one runs the commit listeners and answers its callers. On SQLite the
        # listeners write the same file as the next batch, so one writer does both.
        count = writers if writers is not None else (2 if ledger.store.serialises_appends else 1)
        self._overlap = count > 1
        self._turn = threading.Lock()
        self._writers = [
            threading.Thread(target=self._run, name=f"citeledger-group-commit-{n}", daemon=True)
            for n in range(count)
        ]
        self.batches = 0  # transactions committed, for metrics and the benchmark
        for writer in self._writers:
            writer.start()

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

    def _take(self) -> list[_Request] | None:
        """The next batch: everything queued, up to `max_batch_events`; None to stop."""
        first: _Request | None = self._carry
        if first is not None:
            self._carry = None
        else:
            first = self._queue.get()
        if first is None:
            self._queue.put(None)  # the other writers stop too
            return None
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
                self._carry = item
                break
            batch.append(item)
            events += len(item[0])
        return batch

    def _run(self) -> None:
        while True:
            with self._turn:
                batch = self._take()
                if batch is None:
                    return
                committed = self._commit(batch)
            if committed is None:
                continue
            if self._overlap:
                self.ledger.notify_committed(committed)
            offset = 0
            for drafts, future in batch:
                future.set_result(committed[offset : offset + len(drafts)])
                offset += len(drafts)

    def _commit(self, batch: list[_Request]) -> list[RecordedEvent] | None:
        prepared = [draft for drafts, _ in batch for draft in drafts]
        try:
            committed = self.ledger.append_prepared(prepared, notify=not self._overlap)
        except Exception as exc:  # noqa: BLE001 - forwarded to every caller of the batch
            for _, future in batch:
                future.set_exception(exc)
            return None
        self.batches += 1
        return committed

    def close(self) -> None:
        self._queue.put(None)
        for writer in self._writers:
            writer.join(timeout=self.timeout_s)
