"""Signed checkpoints over the log: issuing one (never while held), finding the one that covers a
position, and the background checkpointer.
"""

from __future__ import annotations

import logging

from eventsourcing.persistence import StoredEvent

from ledger.domain.entries import utc_now
from ledger.storage.log_repeats import log_failure
from ledger.storage.store import CHECKPOINT_STREAM_ID, CHECKPOINT_TOPIC
from ledger.tlog.checkpoints import CheckpointRecord, make_checkpoint
from ledger.writing.cosigning import Cosigning
from ledger.writing.writes import _DUPLICATE_ERRORS, MAX_APPEND_ATTEMPTS, AppendConflict

log = logging.getLogger("citeledger.ledger")


class Checkpointing(Cosigning):
    """Signing checkpoints over the log and finding the one covering a position (a `Ledger` part)."""

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
