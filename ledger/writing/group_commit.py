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
from dataclasses import replace

from ledger.deadline import Deadline, DeadlineExceeded
from ledger.domain.entries import EventDraft, RecordedEvent
from ledger.domain.payloads import EventRejected
from ledger.writing.application import MAX_BATCH_EVENTS, Ledger, Write, WriteOutcome, prepare_all
from ledger.writing.collector import collector_paused
from ledger.writing.idempotency import IdempotentWrite
from ledger.writing.question_handover import QuestionHashes

# One caller's writes (one for a single request, many for a batch): committed in the same
# transaction, answered together.
_Request = tuple[list[Write], "Future[list[WriteOutcome]]"]


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
        deadline: Deadline | None = None,
        question_hashes: QuestionHashes | None = None,
    ) -> WriteOutcome:
        """Commit one caller's drafts (with its idempotency record and its receipt's question
        hashes, `ledger.writing.question_handover`); raises its error."""
        if len(drafts) > self.max_batch_events:
            raise EventRejected("events", f"at most {self.max_batch_events} events per request")
        if not drafts and idempotent is None:
            return WriteOutcome([], None)
        prepared = prepare_all(drafts, tenant_id=tenant_id)
        outcome = self.write_all([Write(prepared, idempotent, deadline, question_hashes)])[0]
        if outcome.error is not None:
            raise outcome.error
        return outcome

    def write_all(self, writes: Sequence[Write]) -> list[WriteOutcome]:
        """Commit several callers' writes (a batch request) in ONE transaction, each with
        its own outcome; never split, so at most `MAX_BATCH_EVENTS` events in all."""
        total = sum(len(write.prepared) for write in writes)
        if total > MAX_BATCH_EVENTS:
            raise EventRejected("events", f"at most {MAX_BATCH_EVENTS} events per batch")
        if not writes:
            return []
        # Every write gets a deadline (the caller's, else this committer's timeout): a
        # caller that stops waiting must know that the write will never commit after it.
        writes = [
            w if w.deadline is not None else replace(w, deadline=Deadline(self.timeout_s)) for w in writes
        ]
        future: Future[list[WriteOutcome]] = Future()
        self._queue.put((writes, future))
        deadlines = [write.deadline for write in writes if write.deadline is not None]
        try:
            return future.result(timeout=max(0.0, *(deadline.remaining() for deadline in deadlines)))
        except TimeoutError:
            if all([deadline.expire() for deadline in deadlines]):  # every one, no short cut
                raise DeadlineExceeded(max(deadline.seconds for deadline in deadlines)) from None
            return future.result()  # claimed: its transaction is running and its answer is owed

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            events = _events(first)
            item: _Request | None = None
            while events < self.max_batch_events:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)  # finish this batch, then stop
                    break
                if events + _events(item) > self.max_batch_events:
                    self._commit(batch)
                    batch, events = [], 0
                batch.append(item)
                events += _events(item)
            self._commit(batch)
            # Let go of the batch before waiting for the next one: held here, its writes,
            # entries and answers (~75 tracked objects per event) would still be alive when
            # the paused collector resumes, and its first young collection would walk them all.
            first = item = None
            batch = []

    def _commit(self, batch: list[_Request]) -> None:
        if not batch:
            return
        try:
            with collector_paused():
                outcomes = self.ledger.commit_writes([write for writes, _ in batch for write in writes])
        except Exception as exc:  # noqa: BLE001 - forwarded to every caller of the batch
            for _, future in batch:
                future.set_exception(exc)
            return
        self.batches += 1
        start = 0
        for writes, future in batch:
            future.set_result(outcomes[start : start + len(writes)])
            start += len(writes)

    def close(self) -> None:
        self._queue.put(None)
        self._writer.join(timeout=self.timeout_s)


def _events(request: _Request) -> int:
    return sum(len(write.prepared) for write in request[0])
