"""Verification of a whole log: the same checks online (a store) and offline (an export).

What is checked, in position order, stopping at the first bad position:
- positions are contiguous from 1 and each entry claims the position it sits at;
- each entry's `prev_hash` is the leaf hash of its predecessor (so a deleted
  row is told apart from a storage id gap, and a changed entry is named);
- the key chain: position 1 introduces the trusted root key, every key
  rotation is signed by the previous key and proves possession of the new one,
  and every entry is signed by the key in force at its position;
- every checkpoint's note signature, that its root equals the root recomputed
  from the entries, that checkpoint sequence numbers have no gap and sizes grow,
  and that no checkpoint covers more entries than the log has;
- entry signatures: all of them with `deep`, otherwise those not yet covered by
  a checkpoint (reported as pending, never as verified) and key rotations.
  Entries under a checkpoint are covered by its signed root; when a root does
  not match, the range is re-scanned entry by entry to name the first bad one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ledger.domain.entries import EVENT_TOPIC_PREFIX, entry_signature_ok
from ledger.domain.keychain import KeyChainError, check_key_event
from ledger.evidence.verify_pass import (
    _KEY_EVENT_SUFFIX,
    Finding,
    _PassState,
    _RunningRoot,
    _SignatureChecker,
    _Stop,
    _type_of,
)
from ledger.tlog.checkpoints import CheckpointRecord, open_record, origin_for
from ledger.tlog.note import NoteError, open_checkpoint, parse_checkpoint_body

# `Finding` lives in `verify_pass`; callers have always imported it from here.
__all__ = ["Finding", "FindingsReport", "LogVerifier", "Row", "VerifyReport"]


class Row(NamedTuple):
    """One stored entry as the source presents it."""

    position: int  # where the store keeps it (stream version, or line order offline)
    entry: bytes
    topic: str | None = None  # unsigned store metadata, checked against the entry


@dataclass
class FindingsReport:
    """What a check found, in order; the first finding names the first bad position."""

    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def first_bad(self) -> Finding | None:
        return self.findings[0] if self.findings else None


@dataclass
class VerifyReport(FindingsReport):
    entries: int = 0
    covered: int = 0  # entries under a verified checkpoint
    pending: int = 0  # entries after the last checkpoint: signatures checked, no signed root yet
    signatures_checked: int = 0
    checkpoints: int = 0
    latest_checkpoint: CheckpointRecord | None = None


def _held_size(note: str) -> int:
    try:
        return parse_checkpoint_body(note.split("\n\n", 1)[0] + "\n").size
    except NoteError as exc:
        raise ValueError(f"held checkpoint is not a checkpoint note: {exc}") from None


class LogVerifier:
    def __init__(
        self,
        trusted_root_key: bytes,
        *,
        deep: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        self.root_key = trusted_root_key
        self.origin = origin_for(trusted_root_key)
        self.deep = deep
        self.progress = progress

    def verify(
        self,
        rows: Iterable[Row],
        checkpoints: Sequence[CheckpointRecord],
        *,
        rescan: Callable[[int, int], Iterable[Row]] | None = None,
        foreign: Iterable[str] = (),
        held: Sequence[str] = (),
    ) -> VerifyReport:
        """`held` are checkpoint notes kept outside the store (an auditor's copy,
        a witness): the log must still contain exactly the tree each one signed.
        This is what catches truncation of the newest entries *and* checkpoints."""
        report = VerifyReport()
        self._held = sorted((_held_size(note), note) for note in held)
        try:
            self._run(rows, checkpoints, rescan, report)
            for description in foreign:
                raise _Stop(Finding(None, f"row that is not part of the ledger: {description}"))
        except _Stop as stop:
            report.findings.append(stop.finding)
        return report

    # -- the pass ------------------------------------------------------------------
    def _run(
        self,
        rows: Iterable[Row],
        checkpoints: Sequence[CheckpointRecord],
        rescan: Callable[[int, int], Iterable[Row]] | None,
        report: VerifyReport,
    ) -> None:
        ordered = self._check_checkpoint_sequence(checkpoints)
        report.checkpoints = len(ordered)
        last_size = ordered[-1].tree_size if ordered else 0
        state = _PassState()
        at_last_checkpoint = state.copy()
        running = _RunningRoot()
        next_cp = 0
        covered_to = 0
        expected = 1
        checker = _SignatureChecker()
        try:
            try:
                for row in rows:
                    if row.position != expected:
                        if row.position > expected:
                            missing = (
                                f"{expected}"
                                if row.position == expected + 1
                                else f"{expected}..{row.position - 1}"
                            )
                            checker.stop(
                                Finding(
                                    expected, f"entry missing (positions {missing} absent from the store)"
                                )
                            )
                        checker.stop(Finding(row.position, "entry stored twice or out of order"))
                    entry = row.entry
                    if self.deep or expected > last_size or entry.endswith(_KEY_EVENT_SUFFIX):
                        self._check_entry(row, state, checker)
                        report.signatures_checked += 1  # key entries by the key-chain rule
                    else:
                        # Under a signed checkpoint: its root vouches for these bytes, so
                        # only hash them here; a root mismatch re-scans them in full.
                        state.advance(entry)
                        if row.topic is not None and row.topic != EVENT_TOPIC_PREFIX + _type_of(entry):
                            checker.stop(
                                Finding(expected, "stored topic does not match the signed event type")
                            )
                    running.append(state.prev_leaf)
                    while self._held and self._held[0][0] == expected:
                        checker.drain()
                        self._check_held(self._held.pop(0)[1], state.keys, running.root(), expected)
                    while next_cp < len(ordered) and ordered[next_cp].tree_size == expected:
                        record = ordered[next_cp]
                        checker.drain()
                        if not self._checkpoint_ok(record, state.keys, running.root()):
                            culprit = self._locate(
                                covered_to + 1, record.tree_size, at_last_checkpoint, rescan
                            )
                            raise _Stop(
                                culprit
                                or Finding(
                                    record.tree_size, "checkpoint root does not match the log", record.seq
                                )
                            )
                        covered_to = record.tree_size
                        at_last_checkpoint = state.copy()
                        report.latest_checkpoint = record
                        next_cp += 1
                    report.entries = expected
                    if self.progress is not None and expected % 10_000 == 0:
                        self.progress(expected)
                    expected += 1
                checker.drain()
                report.covered = covered_to
                report.pending = report.entries - covered_to
                if self._held:
                    raise _Stop(
                        Finding(
                            report.entries + 1,
                            f"entry missing: a held checkpoint covers {self._held[0][0]} entries, "
                            f"the log ends at {report.entries}",
                        )
                    )
                if next_cp < len(ordered):
                    record = ordered[next_cp]
                    raise _Stop(
                        Finding(
                            report.entries + 1,
                            f"entry missing: checkpoint covers {record.tree_size} entries, "
                            f"the log ends at {report.entries}",
                            record.seq,
                        )
                    )
            except _Stop as stopped:
                # Entries under a checkpoint were only hashed; an earlier one may be the real culprit.
                found = stopped.finding.position
                if found is not None and covered_to < found - 1 and found <= last_size + 1:
                    earlier = self._locate(covered_to + 1, found - 1, at_last_checkpoint, rescan)
                    if earlier is not None and earlier.position is not None and earlier.position < found:
                        raise _Stop(earlier) from None
                raise
        finally:
            checker.close()

    def _check_entry(self, row: Row, state: _PassState, checker: _SignatureChecker) -> None:
        """Every check one entry allows on its own: position, chain, key, signature, topic."""
        expected = state.position + 1
        envelope = self._parse(row)
        kid = envelope.get("kid")
        if envelope.get("position") != expected:
            checker.stop(
                Finding(
                    expected, f"entry claims position {envelope.get('position')!r}: rows moved or swapped"
                )
            )
        if envelope.get("prev_hash") != state.prev_leaf_hex:
            signer = state.keys.get(str(kid))
            if signer is not None and expected > 1 and entry_signature_ok(row.entry, signer):
                checker.stop(
                    Finding(
                        expected - 1, "entry altered: its hash differs from the one the next entry signed"
                    )
                )
            checker.stop(Finding(expected, "prev_hash does not match the previous entry"))
        if envelope.get("type") == "SigningKeyRotated":
            checker.drain()
            state.current_kid = self._check_key_event(envelope, expected, state.keys, state.current_kid)
        elif kid != state.current_kid:
            checker.stop(Finding(expected, f"signed by key {kid!r}, not the key in force"))
        else:
            checker.submit(expected, row.entry, state.keys[str(state.current_kid)])
        if row.topic is not None and row.topic != EVENT_TOPIC_PREFIX + str(envelope.get("type")):
            checker.stop(Finding(expected, "stored topic does not match the signed event type"))
        if (broken := state.parts.see(envelope)) is not None:
            checker.stop(Finding(expected, broken))
        state.advance(row.entry)

    def _parse(self, row: Row) -> dict[str, Any]:
        try:
            envelope = orjson.loads(row.entry)
        except orjson.JSONDecodeError:
            raise _Stop(Finding(row.position, "entry is not valid JSON (bytes changed)")) from None
        if not isinstance(envelope, dict):
            raise _Stop(Finding(row.position, "entry is not a JSON object"))
        return envelope

    def _check_key_event(
        self, envelope: dict[str, Any], position: int, keys: dict[str, bytes], current_kid: str | None
    ) -> str:
        try:
            new_kid, new_key = check_key_event(envelope, position, keys, current_kid, self.root_key)
        except KeyChainError as exc:
            raise _Stop(Finding(exc.position, exc.problem)) from None
        keys[new_kid] = new_key
        return new_kid

    def _check_held(self, note: str, keys: dict[str, bytes], root: bytes, size: int) -> None:
        for public_raw in keys.values():
            try:
                checkpoint = open_checkpoint(
                    note, self.origin, Ed25519PublicKey.from_public_bytes(public_raw), origin=self.origin
                )
            except NoteError:
                continue
            if checkpoint.root != root:
                raise _Stop(
                    Finding(size, "the log differs from a held checkpoint of this size (history rewritten)")
                )
            return
        raise _Stop(Finding(size, "held checkpoint is not signed by any key of this log"))

    def _check_checkpoint_sequence(self, checkpoints: Sequence[CheckpointRecord]) -> list[CheckpointRecord]:
        ordered = sorted(checkpoints, key=lambda record: record.seq)
        previous_size = 0
        for expected_seq, record in enumerate(ordered, start=1):
            if record.seq != expected_seq:
                raise _Stop(Finding(previous_size + 1, "checkpoint missing from the sequence", expected_seq))
            if record.tree_size <= previous_size:
                raise _Stop(Finding(record.tree_size, "checkpoint does not grow the tree", record.seq))
            previous_size = record.tree_size
        return ordered

    def _checkpoint_ok(self, record: CheckpointRecord, keys: dict[str, bytes], root: bytes) -> bool:
        try:
            open_record(record, self.origin, keys)
        except (NoteError, ValueError) as exc:
            raise _Stop(
                Finding(record.tree_size, f"checkpoint signature invalid: {exc}", record.seq)
            ) from None
        return record.root == root

    def _locate(
        self,
        start: int,
        stop: int,
        state: _PassState,
        rescan: Callable[[int, int], Iterable[Row]] | None,
    ) -> Finding | None:
        """After a root mismatch: check every entry of the range in full to name the bad one."""
        if rescan is None:
            return None
        checker = _SignatureChecker()
        try:
            for row in rescan(start, stop):
                if row.position != state.position + 1:
                    return Finding(state.position + 1, "entry missing from the store")
                self._check_entry(row, state, checker)
            checker.drain()
        except _Stop as stopped:
            return stopped.finding
        finally:
            checker.close()
        return None
