"""Two ledgers on one store (separate connection pools and in-memory heads, as two
worker processes have) appending at once: on PostgreSQL the sequencer lock makes
each batch's positions free when it is signed, so no batch is signed twice; on
SQLite writers still race and the loser re-signs. Either way the log is gap-free,
chained and holds every acknowledged event exactly once."""

from __future__ import annotations

import threading
from collections.abc import Callable

from ledger.application import Ledger
from ledger.audit import verify_store
from ledger.entries import RecordedEvent
from ledger.group_commit import GroupCommitter
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


def test_group_commit_writers_take_turns(open_ledger: Callable[..., Ledger], backend: str) -> None:
    ledger = open_ledger()
    seen: list[int] = []
    ledger.on_commit(seen.append)
    committer = GroupCommitter(ledger)
    try:
        assert len(committer._writers) == (2 if backend == "postgres" else 1)
        results: list[list[RecordedEvent]] = []

        def client() -> None:
            for _ in range(10):
                results.append(committer.submit([retrieval_draft(ledger)], tenant_id=TENANT))

        clients = [threading.Thread(target=client) for _ in range(8)]
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join()
    finally:
        committer.close()
    positions = sorted(batch[0].position for batch in results)
    assert positions == list(range(2, 82))
    # Every caller returned after a listener had seen its position.
    assert max(seen) == 81 and all(any(head >= p for head in seen) for p in positions)
    assert not any(writer.is_alive() for writer in committer._writers)
