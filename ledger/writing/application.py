"""The Ledger: appends signed entries to one eventsourcing stream and keeps
the Merkle tree and checkpoints over it.

Concurrency: the log is a single stream whose version is the log position,
so two writers (threads or processes) racing for the same position meet the
store's uniqueness constraint; the loser re-reads the head and re-signs.
Within a process a lock serialises appends, and `append_batch` is the group
commit: many events, one transaction, all or nothing.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Sequence
from typing import Any

import orjson
from eventsourcing.persistence import StoredEvent

from ledger.config import LedgerConfig, parse_witnesses
from ledger.domain.entries import (
    GENESIS_PREV_HASH,
    EventDraft,
    PreparedDraft,
    RecordedEvent,
    sign_event,
    utc_now,
)
from ledger.domain.payloads import EventRejected
from ledger.storage.adapters import IdempotencyRecord
from ledger.storage.log_repeats import log_failure
from ledger.storage.store import EVENT_TOPIC_PREFIX, LEDGER_STREAM_ID, Store
from ledger.storage.witnessed import WitnessedSizes
from ledger.tlog.checkpoints import CheckpointRecord, origin_for
from ledger.tlog.signing import KeyDirectory, SigningKey
from ledger.writing import idempotency
from ledger.writing.checkpointing import Checkpointing
from ledger.writing.collector import collector_paused
from ledger.writing.integrity import RepairRecords
from ledger.writing.integrity_hold import IntegrityHolding
from ledger.writing.integrity_records import HoldState
from ledger.writing.key_rotation import KeyRotation
from ledger.writing.question_handover import WordHasher, handed_over
from ledger.writing.sealing import Sealer, shared_data_keys
from ledger.writing.witnessing import Cosigner
from ledger.writing.writes import (
    _DUPLICATE_ERRORS,
    _SYNC_PAGE,
    MAX_APPEND_ATTEMPTS,
    MAX_BATCH_EVENTS,
    AppendConflict,
    CommitListener,
    LedgerIntegrityError,
    Notification,
    TransactionHook,
    Write,
    WriteOutcome,
    _AlreadyRecorded,
    _HeadMoved,
    _Late,
    _repeat_of,
    _replayed,
    _too_late,
    keyed_answers,
    prepare_all,
)

# Where the rest of the code has always found these (they live in `writes`).
__all__ = [
    "MAX_BATCH_EVENTS",
    "AppendConflict",
    "Ledger",
    "LedgerIntegrityError",
    "Notification",
    "Write",
    "WriteOutcome",
    "envelope_of",
    "prepare_all",
]

log = logging.getLogger("citeledger.ledger")


class Ledger(Checkpointing, KeyRotation, IntegrityHolding):
    """The log: reads and proofs (`log_reader`), the integrity hold and repair
    (`integrity_hold`), key rotation (`key_rotation`), checkpoints and their cosignatures
    (`checkpointing`, `cosigning`); the sequencer (append, group commit) lives here."""

    def __init__(self, config: LedgerConfig) -> None:
        self.config = config
        self.keydir = KeyDirectory(config.keys_dir)
        self.keydir.ensure()
        self.root_public_key = self.keydir.root_public_key()
        self.origin = origin_for(self.root_public_key)
        self.store = Store(config)
        self.recorder: Any = self.store.recorder
        self.store.create_tables(*idempotency.ddl(self.store))
        self.repairs = RepairRecords(self.store)
        self.witnessed = WitnessedSizes(self.store)
        # Evidence found on opening (or reported by a witness, or by any process sharing
        # the store) that the log was cut back or rewritten, kept in the store
        # (`ledger.writing.integrity_records`): while any is unanswered, writes are refused.
        self.hold_state = HoldState(self.store, self.repairs)
        self.data_keys = shared_data_keys(self.store, self.keydir.master_key())
        self.sealer = Sealer(self.data_keys)
        self.word_hasher = WordHasher(self.keydir.master_key())  # question words (the index's)

        self._lock = threading.RLock()
        self._checkpoint_lock = threading.Lock()
        # The Merkle tree lives in tiles beside the log (ledger/storage/tree_store.py);
        # memory holds its right edge only, so opening costs O(log n + tail).
        # (`self.tree` is set by _open_log)
        self._head_hash = GENESIS_PREV_HASH
        self.public_keys = {}
        self.key_introduced_at = {}
        self._signing_kid: str | None = None
        self._signing_key: SigningKey | None = None
        self._checkpoints: list[CheckpointRecord] = []
        self._appended = threading.Event()
        self._closed = threading.Event()
        self._commit_listeners: list[CommitListener] = []
        self._transaction_hooks: list[TransactionHook] = []
        self.conflicts = 0  # batches signed for positions another writer took (re-signed)

        self._open_log()
        if self.size == 0 and not self.findings:
            self._append_genesis()
        self.signing_key()  # fail at start, not at the first append, on a bad key file
        endpoints = parse_witnesses(config.witnesses)
        self.cosigner = (
            Cosigner(
                endpoints,
                self.witnessed,
                consistency_proof=self.consistency_proof,
                log_size=self.sync,  # what other processes appended counts too
                on_finding=self.hold,
            )
            if endpoints
            else None
        )
        # Checkpoints load lazily (`checkpoints()`); opening reads none of them.
        self._checkpointer: threading.Thread | None = None
        if config.run_checkpointer:
            self._checkpointer = threading.Thread(
                target=self._checkpoint_loop, name="citeledger-checkpointer", daemon=True
            )
            self._checkpointer.start()

    # -- appending -------------------------------------------------------------
    def append(self, draft: EventDraft, *, tenant_id: str | None = None) -> RecordedEvent:
        return self.append_batch([draft], tenant_id=tenant_id)[0]

    def append_batch(
        self, drafts: Sequence[EventDraft], *, tenant_id: str | None = None
    ) -> list[RecordedEvent]:
        """Group commit: validate all, then sign and insert in one transaction.

        `tenant_id` binds the batch to the caller's tenant: an event for any
        other tenant is refused. Nothing is written unless every event is valid.
        """
        if not drafts:
            return []
        return self.append_prepared(prepare_all(drafts, tenant_id=tenant_id))

    def on_commit(self, listener: CommitListener) -> None:
        """Call `listener(notifications)` with each local commit's entries (and their
        notification ids), before the append returns: how embedded projections and
        write-side lookups follow the log without re-reading what was just written."""
        self._commit_listeners.append(listener)

    def in_transaction(self, hook: TransactionHook) -> None:
        """Call `hook(cursor, notifications)` inside each commit's transaction, after its
        entries are inserted: what must commit atomically with them (read models applied in
        the same transaction, so one commit per batch). A hook isolates its own failures
        (savepoints); an exception it lets through rolls the whole batch back."""
        self._transaction_hooks.append(hook)

    def append_prepared(self, prepared: Sequence[PreparedDraft]) -> list[RecordedEvent]:
        """Commit drafts already validated by `ledger.domain.entries.prepare` (group commit path)."""
        if len(prepared) > MAX_BATCH_EVENTS:
            raise EventRejected("events", f"at most {MAX_BATCH_EVENTS} events per batch")
        outcome = self.commit_writes([Write(list(prepared))])[0]
        if outcome.error is not None:
            raise outcome.error
        return outcome.events

    def commit_writes(self, writes: Sequence[Write]) -> list[WriteOutcome]:
        """Sign and insert several writes in ONE transaction, with the idempotency
        records of those that carry a key; a write whose key is already recorded is
        answered from its record and writes nothing."""
        self._refuse_if_held()
        # A batch's entries carry their signer's envelopes (payload trees) until the caller
        # drops them: with the collector running, its young collections would walk and
        # promote them while the batch is written (measured +40 µs/event on PostgreSQL).
        # The question hashes handed over live for this call only, whatever its end.
        with collector_paused(), handed_over(write.question_hashes for write in writes):
            outcomes, committed = self._commit_locked(writes)
            if committed:
                for listener in self._commit_listeners:
                    try:
                        listener(committed)
                    except Exception as exc:  # noqa: BLE001 - committed; a reader's failure is its own
                        log_failure(log, "commit listener failed", exc)
        return outcomes

    def _commit_locked(
        self, writes: Sequence[Write], *, only_at: int | None = None
    ) -> tuple[list[WriteOutcome], list[Notification]]:
        """`only_at` gives up (no outcome events) instead of moving on when that
        position is taken (the genesis entry exists once)."""
        outcomes: dict[int, WriteOutcome] = {}
        for index, write in enumerate(writes):
            if write.deadline is not None and write.deadline.lapsed():
                outcomes[index] = _too_late(write)
        # A key repeated within the batch: the first occurrence writes, the others
        # are answered from it after the commit.
        first_of_key: dict[tuple[str, str], int] = {}
        repeats: dict[int, int] = {}
        for index, write in enumerate(writes):
            if write.idempotent is not None and index not in outcomes:
                ident = (write.idempotent.key.tenant_id, write.idempotent.key.key)
                if ident in first_of_key:
                    repeats[index] = first_of_key[ident]
                else:
                    first_of_key[ident] = index
        store = self.store
        head_moved = False  # since this call's first attempt: sign again under the sequencer
        with self._lock:
            for attempt in range(MAX_APPEND_ATTEMPTS):
                pending = [i for i in range(len(writes)) if i not in outcomes and i not in repeats]
                if not pending:
                    break
                keyed = {i: writes[i].idempotent for i in pending if writes[i].idempotent is not None}
                try:
                    with store.adapter.append_transaction() as cursor:
                        events, stored, answers, inserted = self._sequence(
                            cursor, writes, pending, keyed, bulk_insert=only_at is None, resign=head_moved
                        )
                        if only_at is not None and self.size + 1 != only_at:
                            return [WriteOutcome([], None)], []
                        if inserted is not None:
                            notification_ids = inserted
                        else:
                            notification_ids = store.insert_log(cursor, stored) if stored else []
                        if keyed:
                            if not store.adapter.serialises_appends:
                                # Under SQLite's write lock (taken by the log insert): a key
                                # another writer recorded first.
                                self._settle(cursor, keyed)
                                store.adapter.idempotency_insert(
                                    cursor, [record for _, record in answers.values()]
                                )
                            for i, (answer, _) in answers.items():
                                outcomes[i] = WriteOutcome(events[i], answer)
                        # Before COMMIT (and before the read-model hooks touch anything), each
                        # write claims its caller's deadline: one already answered "timed out"
                        # is rolled back, and the others are committed without it.
                        late = [i for i in pending if (d := writes[i].deadline) is not None and not d.claim()]
                        if late:
                            raise _Late(late)
                        if stored:
                            flat = [event for index in pending for event in events[index]]
                            for hook in self._transaction_hooks:
                                hook(cursor, list(zip(notification_ids, flat, strict=True)))
                except _Late as too_late:
                    for i in too_late.indexes:
                        outcomes[i] = _too_late(writes[i])
                    for i in keyed:
                        if i not in too_late.indexes:
                            outcomes.pop(i, None)
                    continue
                except _HeadMoved:
                    head_moved = True
                    for i in keyed:
                        outcomes.pop(i, None)
                    continue
                except _AlreadyRecorded as already:
                    for i, stored_answer in already.settled.items():
                        k = writes[i].idempotent
                        assert k is not None
                        outcomes[i] = _replayed(stored_answer, k.key, self.sealer)
                    for i in keyed:
                        if i not in already.settled:
                            outcomes.pop(i, None)
                    continue
                except _DUPLICATE_ERRORS:
                    for i in keyed:
                        outcomes.pop(i, None)
                    # Another process took these positions (SQLite, where writers race):
                    # catch up and re-sign.
                    self.conflicts += 1
                    self.sync()
                    if only_at is not None:
                        return [WriteOutcome([], None)], []
                    time.sleep(random.uniform(0, 0.002 * min(attempt, 10)))  # noqa: S311
                    continue
                except Exception as exc:  # noqa: BLE001 - every write of the batch gets the error
                    for i in pending:
                        outcomes[i] = WriteOutcome([], None, exc)
                    break
                committed: list[Notification] = []
                for index in pending:
                    for event in events[index]:
                        self.tree.append(event.leaf_hash)
                    if index not in outcomes:
                        outcomes[index] = WriteOutcome(events[index], None)
                flat = [event for index in pending for event in events[index]]
                committed = list(zip(notification_ids, flat, strict=True))
                self._head_hash = flat[-1].leaf_hash.hex() if flat else self._head_hash
                self._appended.set()
                for index, first in repeats.items():
                    outcomes[index] = _repeat_of(outcomes[first], writes[index], writes[first], self.sealer)
                return [outcomes[i] for i in range(len(writes))], committed
            else:
                raise AppendConflict(f"no free position after {MAX_APPEND_ATTEMPTS} attempts")
        for index, first in repeats.items():
            outcomes[index] = _repeat_of(outcomes[first], writes[index], writes[first], self.sealer)
        return [outcomes[i] for i in range(len(writes))], []

    def _sequence(
        self,
        cursor: Any,
        writes: Sequence[Write],
        pending: Sequence[int],
        keyed: dict[int, Any],
        *,
        bulk_insert: bool,
        resign: bool,
    ) -> tuple[
        dict[int, list[RecordedEvent]],
        list[StoredEvent],
        dict[int, tuple[idempotency.Answer, IdempotencyRecord]],
        list[int] | None,
    ]:
        """Sign the pending writes at the next positions and build their keyed answers; and
        the notification ids of their log rows where the sequencer inserted them already
        (None: the caller inserts them).

        Where the store has a sequencer (PostgreSQL), everything that need not be serial is
        done before taking it: the idempotency check, catching up with what other workers
        committed, signing at the head as it then stands, and building and inserting the
        idempotency records. The sequencer inserts the log rows with the lock, in the same
        round trip, unless another worker committed in between: then the transaction is rolled
        back (`_HeadMoved`, the lock released) to sign again before the lock; on that retry
        (`resign`) a head that moved again is caught up with and signed under the lock, so
        a writer is never starved. A writer with the same key waits on the inserted record
        until this transaction ends (never while holding the sequencer), then meets the
        primary key, and its retry answers from the record. Elsewhere the caller inserts the
        records after the log rows. Without `bulk_insert` (a write that must land at one
        position) the caller checks the position and inserts."""
        adapter = self.store.adapter
        if not adapter.serialises_appends:
            events, stored = self._sign_writes(writes, pending)
            return events, stored, keyed_answers(keyed, events), None
        if keyed:
            self._settle(cursor, keyed)
        adapter.await_sequencer(cursor)  # a commit under way would move the head signed at
        self._sync_in(cursor)
        head = self.size
        events, stored = self._sign_writes(writes, pending)
        answers = keyed_answers(keyed, events)
        adapter.idempotency_insert(cursor, [record for _, record in answers.values()])
        inserted = adapter.take_sequencer(cursor, LEDGER_STREAM_ID, head, stored if bulk_insert else [])
        if inserted is None:
            if not resign:
                raise _HeadMoved
            self._sync_in(cursor)
            events, stored = self._sign_writes(writes, pending)
            answers = keyed_answers(keyed, events)
            records = [record for _, record in answers.values()]
            adapter.idempotency_delete(cursor, [(r.tenant_id, r.idem_key) for r in records])
            adapter.idempotency_insert(cursor, records)
        return events, stored, answers, inserted if bulk_insert else None

    def _settle(self, cursor: Any, keyed: dict[int, Any]) -> None:
        """Raise `_AlreadyRecorded` for the keyed writes whose key is recorded already."""
        idents = {i: (k.key.tenant_id, k.key.key) for i, k in keyed.items() if k is not None}
        found = idempotency.find(cursor, self.store, idents.values())
        settled = {i: found[ident] for i, ident in idents.items() if ident in found}
        if settled:
            raise _AlreadyRecorded(settled)

    def _sync_in(self, cursor: Any) -> None:
        """`sync` through the append transaction's cursor (under the sequencer lock)."""
        while True:
            with self.tree.deferred_flush():
                rows = self.store.adapter.read_stream(cursor, LEDGER_STREAM_ID, self.size, _SYNC_PAGE)
                for position, entry in rows:
                    self._absorb(RecordedEvent(position=position, entry=entry))
            if len(rows) < _SYNC_PAGE:
                return

    def _sign_writes(
        self, writes: Sequence[Write], pending: Sequence[int]
    ) -> tuple[dict[int, list[RecordedEvent]], list[StoredEvent]]:
        """Sign the pending writes' drafts at the positions after the head, each entry
        chained to its predecessor."""
        key = self.signing_key()
        recorded_at = utc_now()
        position, prev_hash = self.size, self._head_hash
        events: dict[int, list[RecordedEvent]] = {}
        stored: list[StoredEvent] = []
        for index in pending:
            batch: list[RecordedEvent] = []
            for item in writes[index].prepared:
                position += 1
                event = sign_event(
                    item, position=position, prev_hash=prev_hash, key=key, recorded_at=recorded_at
                )
                prev_hash = event.leaf_hash.hex()
                batch.append(event)
                stored.append(
                    StoredEvent(
                        originator_id=LEDGER_STREAM_ID,
                        originator_version=position,
                        topic=EVENT_TOPIC_PREFIX + item.draft.type,
                        state=event.entry,
                    )
                )
            events[index] = batch
        return events, stored

    # -- lifecycle ---------------------------------------------------------------
    def close(self) -> None:
        self._closed.set()
        self._appended.set()
        if self._checkpointer is not None:
            self._checkpointer.join(timeout=5)
        if self.cosigner is not None:
            self.cosigner.close()
        try:  # store the right edge too, so the next start reads no tail at all
            self.tree.flush()
        except Exception:  # tiles behind the log are read from the log at the next start
            log.warning("could not store Merkle tiles at close", exc_info=True)
        self.store.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def envelope_of(entry: bytes) -> dict[str, Any]:
    value: dict[str, Any] = orjson.loads(entry)
    return value
