"""Opening the log against its evidence (tiles, checkpoints, witnessed sizes), the integrity hold
that refuses writes while a finding is unanswered, and the operator's repair.
"""

from __future__ import annotations

import logging

from ledger.domain.entries import GENESIS_PREV_HASH, SYSTEM_TENANT, EventDraft, RecordedEvent, prepare
from ledger.domain.events import IntegrityFindingRecord, IntegrityRepaired
from ledger.storage.tree_store import TiledMerkleTree, TileStateError, TileStore
from ledger.writing.integrity import (
    Finding,
    IntegrityHold,
    checkpoint_findings,
    damaged_tiles_finding,
    tiles_findings,
    witness_findings,
)
from ledger.writing.log_reader import LogReader
from ledger.writing.writes import Write

log = logging.getLogger("citeledger.ledger")


class IntegrityHolding(LogReader):
    """Opening against the evidence, holding writes on a finding, and repair (a `Ledger` part)."""

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
