"""Two ledgers on one store (separate connection pools and in-memory heads, as two
worker processes have) appending at once: on PostgreSQL the sequencer lock makes
each batch's positions free when it is signed, so no batch is signed twice; on
SQLite writers still race and the loser re-signs. Either way the log is gap-free,
chained and holds every acknowledged event exactly once."""

from __future__ import annotations

import threading
from collections.abc import Callable

from ledger.domain.entries import RecordedEvent
from ledger.storage.audit import verify_store
from ledger.writing.application import Ledger
from tests.factories import TENANT, retrieval_draft


def test_two_ledgers_sequence_without_conflicts(open_ledger: Callable[..., Ledger], backend: str) -> None:
    ledgers = [open_ledger(), open_ledger()]
    acknowledged: list[RecordedEvent] = []
    lock = threading.Lock()

    def writer(ledger: Ledger, batch: int) -> None:
        for _ in range(40):
            events = ledger.append_batch([retrieval_draft(ledger) for _ in range(batch)], tenant_id=TENANT)
            with lock:
                acknowledged.extend(events)

    threads = [
        threading.Thread(target=writer, args=(ledger, n)) for ledger, n in zip(ledgers, (1, 3), strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if backend == "postgres":
        assert [ledger.conflicts for ledger in ledgers] == [0, 0]
    reader = open_ledger()
    stored = {event.event_id: event.position for event in reader.read()}
    assert reader.size == 1 + 40 * 4 == len(stored)
    assert all(stored[event.event_id] == event.position for event in acknowledged)
    reader.issue_checkpoint()
    report = verify_store(reader.store, reader.root_public_key, deep=True)
    assert report.ok, report.first_bad
