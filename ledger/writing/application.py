"""The Ledger: appends signed entries to one eventsourcing stream and keeps
the Merkle tree and checkpoints over it.

Concurrency: the log is a single stream whose version is the log position,
so two writers (threads or processes) racing for the same position meet the
store's uniqueness constraint; the loser re-reads the head and re-signs.
Within a process a lock serialises appends, and `append_batch` is the group
commit: many events, one transaction, all or nothing.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from eventsourcing.persistence import StoredEvent

from ledger.config import LedgerConfig, parse_witnesses
from ledger.deadline import Deadline, DeadlineExceeded
from ledger.domain.entries import (
    GENESIS_PREV_HASH,
    SYSTEM_TENANT,
    EventDraft,
    PreparedDraft,
    RecordedEvent,
    prepare,
    sign_entry,
    utc_now,
)
from ledger.domain.events import EventRejected, IntegrityFindingRecord, IntegrityRepaired, SigningKeyRotated
from ledger.domain.keychain import KeyChainError, check_key_event, possession_message
from ledger.storage.adapters import DUPLICATE_KEY_ERRORS
from ledger.storage.log_repeats import log_failure
from ledger.storage.store import (
    CHECKPOINT_STREAM_ID,
    CHECKPOINT_TOPIC,
    EVENT_TOPIC_PREFIX,
    LEDGER_STREAM_ID,
    Store,
)
from ledger.storage.tree_store import TiledMerkleTree, TileStateError, TileStore
from ledger.storage.witnessed import WitnessedSizes
from ledger.tlog.checkpoints import CheckpointRecord, make_checkpoint, origin_for
from ledger.tlog.cosignature import with_cosignatures
from ledger.tlog.note import verifier_key
from ledger.tlog.signing import KeyDirectory, SigningKey, b64, kid_for, unb64
from ledger.writing import idempotency
from ledger.writing.idempotency import IdempotencyKey, IdempotencyKeyReused, IdempotentWrite, StoredAnswer
from ledger.writing.integrity import (
    Finding,
    IntegrityHold,
    RepairRecords,
    checkpoint_findings,
    damaged_tiles_finding,
    tiles_findings,
    witness_findings,
)
from ledger.writing.integrity_records import HoldState
from ledger.writing.sealing import Sealer, shared_data_keys
from ledger.writing.witnessing import Cosigner

log = logging.getLogger("citeledger.ledger")

MAX_BATCH_EVENTS = 1_000
MAX_APPEND_ATTEMPTS = 200
_SYNC_PAGE = 10_000
_DUPLICATE_ERRORS: tuple[type[Exception], ...] = DUPLICATE_KEY_ERRORS  # a taken log position


Notification = tuple[int, RecordedEvent]  # (notification id, committed entry)
CommitListener = Callable[[Sequence[Notification]], None]
TransactionHook = Callable[[Any, Sequence[Notification]], None]


@dataclass(frozen=True)
class Write:
    """One caller's drafts, committed together (all or nothing), optionally with
    the idempotency record that must be atomic with them."""

    prepared: list[PreparedDraft]
    idempotent: IdempotentWrite | None = None
    # Claimed right before the transaction: a write whose caller's deadline has passed
    # (or was answered "timed out") commits nothing (`ledger.deadline`).
    deadline: Deadline | None = None


@dataclass(frozen=True)
class WriteOutcome:
    events: list[RecordedEvent]  # empty when answered from an earlier record
    answer: idempotency.Answer | None  # the (status, body) of a keyed write
    error: Exception | None = None


class _AlreadyRecorded(Exception):
    def __init__(self, settled: dict[int, StoredAnswer]) -> None:
        self.settled = settled


class _Late(Exception):
    def __init__(self, indexes: list[int]) -> None:
        self.indexes = indexes


def _too_late(write: Write) -> WriteOutcome:
    assert write.deadline is not None
    return WriteOutcome([], None, DeadlineExceeded(write.deadline.seconds))


def _replayed(stored: StoredAnswer, key: IdempotencyKey, sealer: Sealer) -> WriteOutcome:
    try:
        return WriteOutcome([], stored.replay(key, sealer))
    except IdempotencyKeyReused as exc:
        return WriteOutcome([], None, exc)


def _repeat_of(first: WriteOutcome, write: Write, first_write: Write, sealer: Sealer) -> WriteOutcome:
    """A second write with the same key in one batch: answered like a retry of the first."""
    if first.error is not None or first.answer is None:
        return first
    assert write.idempotent is not None and first_write.idempotent is not None
    stored = StoredAnswer(first_write.idempotent.key.fingerprint, *first.answer)
    return _replayed(stored, write.idempotent.key, sealer)


def prepare_all(drafts: Sequence[EventDraft], *, tenant_id: str | None = None) -> list[PreparedDraft]:
    """Validate drafts for one caller; an event for another tenant than `tenant_id` is refused."""
    if len(drafts) > MAX_BATCH_EVENTS:
        raise EventRejected("events", f"at most {MAX_BATCH_EVENTS} events per batch")
    prepared = []
    for index, draft in enumerate(drafts):
        if tenant_id is not None and draft.tenant_id != tenant_id:
            raise EventRejected(f"events[{index}].tenant_id", "event is for another tenant")
        prepared.append(prepare(draft))
    return prepared


class LedgerIntegrityError(RuntimeError):
    """The store holds something the ledger itself would never have written."""


class AppendConflict(RuntimeError):
    """Could not win a position after many attempts (extreme contention)."""


class Ledger:
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

        self._lock = threading.RLock()
        self._checkpoint_lock = threading.Lock()
        # The Merkle tree lives in tiles beside the log (ledger/storage/tree_store.py);
        # memory holds its right edge only, so opening costs O(log n + tail).
        self.tree: TiledMerkleTree  # set by _open_log
        self._head_hash = GENESIS_PREV_HASH
        self.public_keys: dict[str, bytes] = {}  # kid -> raw public key, from the log
        self.key_introduced_at: dict[str, int] = {}
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

    # -- reading the log -------------------------------------------------------
    @property
    def size(self) -> int:
        return int(self.tree.size)

    @property
    def head_hash(self) -> str:
        return self._head_hash

    def sync(self) -> int:
        """Catch up with entries other processes appended. Returns the new size.

        Reads only the entries after our size; tiles they complete are stored
        once per page (one transaction), not once per tile.
        """
        with self._lock:
            while True:
                with self.tree.deferred_flush():
                    rows = self.recorder.select_events(LEDGER_STREAM_ID, gt=self.size, limit=_SYNC_PAGE)
                    for row in rows:
                        self._absorb(RecordedEvent(position=row.originator_version, entry=bytes(row.state)))
                if len(rows) < _SYNC_PAGE:
                    return self.size

    def _open_log(self) -> None:
        """Size, head hash, tree and key chain without reading the whole log.

        The stored tiles give the tree for their size; the entry at that size
        must hash to the tiles' last leaf (its leaf hash is also the head
        hash); the key chain up to it comes from the index of key entries and
        passes the same checks as during a full read (`_absorb_key`); then
        `sync` reads only the entries after it. A store without tiles (written
        by an older version, or after a repair) is read from position 1 once and
        its tiles built. Tiles that do not match the log are evidence
        (`ledger.writing.integrity`): they are kept as they are, the tree is built in
        memory from the log, and the ledger holds writes.
        """
        self.store.ensure_key_index()
        # Read the signed evidence before the log: whatever it covers was committed before
        # it was signed, so the log read after it must reach it (other processes keep
        # appending and checkpointing while this one opens).
        newest = self._newest_checkpoint()
        witnessed = self.witnessed.all()
        self.tree = TiledMerkleTree(TileStore(self.store))
        self._head_hash = GENESIS_PREV_HASH
        self.public_keys, self.key_introduced_at = {}, {}
        self._signing_kid, self._signing_key = None, None
        found: list[Finding] = []
        stored, head = 0, None
        try:
            stored = self.tree.open()
            head = self.get(stored) if stored else None
            if stored:
                found = tiles_findings(
                    log_size=stored if head is not None else self._stored_log_size(),
                    tiles_size=stored,
                    tile_leaf=self.tree.leaf_hash_at(stored - 1),
                    log_leaf=head.leaf_hash if head is not None else None,
                )
        except TileStateError as exc:
            if exc.layout_changed:
                log.warning("Merkle tiles of another layout (%s); rebuilding them from the log", exc)
                self.tree.clear()
            else:
                found = [damaged_tiles_finding(str(exc))]
            stored, head = 0, None
        if found:
            self.tree = TiledMerkleTree(None)  # memory only: the stored tiles stay untouched
            stored, head = 0, None
        if head is not None:
            for position, entry in self.store.key_entries(stored):
                if entry.find(b'"type":"SigningKeyRotated"') != -1:  # the same test as `_absorb`
                    self._absorb_key(RecordedEvent(position=position, entry=entry))
            self._head_hash = head.leaf_hash.hex()
        self.sync()
        if newest is not None:
            seq, record = newest
            found += checkpoint_findings(
                log_size=self.size, seq=seq, size=record.tree_size, root=record.root, root_at=self.tree.root
            )
        found += witness_findings(log_size=self.size, witnessed=witnessed, root_at=self.tree.root)
        self.hold_state.report(found, source="open")
        for finding in self.findings:
            log.error(
                "integrity finding (%s): %s; writes are refused until `citeledger repair`",
                finding.kind,
                finding.message,
            )

    def _stored_log_size(self) -> int:
        rows = self.recorder.select_events(LEDGER_STREAM_ID, desc=True, limit=1)
        return int(rows[0].originator_version) if rows else 0

    # -- integrity hold --------------------------------------------------------
    @property
    def findings(self) -> list[Finding]:
        """The unanswered findings as last read from the store (`held_findings` re-reads)."""
        return self.hold_state.current

    def held_findings(self) -> list[Finding]:
        """The unanswered findings, re-read from the store at most every
        `integrity_records.RECHECK_S` seconds; when a repair (by any process) lifted
        the hold, the log is opened again (tiles set aside here were rebuilt)."""
        before = self.hold_state.current
        now = self.hold_state.refresh()
        if before and not now:
            with self._lock:
                self._open_log()
            now = self.hold_state.current
        return now

    def hold(self, finding: Finding) -> None:
        """Refuse writes from now on because of `finding` (a witness's report), in
        every process sharing the store, unless an operator already answered that evidence."""
        if not self.hold_state.report([finding], source="witness"):
            log.warning(
                "integrity finding already answered by a repair (%s): %s", finding.kind, finding.message
            )
            return
        log.error(
            "integrity finding (%s): %s; writes are refused until `citeledger repair`",
            finding.kind,
            finding.message,
        )

    def _refuse_if_held(self) -> None:
        if findings := self.held_findings():
            raise IntegrityHold(findings)

    def repair(self, *, actor: str = "operator") -> RecordedEvent:
        """The operator's answer to the findings: one signed `IntegrityRepaired`
        entry naming each finding and what was done; tiles that disagreed with
        the log are rebuilt from it, and the other evidence (checkpoints and
        cosignatures the shorter log no longer matches) stays in the store,
        answered by this entry's position. Raises LookupError when nothing holds."""
        with self._lock:
            findings = list(self.hold_state.refresh(force=True))
            if not findings:
                raise LookupError("no integrity finding to repair")
            rebuild = any(finding.evidence.startswith("tiles:") for finding in findings)
            actions = []
            if rebuild:
                actions.append("Merkle tiles rebuilt from the log's entries")
            if any(not finding.evidence.startswith("tiles:") for finding in findings):
                actions.append(
                    f"the log continues from its {self.size} entries; the signed checkpoints and "
                    "cosignatures named above stay in the store as evidence"
                )
            payload = IntegrityRepaired(
                findings=[IntegrityFindingRecord(**finding.to_json()) for finding in findings],
                actions=actions,
                log_size=self.size,
            )
            item = prepare(EventDraft.of(payload, tenant_id=SYSTEM_TENANT, actor=actor), system=True)
            outcomes, notifications = self._commit_locked([Write([item])])  # past the hold
            if outcomes[0].error is not None:
                raise outcomes[0].error
            event = outcomes[0].events[0]
            self.repairs.record(
                [finding.evidence for finding in findings if not finding.evidence.startswith("tiles:")],
                event.position,
            )
            self.hold_state.mark_repaired([finding.evidence for finding in findings], event.position)
            if rebuild:
                TileStore(self.store).clear()
            self._open_log()
        for listener in self._commit_listeners:
            try:
                listener(notifications)
            except Exception:
                log.exception("commit listener failed")
        return event

    def _absorb(self, event: RecordedEvent) -> None:
        if event.position != self.size + 1:
            raise LedgerIntegrityError(
                f"position {self.size + 1}: missing from the store (next row is {event.position})"
            )
        if event.entry.find(b'"type":"SigningKeyRotated"') != -1:
            self._absorb_key(event)
        self.tree.append(event.leaf_hash)
        self._head_hash = event.leaf_hash.hex()

    def _absorb_key(self, event: RecordedEvent) -> None:
        try:
            new_kid, public_raw = check_key_event(
                event.envelope, event.position, self.public_keys, self._signing_kid, self.root_public_key
            )
        except KeyChainError as exc:
            raise LedgerIntegrityError(str(exc)) from None
        self.public_keys[new_kid] = public_raw
        self.key_introduced_at[new_kid] = event.position
        self._signing_kid = new_kid
        self._signing_key = None  # loaded lazily from the key directory

    def signing_key(self) -> SigningKey:
        if self._signing_key is None:
            kid = self._signing_kid or kid_for(self.root_public_key)
            self._signing_key = self.keydir.load(kid)
            self._name_active_key(kid)  # first use of a key (start, or a rotation seen in the log)
        return self._signing_key

    def read(self, start: int = 1, stop: int | None = None) -> Iterator[RecordedEvent]:
        """Entries with start <= position <= stop, in order, straight from the store."""
        cursor = start - 1
        while stop is None or cursor < stop:
            limit = _SYNC_PAGE if stop is None else min(_SYNC_PAGE, stop - cursor)
            rows = self.recorder.select_events(LEDGER_STREAM_ID, gt=cursor, lte=stop, limit=limit)
            for row in rows:
                yield RecordedEvent(position=row.originator_version, entry=bytes(row.state))
            if len(rows) < limit:
                return
            cursor = rows[-1].originator_version

    def get(self, position: int) -> RecordedEvent | None:
        rows = self.recorder.select_events(LEDGER_STREAM_ID, gt=position - 1, lte=position, limit=1)
        if not rows:
            return None
        return RecordedEvent(position=rows[0].originator_version, entry=bytes(rows[0].state))

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
        with self._lock:
            for attempt in range(MAX_APPEND_ATTEMPTS):
                pending = [i for i in range(len(writes)) if i not in outcomes and i not in repeats]
                if not pending:
                    break
                keyed = {i: writes[i].idempotent for i in pending if writes[i].idempotent is not None}
                try:
                    with store.adapter.append_transaction() as cursor:
                        if store.adapter.serialises_appends:
                            # We hold the sequencer lock: catch up in this transaction, so the
                            # positions we sign are free and the chain is current.
                            self._sync_in(cursor)
                        if only_at is not None and self.size + 1 != only_at:
                            return [WriteOutcome([], None)], []
                        events, stored = self._sign_writes(writes, pending)
                        notification_ids = store.insert_log(cursor, stored) if stored else []
                        if keyed:
                            # Under the log's write lock: a key another writer recorded first.
                            found = idempotency.find(
                                cursor, store, [(k.key.tenant_id, k.key.key) for k in keyed.values() if k]
                            )
                            settled = {
                                i: found[(k.key.tenant_id, k.key.key)]
                                for i, k in keyed.items()
                                if k is not None and (k.key.tenant_id, k.key.key) in found
                            }
                            if settled:
                                raise _AlreadyRecorded(settled)
                            rows = []
                            for i, k in keyed.items():
                                assert k is not None
                                answer = k.answer(events[i])
                                outcomes[i] = WriteOutcome(events[i], answer)
                                rows.append((k.key, answer, events[i][0].position if events[i] else 0))
                            idempotency.insert(cursor, store, rows)
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
                entry = sign_entry(
                    item, position=position, prev_hash=prev_hash, key=key, recorded_at=recorded_at
                )
                event = RecordedEvent(position=position, entry=entry)
                prev_hash = event.leaf_hash.hex()
                batch.append(event)
                stored.append(
                    StoredEvent(
                        originator_id=LEDGER_STREAM_ID,
                        originator_version=position,
                        topic=EVENT_TOPIC_PREFIX + item.draft.type,
                        state=entry,
                    )
                )
            events[index] = batch
        return events, stored

    def _append_genesis(self) -> None:
        root_kid = kid_for(self.root_public_key)
        key = self.keydir.load(root_kid)
        self._append_key_event(key, previous=None)

    def _append_key_event(self, new_key: SigningKey, previous: SigningKey | None) -> RecordedEvent:
        public_b64 = b64(new_key.public_raw)
        previous_kid = previous.kid if previous else None
        payload = SigningKeyRotated(
            new_kid=new_key.kid,
            public_key=public_b64,
            previous_kid=previous_kid,
            possession_signature=new_key.sign(possession_message(new_key.kid, public_b64, previous_kid)),
        )
        draft = EventDraft.of(payload, tenant_id=SYSTEM_TENANT, actor="citeledger")
        item = prepare(draft, system=True)
        with self._lock:
            if previous is None:
                self._signing_key = new_key  # genesis is self-signed
            try:
                outcomes, notifications = self._commit_locked(
                    [Write([item])], only_at=1 if previous is None else None
                )
                if outcomes[0].error is not None:
                    raise outcomes[0].error
                committed = outcomes[0].events
            except Exception:
                self._signing_key = None
                raise
            for listener in self._commit_listeners if committed else ():
                try:
                    listener(notifications)
                except Exception:
                    log.exception("commit listener failed")
            if not committed:  # another process wrote the genesis entry first
                self._signing_key = None
                first = self.get(1)
                assert first is not None
                return first
            self._absorb_key_after_commit(committed[0])
            return committed[0]

    def _absorb_key_after_commit(self, event: RecordedEvent) -> None:
        payload = event.payload
        self.public_keys[payload["new_kid"]] = unb64(payload["public_key"])
        self.key_introduced_at[payload["new_kid"]] = event.position
        self._signing_kid = payload["new_kid"]
        self._signing_key = None
        self._name_active_key(payload["new_kid"])

    def _name_active_key(self, kid: str) -> None:
        """`keys/active` names the key in force, so an operator reads which private key
        signs and which ones may be retired. Best effort: the log, not the file, decides."""
        try:
            self.keydir.set_active(kid)
        except OSError as exc:
            log.warning("could not name the signing key in keys/active: %s", exc.strerror or exc)

    def rotate_signing_key(self) -> RecordedEvent:
        """Introduce a new signing key, announced by an event signed with the old one."""
        with self._lock:
            self._refuse_if_held()
            self.sync()
            previous = self.signing_key()
            return self._append_key_event(self.keydir.generate(), previous)

    # -- checkpoints -------------------------------------------------------------
    def sync_checkpoints(self) -> list[CheckpointRecord]:
        rows = self.recorder.select_events(CHECKPOINT_STREAM_ID, gt=len(self._checkpoints))
        for row in rows:
            self._checkpoints.append(CheckpointRecord.from_bytes(bytes(row.state)))
        return list(self._checkpoints)

    def checkpoints(self) -> list[CheckpointRecord]:
        return self.sync_checkpoints()

    def latest_checkpoint(self) -> CheckpointRecord | None:
        """The newest checkpoint, read as one row rather than the whole stream, so
        `citeledger checkpoint` and the checkpointer cost the same at any age."""
        newest = self._newest_checkpoint()
        return newest[1] if newest else None

    def _newest_checkpoint(self) -> tuple[int, CheckpointRecord] | None:
        """(sequence number, record) of the newest checkpoint row."""
        rows = self.recorder.select_events(CHECKPOINT_STREAM_ID, desc=True, limit=1)
        if not rows:
            return None
        return int(rows[0].originator_version), CheckpointRecord.from_bytes(bytes(rows[0].state))

    def issue_checkpoint(self) -> CheckpointRecord | None:
        """Sign a checkpoint over the whole log now (no-op if the latest covers it).
        Never while the ledger holds: a checkpoint over a cut-back log would be a
        second history under the same key."""
        self._refuse_if_held()
        with self._checkpoint_lock:
            for _ in range(MAX_APPEND_ATTEMPTS):
                with self._lock:
                    size = self.sync()
                    root = self.tree.root(size)
                    key = self.signing_key()
                newest = self._newest_checkpoint()
                latest = newest[1] if newest else None
                if size == 0 or (latest is not None and latest.tree_size >= size):
                    return latest
                record = make_checkpoint(
                    seq=(newest[0] if newest else 0) + 1,
                    origin=self.origin,
                    tree_size=size,
                    root=root,
                    issued_at=utc_now(),
                    key=key,
                )
                try:
                    self.recorder.insert_events(
                        [
                            StoredEvent(
                                originator_id=CHECKPOINT_STREAM_ID,
                                originator_version=record.seq,
                                topic=CHECKPOINT_TOPIC,
                                state=record.to_bytes(),
                            )
                        ]
                    )
                except _DUPLICATE_ERRORS:
                    continue  # another process issued one; re-read and decide again
                if len(self._checkpoints) == record.seq - 1:  # keep the lazy cache contiguous
                    self._checkpoints.append(record)
                return record
        raise AppendConflict("could not issue a checkpoint")

    def checkpoint_covering(self, position: int) -> CheckpointRecord:
        """The first checkpoint whose tree contains `position`, with its cosignatures;
        issues one if none does yet. With witnesses configured, the first one they
        cosigned (asking them now if none was)."""
        checkpoints = self.sync_checkpoints()
        covering = next((record for record in checkpoints if record.tree_size >= position), None)
        if covering is not None and self.cosigner is not None:
            seq = self.witnessed.first_cosigned(covering.seq)
            # None cosigned yet: ask for the newest (witnesses only move forward).
            cosigned = next((record for record in checkpoints if record.seq == seq), None) if seq else None
            return self.cosigned(cosigned) if cosigned else self.cosign(checkpoints[-1])
        if covering is not None:
            return covering
        issued = self.issue_checkpoint()
        if issued is None or issued.tree_size < position:
            raise LookupError(f"position {position} is not in the log")
        return self.cosign(issued)

    # -- witnesses ---------------------------------------------------------------
    @property
    def vkey(self) -> str:
        """The log's verifier key (C2SP vkey) for its current signing key: what a
        witness is told to follow (the key name is the origin)."""
        return verifier_key(self.origin, self.signing_key().public_raw)

    def cosigned(self, record: CheckpointRecord) -> CheckpointRecord:
        """`record` with the witnesses' cosignature lines added to its note."""
        lines = self.witnessed.lines([record.seq])[record.seq]
        return dataclasses.replace(record, note=with_cosignatures(record.note, lines)) if lines else record

    def cosign(self, record: CheckpointRecord) -> CheckpointRecord:
        """Ask the configured witnesses to cosign `record` now (C2SP tlog-witness);
        returns it with every cosignature it has. Refusals are alarmed, not raised."""
        if self.cosigner is not None:
            self.cosigner.cosign(record)
        return self.cosigned(record)

    def _checkpoint_loop(self) -> None:
        interval = self.config.checkpoint_interval_s
        while not self._closed.is_set():
            self._appended.wait(timeout=interval)
            if self._closed.is_set():
                return
            # Bounded delay: wait out the interval so a burst gets one checkpoint.
            self._closed.wait(interval)
            self._appended.clear()
            try:
                if self.held_findings():
                    continue  # held: no checkpoint over this log (reported once, when found)
            except Exception as exc:  # noqa: BLE001 - the loop survives a store fault
                log_failure(log, "could not read the integrity hold; retrying next interval", exc)
                continue
            try:
                record = self.issue_checkpoint()
                if record is not None and self.cosigner is not None:
                    self.cosigner.cosign(record)  # off the write path: this thread only
            except Exception as exc:  # noqa: BLE001 - the loop survives a store fault
                log_failure(log, "checkpoint issuance failed; retrying next interval", exc)

    # -- proofs ------------------------------------------------------------------
    def inclusion_proof(self, position: int, tree_size: int) -> list[bytes]:
        with self._lock:
            if tree_size > self.size:
                self.sync()
            return list(self.tree.inclusion_proof(position - 1, tree_size))

    def consistency_proof(self, old_size: int, new_size: int) -> list[bytes]:
        with self._lock:
            if new_size > self.size:
                self.sync()
            return list(self.tree.consistency_proof(old_size, new_size))

    def key_events(self, up_to: int | None = None) -> list[RecordedEvent]:
        """Every SigningKeyRotated entry (the chain from the root key), in order."""
        positions = sorted(self.key_introduced_at.values())
        return [
            event
            for position in positions
            if up_to is None or position <= up_to
            for event in [self.get(position)]
            if event is not None
        ]

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
