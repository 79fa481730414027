"""The Ledger: appends signed entries to one eventsourcing stream and keeps
the Merkle tree and checkpoints over it.

Concurrency: the log is a single stream whose version is the log position.
Within a process a lock serialises appends, and `append_batch` is the group
commit: many events, one transaction, all or nothing.

Between processes (several API workers on PostgreSQL) positions are assigned
by whoever holds the log's sequencer lock (`Store.append_transaction`: a
transaction-scoped advisory lock taken before the head is read). The holder
catches up with what the previous holder committed, through the same
transaction, then signs its batch at the next positions, chains it to the
current head and commits; the commit releases the lock. That is the
transparency-log shape: each worker does all per-request work (validation,
sealing, canonical payloads) outside the lock, and the lock's holder is, for
one batch, the single sequencer. Why this and not the alternatives, measured
with `scripts/bench_api.py --postgres-workers 1,2`:

- Before, writers raced: each signed a batch at the positions it believed
  free, and the store's uniqueness constraint picked a winner. On PostgreSQL
  the loser first waited (its insert blocks on the winner's uncommitted row,
  and on eventsourcing's `LOCK TABLE ... IN EXCLUSIVE MODE`), then got a
  unique violation, re-read the head, re-signed and tried again: a wasted
  signed batch and several wasted round trips per collision, so two workers
  were slower than one. With the lock a batch is signed once, at positions
  that are known to be free; nothing is retried.
- A dedicated sequencer process fed through a queue table (LISTEN/NOTIFY)
  adds a write, a notification and a read per request, and its own failover;
  the lock gives the same single-writer order with none of that, and a
  worker that dies releases it with its connection.
- The holder must be quick, since the lock serialises all workers: the
  append transaction runs in pipeline mode (lock, head read: one round trip;
  table lock, insert, commit: one more; it was nine), and each worker's
  group commit lets its next batch grow while it waits for the lock.
- Measured and dropped: a second group-commit writer thread running the
  commit listeners beside the next batch. It halved the batch size, so more
  commits and listener passes per request, and on a CPU-bound machine cost
  more CPU per request than it saved in waiting.

On SQLite (one file, one writer at a time) nothing changes: writers that
race still meet the uniqueness constraint; the loser re-reads the head and
re-signs.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import orjson
from eventsourcing.persistence import IntegrityError, StoredEvent

from ledger.canonical import canonical_json
from ledger.checkpoints import CheckpointRecord, make_checkpoint, origin_for
from ledger.config import LedgerConfig
from ledger.entries import (
    GENESIS_PREV_HASH,
    SYSTEM_TENANT,
    EventDraft,
    PreparedDraft,
    RecordedEvent,
    entry_signature_ok,
    prepare,
    seal_entry,
    utc_now,
)
from ledger.events import EventRejected, SigningKeyRotated
from ledger.merkle import MerkleTree
from ledger.sealing import DataKeyStore, Sealer
from ledger.signing import KeyDirectory, SigningKey, b64, kid_for, unb64, verify_signature
from ledger.store import (
    CHECKPOINT_STREAM_ID,
    CHECKPOINT_TOPIC,
    EVENT_TOPIC_PREFIX,
    LEDGER_STREAM_ID,
    Store,
)

log = logging.getLogger("citeledger.ledger")

MAX_BATCH_EVENTS = 1_000
MAX_APPEND_ATTEMPTS = 200
_SYNC_PAGE = 10_000
_DUPLICATE_ERRORS: tuple[type[Exception], ...] = (IntegrityError,)
try:  # psycopg raises its own UniqueViolation through eventsourcing's pipeline.
    from psycopg.errors import UniqueViolation

    _DUPLICATE_ERRORS = (IntegrityError, UniqueViolation)
except ImportError:  # pragma: no cover - psycopg is a hard dependency
    pass


class LedgerIntegrityError(RuntimeError):
    """The store holds something the ledger itself would never have written."""


class AppendConflict(RuntimeError):
    """Could not win a position after many attempts (extreme contention)."""


def possession_message(new_kid: str, public_key_b64: str, previous_kid: str | None) -> bytes:
    return canonical_json({"new_kid": new_kid, "public_key": public_key_b64, "previous_kid": previous_kid})


class Ledger:
    def __init__(self, config: LedgerConfig) -> None:
        self.config = config
        self.keydir = KeyDirectory(config.keys_dir)
        self.keydir.ensure()
        self.root_public_key = self.keydir.root_public_key()
        self.origin = origin_for(self.root_public_key)
        self.store = Store(config)
        self.recorder: Any = self.store.recorder
        self.data_keys = DataKeyStore(self.store, self.keydir.master_key())
        self.sealer = Sealer(self.data_keys)

        self._lock = threading.RLock()
        self._checkpoint_lock = threading.Lock()
        self.tree = MerkleTree()
        self._head_hash = GENESIS_PREV_HASH
        self.public_keys: dict[str, bytes] = {}  # kid -> raw public key, from the log
        self.key_introduced_at: dict[str, int] = {}
        self._signing_kid: str | None = None
        self._signing_key: SigningKey | None = None
        self._checkpoints: list[CheckpointRecord] = []
        self._appended = threading.Event()
        self._closed = threading.Event()
        self._commit_listeners: list[Callable[[int], None]] = []
        self.conflicts = 0  # batches signed for positions another writer took (re-signed)

        self.sync()
        if self.size == 0:
            self._append_genesis()
        self.signing_key()  # fail at start, not at the first append, on a bad key file
        self.sync_checkpoints()
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
        """Catch up with entries other processes appended. Returns the new size."""
        with self._lock:
            while True:
                rows = self.recorder.select_events(LEDGER_STREAM_ID, gt=self.size, limit=_SYNC_PAGE)
                for row in rows:
                    self._absorb(RecordedEvent(position=row.originator_version, entry=bytes(row.state)))
                if len(rows) < _SYNC_PAGE:
                    return self.size

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
        envelope = event.envelope
        payload = envelope["payload"]
        new_kid, public_raw = payload["new_kid"], unb64(payload["public_key"])
        if kid_for(public_raw) != new_kid:
            raise LedgerIntegrityError(f"position {event.position}: key id does not match the key")
        if not verify_signature(
            public_raw,
            possession_message(new_kid, payload["public_key"], payload["previous_kid"]),
            payload["possession_signature"],
        ):
            raise LedgerIntegrityError(f"position {event.position}: bad proof of key possession")
        if payload["previous_kid"] is None:
            if event.position != 1 or public_raw != self.root_public_key:
                raise LedgerIntegrityError(
                    f"position {event.position}: genesis key differs from the trusted root key"
                )
            signer = public_raw
        else:
            signer = self.public_keys[payload["previous_kid"]]
        if not entry_signature_ok(envelope, signer):
            raise LedgerIntegrityError(f"position {event.position}: key rotation signature invalid")
        self.public_keys[new_kid] = public_raw
        self.key_introduced_at[new_kid] = event.position
        self._signing_kid = new_kid
        self._signing_key = None  # loaded lazily from the key directory

    def signing_key(self) -> SigningKey:
        if self._signing_key is None:
            kid = self._signing_kid or kid_for(self.root_public_key)
            self._signing_key = self.keydir.load(kid)
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
        if len(drafts) > MAX_BATCH_EVENTS:
            raise EventRejected("events", f"at most {MAX_BATCH_EVENTS} events per batch")
        prepared = []
        for index, draft in enumerate(drafts):
            if tenant_id is not None and draft.tenant_id != tenant_id:
                raise EventRejected(f"events[{index}].tenant_id", "event is for another tenant")
            prepared.append(prepare(draft))
        return self.append_prepared(prepared)

    def on_commit(self, listener: Callable[[int], None]) -> None:
        """Call `listener(head_position)` after each local commit, before the
        append returns: how embedded projections give read-your-writes."""
        self._commit_listeners.append(listener)

    def _commit(
        self, prepared: Sequence[PreparedDraft], *, only_at: int | None = None
    ) -> list[RecordedEvent]:
        committed = self._commit_locked(prepared, only_at=only_at)
        if committed:
            for listener in self._commit_listeners:
                try:
                    listener(committed[-1].position)
                except Exception:  # the entries are committed; a reader's failure is its own
                    log.exception("commit listener failed")
        return committed

    def append_prepared(self, prepared: Sequence[PreparedDraft]) -> list[RecordedEvent]:
        """Commit drafts already validated by `ledger.entries.prepare` (group commit path)."""
        if len(prepared) > MAX_BATCH_EVENTS:
            raise EventRejected("events", f"at most {MAX_BATCH_EVENTS} events per batch")
        return self._commit(prepared)

    def _commit_locked(
        self, prepared: Sequence[PreparedDraft], *, only_at: int | None = None
    ) -> list[RecordedEvent]:
        """Sign and insert; `only_at` gives up (returns []) instead of moving on
        when that position is taken (the genesis entry exists once)."""
        if not prepared:
            return []
        store = self.store
        with self._lock:
            for attempt in range(MAX_APPEND_ATTEMPTS):
                try:
                    with store.append_transaction() as cursor:
                        if store.serialises_appends:
                            # We hold the sequencer lock: catch up in this transaction, so
                            # the positions we sign are free and the chain is current.
                            self._sync_in(cursor)
                        if only_at is not None and self.size + 1 != only_at:
                            return []
                        batch, stored = self._seal_batch(prepared)
                        store.insert_stored_events(cursor, stored)
                except _DUPLICATE_ERRORS:
                    # Another process took these positions (SQLite, or a writer that does
                    # not take the sequencer lock): catch up and re-sign.
                    self.conflicts += 1
                    self.sync()
                    if only_at is not None:
                        return []
                    time.sleep(random.uniform(0, 0.002 * min(attempt, 10)))  # noqa: S311
                    continue
                for event in batch:
                    self.tree.append(event.leaf_hash)
                self._head_hash = batch[-1].leaf_hash.hex()
                self._appended.set()
                return batch
        raise AppendConflict(f"no free position after {MAX_APPEND_ATTEMPTS} attempts")

    def _sync_in(self, cursor: Any) -> None:
        """`sync` through the append transaction's cursor."""
        while True:
            rows = self.store.read_stream(cursor, LEDGER_STREAM_ID, self.size, _SYNC_PAGE)
            for position, entry in rows:
                self._absorb(RecordedEvent(position=position, entry=entry))
            if len(rows) < _SYNC_PAGE:
                return

    def _seal_batch(self, prepared: Sequence[PreparedDraft]) -> tuple[list[RecordedEvent], list[StoredEvent]]:
        """Sign `prepared` at the positions after the current head, each chained to its predecessor."""
        key = self.signing_key()
        recorded_at = utc_now()
        position, prev_hash = self.size, self._head_hash
        batch: list[RecordedEvent] = []
        for item in prepared:
            position += 1
            entry = seal_entry(item, position=position, prev_hash=prev_hash, key=key, recorded_at=recorded_at)
            event = RecordedEvent(position=position, entry=entry)
            prev_hash = event.leaf_hash.hex()
            batch.append(event)
        stored = [
            StoredEvent(
                originator_id=LEDGER_STREAM_ID,
                originator_version=event.position,
                topic=EVENT_TOPIC_PREFIX + item.draft.type,
                state=event.entry,
            )
            for event, item in zip(batch, prepared, strict=True)
        ]
        return batch, stored

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
        draft = EventDraft(
            type="SigningKeyRotated", tenant_id=SYSTEM_TENANT, actor="citeledger", payload=payload
        )
        item = prepare(draft, system=True)
        with self._lock:
            if previous is None:
                self._signing_key = new_key  # genesis is self-signed
            try:
                committed = self._commit([item], only_at=1 if previous is None else None)
            except Exception:
                self._signing_key = None
                raise
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

    def rotate_signing_key(self) -> RecordedEvent:
        """Introduce a new signing key, announced by an event signed with the old one."""
        with self._lock:
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
        records = self.sync_checkpoints()
        return records[-1] if records else None

    def issue_checkpoint(self) -> CheckpointRecord | None:
        """Sign a checkpoint over the whole log now (no-op if the latest covers it)."""
        with self._checkpoint_lock:
            for _ in range(MAX_APPEND_ATTEMPTS):
                with self._lock:
                    size = self.sync()
                    root = self.tree.root(size)
                    key = self.signing_key()
                latest = self.latest_checkpoint()
                if size == 0 or (latest is not None and latest.tree_size >= size):
                    return latest
                record = make_checkpoint(
                    seq=len(self._checkpoints) + 1,
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
                self._checkpoints.append(record)
                return record
        raise AppendConflict("could not issue a checkpoint")

    def checkpoint_covering(self, position: int) -> CheckpointRecord:
        """The first checkpoint whose tree contains `position`; issues one if none does yet."""
        for record in self.sync_checkpoints():
            if record.tree_size >= position:
                return record
        issued = self.issue_checkpoint()
        if issued is None or issued.tree_size < position:
            raise LookupError(f"position {position} is not in the log")
        return issued

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
                self.issue_checkpoint()
            except Exception:  # the loop must survive a transient store error
                log.exception("checkpoint issuance failed; retrying next interval")

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
        self.store.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def envelope_of(entry: bytes) -> dict[str, Any]:
    value: dict[str, Any] = orjson.loads(entry)
    return value
