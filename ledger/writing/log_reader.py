"""The `Ledger`'s reading side: its state, the entries by position, catching up with what other
processes appended, the key chain read from the log, and Merkle proofs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ledger.config import LedgerConfig
from ledger.domain.entries import RecordedEvent
from ledger.domain.keychain import KeyChainError, check_key_event
from ledger.storage.store import CHECKPOINT_STREAM_ID, LEDGER_STREAM_ID, Store
from ledger.storage.tree_store import TiledMerkleTree
from ledger.storage.witnessed import WitnessedSizes
from ledger.tlog.checkpoints import CheckpointRecord
from ledger.tlog.signing import KeyDirectory, SigningKey, kid_for
from ledger.writing.integrity import Finding, RepairRecords
from ledger.writing.integrity_records import HoldState
from ledger.writing.sealing import Sealer
from ledger.writing.witnessing import Cosigner
from ledger.writing.writes import (
    _SYNC_PAGE,
    CommitListener,
    LedgerIntegrityError,
    Notification,
    TransactionHook,
    Write,
    WriteOutcome,
)

log = logging.getLogger("citeledger.ledger")


class LogReader:
    """The `Ledger`'s state (set by `Ledger.__init__` and `_open_log`) and its reads:
    size and head, catching up with other writers, entries by position, the key chain
    as read from the log, the newest checkpoint row, and Merkle proofs."""

    config: LedgerConfig
    keydir: KeyDirectory
    root_public_key: bytes
    origin: str
    store: Store
    recorder: Any
    repairs: RepairRecords
    witnessed: WitnessedSizes
    hold_state: HoldState
    sealer: Sealer
    cosigner: Cosigner | None
    tree: TiledMerkleTree
    public_keys: dict[str, bytes]  # kid -> raw public key, from the log
    key_introduced_at: dict[str, int]
    conflicts: int
    _lock: threading.RLock
    _checkpoint_lock: threading.Lock
    _head_hash: str
    _signing_kid: str | None
    _signing_key: SigningKey | None
    _checkpoints: list[CheckpointRecord]
    _appended: threading.Event
    _closed: threading.Event
    _commit_listeners: list[CommitListener]
    _transaction_hooks: list[TransactionHook]

    if TYPE_CHECKING:  # the other parts' (`Ledger` combines them): for the type checker only

        def _commit_locked(
            self, writes: Sequence[Write], *, only_at: int | None = None
        ) -> tuple[list[WriteOutcome], list[Notification]]: ...

        def held_findings(self) -> list[Finding]: ...

        def _refuse_if_held(self) -> None: ...

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

    def _stored_log_size(self) -> int:
        rows = self.recorder.select_events(LEDGER_STREAM_ID, desc=True, limit=1)
        return int(rows[0].originator_version) if rows else 0

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

    def _name_active_key(self, kid: str) -> None:
        """`keys/active` names the key in force, so an operator reads which private key
        signs and which ones may be retired. Best effort: the log, not the file, decides."""
        try:
            self.keydir.set_active(kid)
        except OSError as exc:
            log.warning("could not name the signing key in keys/active: %s", exc.strerror or exc)

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

    def read_pages(self, start: int, stop: int, page: int = _SYNC_PAGE) -> Iterator[list[tuple[int, bytes]]]:
        """(position, entry bytes) with start <= position <= stop, a page of rows at a time:
        the bytes as stored and hashed, for passes that parse only what they need."""
        cursor = start - 1
        while cursor < stop:
            rows = self.store.log_entries(cursor, stop, page)
            if rows:
                yield rows
            if len(rows) < page:
                return
            cursor = rows[-1][0]

    def get(self, position: int) -> RecordedEvent | None:
        # One statement (eventsourcing's `select_events` wraps it in BEGIN and ROLLBACK).
        rows = self.store.log_entries(position - 1, position, 1)
        if not rows:
            return None
        return RecordedEvent(position=rows[0][0], entry=rows[0][1])

    def _newest_checkpoint(self) -> tuple[int, CheckpointRecord] | None:
        """(sequence number, record) of the newest checkpoint row."""
        rows = self.recorder.select_events(CHECKPOINT_STREAM_ID, desc=True, limit=1)
        if not rows:
            return None
        return int(rows[0].originator_version), CheckpointRecord.from_bytes(bytes(rows[0].state))

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
