"""Integrity findings kept in the store from the moment they are first seen.

A hold that lived in one process's memory was forgotten when that process
stopped: restarted, the ledger came up `ok` and took writes until its next
exchange with a witness, and the CLI saw nothing. So every finding, whatever
found it (a witness refusing a checkpoint, the opening check of tiles,
checkpoints and cosigned sizes, `lag`/`verify`), is a row here beside the
checkpoints, and a finding holds writes while its row is unrepaired. Every
process sharing the store (API workers, the checkpointer, the CLI) reads the
same rows; `citeledger repair --yes` marks them repaired with the position of
its signed `IntegrityRepaired` entry.

A process re-reads the rows at most every `RECHECK_S` seconds, on a write, a
checkpoint or a health check: a repair, or a finding made by another process,
takes effect everywhere within that bound.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

from ledger.storage.store import Store
from ledger.writing.integrity import (
    Finding,
    RepairRecords,
    checkpoint_findings,
    tiles_findings,
    unanswered,
    witness_findings,
)

RECHECK_S = 1.0  # the bound stated in docs/security.md


class FindingRecords:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.table = store.create_table(
            "citeledger_integrity_findings",
            "evidence TEXT PRIMARY KEY, kind TEXT NOT NULL, message TEXT NOT NULL, "
            "detail TEXT NOT NULL, source TEXT NOT NULL, found_at TEXT NOT NULL, "
            "repaired_position BIGINT, repaired_at TEXT",
        )

    def record(self, findings: Iterable[Finding], source: str) -> None:
        """Store each finding the first time it is seen. A row repaired earlier is opened
        again (callers pass only evidence no repair answered: tiles found wrong again
        after a repair rebuilt them are new evidence)."""
        found = list(findings)
        if not found:
            return
        now = dt.datetime.now(dt.UTC).isoformat()
        statement = self.store.sql(
            f"INSERT INTO {self.table} AS f (evidence, kind, message, detail, source, found_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (evidence) DO UPDATE SET kind = excluded.kind, "
            "message = excluded.message, detail = excluded.detail, source = excluded.source, "
            "found_at = excluded.found_at, repaired_position = NULL, repaired_at = NULL "
            "WHERE f.repaired_position IS NOT NULL"
        )
        with self.store.transaction(commit=True) as cursor:
            for finding in found:
                cursor.execute(
                    statement,
                    (
                        finding.evidence,
                        finding.kind,
                        finding.message,
                        json.dumps(finding.detail, sort_keys=True),
                        source,
                        now,
                    ),
                )

    def held(self) -> list[Finding]:
        """The findings no repair answered yet, oldest first."""
        rows = self.store.rows(
            f"SELECT evidence, kind, message, detail, source, found_at FROM {self.table} "
            "WHERE repaired_position IS NULL ORDER BY found_at, evidence"
        )
        return [_finding(row) for row in rows]

    def mark_repaired(self, cursor: Any, evidence: Sequence[str], position: int) -> None:
        """In the repairer's transaction: these findings are answered by entry `position`."""
        now = dt.datetime.now(dt.UTC).isoformat()
        statement = self.store.sql(
            f"UPDATE {self.table} SET repaired_position = ?, repaired_at = ? "
            "WHERE evidence = ? AND repaired_position IS NULL"
        )
        for item in sorted(set(evidence)):
            cursor.execute(statement, (position, now, item))


def _finding(row: Any) -> Finding:
    try:
        detail = json.loads(str(row["detail"]))
    except ValueError:
        detail = {}
    return Finding(
        str(row["kind"]),
        str(row["evidence"]),
        str(row["message"]),
        detail if isinstance(detail, dict) else {},
        str(row["found_at"]),
        str(row["source"]),
    )


def merge(*groups: Iterable[Finding]) -> list[Finding]:
    """One finding per evidence, the first seen (a stored row, with its time, wins)."""
    merged: dict[str, Finding] = {}
    for group in groups:
        for finding in group:
            merged.setdefault(finding.evidence, finding)
    return list(merged.values())


class HoldState:
    """One process's view of the hold: the stored findings no repair answered,
    re-read at most every `RECHECK_S` seconds (or at once after a sighting)."""

    def __init__(self, store: Store, repairs: RepairRecords) -> None:
        self.records = FindingRecords(store)
        self._repairs = repairs
        self._findings: list[Finding] = []
        self._unstored: list[tuple[Finding, str]] = []  # kept while the store refused them
        self._read_at = -math.inf
        self._lock = threading.Lock()  # witness threads, the checkpointer and requests report

    @property
    def current(self) -> list[Finding]:
        """As last read (no store access)."""
        return self._findings

    def report(self, findings: Iterable[Finding], source: str) -> list[Finding]:
        """New sightings: stored unless a repair answered their evidence; returns those."""
        found = list(findings)
        fresh = unanswered(found, self._repairs.answered()) if found else []
        with self._lock:
            self._unstored = [*self._unstored, *((finding, source) for finding in fresh)]
        self.refresh(force=True)
        return fresh

    def refresh(self, *, force: bool = False) -> list[Finding]:
        if not force and time.monotonic() - self._read_at < RECHECK_S:
            return self._findings
        with self._lock:
            if not force and time.monotonic() - self._read_at < RECHECK_S:
                return self._findings  # another thread just read it
            return self._read()

    def _read(self) -> list[Finding]:
        now = time.monotonic()
        pending, self._unstored = self._unstored, []
        try:
            for source in sorted({source for _, source in pending}):
                self.records.record([f for f, s in pending if s == source], source)
            held = self.records.held()
        except Exception:
            # The store is not answering: what was seen still holds, here at least,
            # and is stored at the next read.
            self._unstored = pending + self._unstored
            self._findings = merge(self._findings, [finding for finding, _ in self._unstored])
            raise
        self._findings = merge(held, [finding for finding, _ in self._unstored])
        self._read_at = now
        return self._findings

    def mark_repaired(self, evidence: Sequence[str], position: int) -> None:
        with self.records.store.transaction(commit=True) as cursor:
            self.records.mark_repaired(cursor, evidence, position)
        self.refresh(force=True)


def size_findings(store: Store) -> list[Finding]:
    """The cheap part of the opening check, for tools that read a store without
    opening a ledger (`citeledger lag`): is the log shorter than its tiles, its
    newest checkpoint or a witness's cosigned size? (Roots are compared when a
    ledger opens.)"""
    from ledger.storage.store import CHECKPOINT_STREAM_ID, LEDGER_STREAM_ID
    from ledger.storage.tree_store import TileStore
    from ledger.storage.witnessed import WitnessedSizes

    def newest(stream: Any) -> Any:
        rows = store.recorder.select_events(stream, desc=True, limit=1)
        return rows[0] if rows else None

    # The evidence before the log: what it covers was committed before it was written,
    # so a log read after it reaches it unless entries were removed (read the other way
    # round, an append landing in between would be a false finding, and findings stick).
    state = TileStore(store).state()
    row = newest(CHECKPOINT_STREAM_ID)
    sizes = [(name, size, None) for name, size, _ in WitnessedSizes(store).all()]
    head = newest(LEDGER_STREAM_ID)
    log_size = int(head.originator_version) if head is not None else 0
    found: list[Finding] = []
    if state is not None and state[0] > log_size:
        found += tiles_findings(log_size=log_size, tiles_size=state[0], tile_leaf=None, log_leaf=None)
    if row is not None:
        from ledger.tlog.checkpoints import CheckpointRecord

        record = CheckpointRecord.from_bytes(bytes(row.state))
        if record.tree_size > log_size:
            found += checkpoint_findings(
                log_size=log_size,
                seq=int(row.originator_version),
                size=record.tree_size,
                root=record.root,
                root_at=lambda size: b"",
            )
    found += witness_findings(log_size=log_size, witnessed=sizes, root_at=lambda size: b"")
    # What this check sees goes the same durable way as any other finding; with what
    # others found before (a witness's refusal is not visible in the store otherwise).
    records = FindingRecords(store)
    fresh = unanswered(found, RepairRecords(store).answered())
    try:
        records.record(fresh, source="check")
    except Exception:  # a read-only copy (an auditor's) is still reported on
        logging.getLogger("citeledger.integrity").warning("could not store integrity findings", exc_info=True)
    return merge(records.held(), fresh)
