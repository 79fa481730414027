"""The PostgreSQL sequencer's critical section (issue 28): entries are signed before the lock
at the head as it stands; a head moved meanwhile rolls the write back to sign again before the
lock, and on that retry is caught up with and signed under it; the hold is measured by the
adapter; read models follow right after the commit. And the collector pause that batches run
under."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from bootstrap import read_side
from ledger.storage.audit import verify_store
from ledger.writing.application import Ledger, Notification, Write, WriteOutcome, prepare_all
from ledger.writing.collector import collector_paused
from ledger.writing.idempotency import IdempotencyKey, IdempotentWrite, lookup
from tests.factories import TENANT, retrieval_draft


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)  # SQLite has no sequencer lock
def test_a_worker_writing_while_another_holds_the_sequencer_signs_at_the_head_it_leaves(
    open_ledger: Callable[..., Ledger],
) -> None:
    first, second = open_ledger(), open_ledger()
    key = IdempotencyKey(TENANT, "key-2", "fingerprint-2")
    holds: list[float] = []
    first.store.adapter.sequencer_holds = holds  # type: ignore[attr-defined]
    results: dict[str, Any] = {}

    def second_writes() -> None:
        # Keyed: its record, inserted before the lock at the positions first signed, is replaced.
        drafts = prepare_all([retrieval_draft(second) for _ in range(3)], tenant_id=TENANT)
        answer = IdempotentWrite(key, lambda events: (1, {"position": events[0].position}))
        results["second"] = second.commit_writes([Write(drafts, answer)])[0].events

    started: list[threading.Thread] = []

    def while_first_holds(cursor: Any, committed: Sequence[Notification]) -> None:
        # Under `first`'s sequencer: `second` catches up, signs at the head it sees, then waits.
        if not started:
            thread = threading.Thread(target=second_writes)
            started.append(thread)
            thread.start()
            time.sleep(0.5)

    first.in_transaction(while_first_holds)
    mine = first.append_batch([retrieval_draft(first) for _ in range(2)], tenant_id=TENANT)
    started[0].join(timeout=30)
    theirs = results["second"]
    assert [e.position for e in mine] == [2, 3]
    assert [e.position for e in theirs] == [4, 5, 6]  # signed again at the head `first` left
    assert theirs[0].envelope["prev_hash"] == mine[-1].leaf_hash.hex()
    assert second.conflicts == 0  # no position was taken twice: the lock decided
    assert len(holds) == 1 and 0.5 <= holds[0] < 30  # the hold spans the hook's wait
    record = lookup(second.store, TENANT, key.key)
    assert record is not None and record.body == {"position": 4}  # not the 2 it was first signed at
    report = verify_store(second.store, second.root_public_key, deep=True)
    assert report.ok, report.first_bad


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)  # SQLite has no sequencer lock
def test_a_head_that_moves_again_on_the_retry_is_caught_up_under_the_sequencer(
    open_ledger: Callable[..., Ledger],
) -> None:
    first, second = open_ledger(), open_ledger()
    adapter: Any = second.store.adapter
    take = adapter.take_sequencer
    heads: list[int] = []

    def first_commits_before(cursor: Any, stream_id: Any, head: int, stored: Any) -> list[int] | None:
        # `second` has signed at `head`; `first` commits there before `second` takes the lock.
        heads.append(head)
        if len(heads) <= 2:
            first.append(retrieval_draft(first), tenant_id=TENANT)
        return take(cursor, stream_id, head, stored)  # type: ignore[no-any-return]

    adapter.take_sequencer = first_commits_before
    key = IdempotencyKey(TENANT, "key-3", "fingerprint-3")
    # A bulk batch (`copy_from_rows` and more): its rows go in by COPY after the check.
    drafts = prepare_all([retrieval_draft(second) for _ in range(adapter.copy_from_rows)], tenant_id=TENANT)
    answer = IdempotentWrite(key, lambda events: (1, {"position": events[0].position}))
    theirs = second.commit_writes([Write(drafts, answer)])[0].events
    # Rolled back once and signed again before the lock; then signed again under it.
    assert heads == [1, 2]
    assert [e.position for e in theirs] == list(range(4, 4 + len(drafts)))
    at_3 = second.get(3)  # what `first` committed last
    assert at_3 is not None and theirs[0].envelope["prev_hash"] == at_3.leaf_hash.hex()
    assert second.conflicts == 0
    record = lookup(second.store, TENANT, key.key)
    assert record is not None and record.body == {"position": 4}
    report = verify_store(second.store, second.root_public_key, deep=True)
    assert report.ok, report.first_bad


def test_read_models_follow_each_commit_on_both_stores(open_ledger: Callable[..., Ledger]) -> None:
    ledger = open_ledger()
    side = read_side(ledger)
    events = ledger.append_batch([retrieval_draft(ledger) for _ in range(5)], tenant_id=TENANT)
    # Before the append returned, every read model took the entries (in the write transaction
    # on SQLite, in its own right after the commit on PostgreSQL).
    assert all(lag.lag == 0 for lag in side.runner.lag()), side.runner.lag()
    assert side.runner.applied_position() == events[-1].position


def test_the_collector_pauses_while_any_batch_runs() -> None:
    assert gc.isenabled()
    inside = threading.Event()
    release = threading.Event()

    def other_batch() -> None:
        with collector_paused():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=other_batch)
    with collector_paused():
        assert not gc.isenabled()
        thread.start()
        inside.wait(10)
    assert not gc.isenabled()  # the other batch still runs
    release.set()
    thread.join(10)
    assert gc.isenabled()


def test_a_disabled_collector_stays_disabled() -> None:
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)  # the early key check is PostgreSQL's
def test_a_key_recorded_while_another_worker_signs_is_answered_from_its_record(
    open_ledger: Callable[..., Ledger],
) -> None:
    first, second = open_ledger(), open_ledger()
    key = IdempotencyKey(TENANT, "key-1", "fingerprint-1")

    def keyed(ledger: Ledger) -> Write:
        drafts = prepare_all([retrieval_draft(ledger)], tenant_id=TENANT)
        return Write(drafts, IdempotentWrite(key, lambda events: (1, {"position": events[0].position})))

    results: dict[str, WriteOutcome] = {}
    started: list[threading.Thread] = []

    def while_first_holds(cursor: Any, committed: Sequence[Notification]) -> None:
        # `second` checks the key before `first` commits it, then meets it.
        if not started:
            thread = threading.Thread(
                target=lambda: results.update(second=second.commit_writes([keyed(second)])[0])
            )
            started.append(thread)
            thread.start()
            time.sleep(0.5)

    first.in_transaction(while_first_holds)
    mine = first.commit_writes([keyed(first)])[0]
    started[0].join(timeout=30)
    theirs = results["second"]
    assert mine.error is None and mine.answer == (1, {"position": 2})
    assert theirs.error is None and theirs.events == []  # nothing written a second time
    assert theirs.answer == (1, {"position": 2, "dedup": True})
    reader = open_ledger()
    assert reader.size == 2  # genesis and the one keyed entry
