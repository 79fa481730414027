"""The durable spool: writes the ledger could not take now, kept on local disk
and delivered later, in order, with their original idempotency keys.

Layout of the spool directory (0700; files 0600):
  segment-<n>.jsonl  append-only records, one JSON object per line, fsynced before
                     `append` returns (so an acknowledged write survives a crash);
  cursor.json        where delivery stands (segment, byte offset), replaced atomically;
  rejected.jsonl     records the ledger refused for good (4xx), with the reason;
  append.lock / drain.lock  flock()s: appenders of several processes, one drainer.

A record torn by a crash in the middle of its write was never acknowledged; it is cut
off before the next append. Delivered records do not stay on disk in plain: a segment
wholly delivered is deleted, and the delivered part of the one the cursor is in is
overwritten with blanks (line breaks kept, so offsets hold; blank lines are skipped).
A refused record is kept in rejected.jsonl without its text (query, snippets,
explanations): the ledger may erase what it quotes, and this file would outlive that.
Delivery relies on the server's idempotency only: a record
sent twice (a crash between the ledger's answer and the cursor's update) is answered
with its original result (`dedup: true`), never recorded twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SEGMENT_PREFIX = "segment-"
ROTATE_BYTES = 4 * 1024 * 1024  # a new segment once the newest is this big
MAX_RECORD_BYTES = 1024 * 1024
BATCH_ITEMS = 500  # records per delivery request (the endpoint takes up to 1,000)
BATCH_BYTES = 2 * 1024 * 1024  # and stays well under the server's 4 MiB body limit

log = logging.getLogger("citeledger.client.spool")


@dataclass(frozen=True)
class SpoolRecord:
    idempotency_key: str
    retrieval: dict[str, Any]
    run_id: str | None = None
    trace_id: str | None = None
    spooled_at: float = field(default_factory=time.time)

    def line(self) -> bytes:
        data = json.dumps(self.__dict__, separators=(",", ":"), sort_keys=True).encode()
        if len(data) >= MAX_RECORD_BYTES:
            raise ValueError(f"a spool record is limited to {MAX_RECORD_BYTES} bytes")
        return data + b"\n"

    def item(self) -> dict[str, Any]:
        """The record as an item of POST /v1/retrievals/batch."""
        item: dict[str, Any] = {"idempotency_key": self.idempotency_key, "retrieval": self.retrieval}
        if self.run_id:
            item["run_id"] = self.run_id
        if self.trace_id:
            item["trace_id"] = self.trace_id
        return item


# What rejected.jsonl keeps of a refused retrieval: references, never text.
_BLANKS = bytes(0x0A if b == 0x0A else 0x20 for b in range(256))  # every byte a space, but line breaks
_KEPT_FIELDS = ("engine", "subject_id", "task", "status", "filters_applied", "context_hash")
_KEPT_ENTRY_FIELDS = ("document_id", "chunk_id", "score", "score_breakdown", "expires_at")


def without_text(retrieval: dict[str, Any]) -> dict[str, Any]:
    """A retrieval's references (ids, engine, scores) without its query, snippets or explanations."""
    kept = {name: retrieval[name] for name in _KEPT_FIELDS if name in retrieval}
    entries = retrieval.get("selected_entries")
    if isinstance(entries, list):
        kept["selected_entries"] = [
            {name: entry[name] for name in _KEPT_ENTRY_FIELDS if name in entry}
            if isinstance(entry, dict)
            else {}
            for entry in entries
        ]
    return kept


@dataclass(frozen=True)
class ItemVerdict:
    """What the ledger said about one delivered record."""

    delivered: bool  # recorded now or earlier (dedup)
    retryable: bool = False  # not delivered, try again later
    reason: str = ""


@dataclass(frozen=True)
class SpoolStatus:
    pending: int
    pending_bytes: int
    rejected: int
    oldest_age_s: float | None
    segments: int
    directory: str


@dataclass(frozen=True)
class DrainReport:
    delivered: int
    rejected: int
    pending: int
    seconds: float
    stopped_by: str | None = None  # why delivery stopped before the end, if it did


Sender = Callable[[Sequence[SpoolRecord]], list[ItemVerdict]]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _locked(path: Path, *, blocking: bool = True) -> Iterator[bool]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # closing releases the lock


class Spool:
    def __init__(self, directory: str | os.PathLike[str], *, rotate_bytes: int = ROTATE_BYTES) -> None:
        self.directory = Path(directory)
        self.rotate_bytes = rotate_bytes
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)
        self._append_lock = self.directory / "append.lock"
        self._drain_lock = self.directory / "drain.lock"
        self._cursor_path = self.directory / "cursor.json"
        self._rejected_path = self.directory / "rejected.jsonl"
        self._outage_told = False

    # -- segments and the cursor ------------------------------------------------------------
    def _segments(self) -> list[Path]:
        found = [p for p in self.directory.glob(f"{SEGMENT_PREFIX}*.jsonl") if p.stem[8:].isdigit()]
        return sorted(found, key=lambda p: int(p.stem[len(SEGMENT_PREFIX) :]))

    @staticmethod
    def _segment_number(path: Path) -> int:
        return int(path.stem[len(SEGMENT_PREFIX) :])

    def _segment(self, number: int) -> Path:
        return self.directory / f"{SEGMENT_PREFIX}{number:012d}.jsonl"

    def _cursor(self) -> tuple[int, int]:
        try:
            data = json.loads(self._cursor_path.read_text())
            return int(data["segment"]), int(data["offset"])
        except FileNotFoundError:
            return 0, 0

    def _save_cursor(self, segment: int, offset: int) -> None:
        temporary = self._cursor_path.with_suffix(".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, json.dumps({"segment": segment, "offset": offset}).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, self._cursor_path)
        _fsync_dir(self.directory)

    # -- appending ---------------------------------------------------------------------------
    def tell_outage(self, ledger_url: str, reason: str) -> None:
        """Say once, loudly, that writes now go to the spool because the ledger cannot take
        them (a mistyped URL would otherwise spool every record silently); said again only
        after the spool has drained empty. A warning: Python prints it on stderr even when
        the service configured no logging."""
        if self._outage_told:
            return
        self._outage_told = True
        log.warning(
            "citeledger: the ledger at %s cannot take writes now (%s); spooling them to %s until it "
            "answers (check the URL and the server if this persists)",
            ledger_url,
            reason,
            self.directory,
        )

    def append(self, record: SpoolRecord) -> None:
        self.append_many([record])

    def append_many(self, records: Sequence[SpoolRecord]) -> None:
        """Append records with ONE fsync; when this returns they survive a crash."""
        if not records:
            return
        data = b"".join(record.line() for record in records)
        with _locked(self._append_lock):
            segments = self._segments()
            created = False
            if not segments:
                cursor_segment, cursor_offset = self._cursor()
                number = cursor_segment + 1 if cursor_offset else max(cursor_segment, 1)
                path, created = self._segment(number), True
            else:
                path = segments[-1]
                if path.stat().st_size >= self.rotate_bytes:
                    path, created = self._segment(self._segment_number(path) + 1), True
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                self._cut_torn_tail(fd)
                written = os.write(fd, data)
                if written != len(data):  # a short write on a full disk: cut it off, fail loudly
                    os.ftruncate(fd, os.fstat(fd).st_size - written)
                    raise OSError("spool: short write (disk full?)")
                os.fsync(fd)
            finally:
                os.close(fd)
            if created:
                _fsync_dir(self.directory)

    @staticmethod
    def _cut_torn_tail(fd: int) -> None:
        """A crash mid-append leaves a line without its newline: never acknowledged, cut off."""
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return
        start = max(0, size - MAX_RECORD_BYTES)
        tail = os.pread(fd, size - start, start)
        keep = start + tail.rfind(b"\n") + 1 if b"\n" in tail else start
        os.ftruncate(fd, keep)

    # -- reading -----------------------------------------------------------------------------
    def _pending(self) -> Iterator[tuple[int, int, SpoolRecord]]:
        """(segment, offset after the record, record) for every record past the cursor."""
        cursor_segment, cursor_offset = self._cursor()
        for path in self._segments():
            number = self._segment_number(path)
            if number < cursor_segment:
                continue
            offset = cursor_offset if number == cursor_segment else 0
            with open(path, "rb") as handle:
                handle.seek(offset)
                for line in handle:
                    if not line.endswith(b"\n"):
                        break  # being written (or torn): not acknowledged yet
                    offset += len(line)
                    if line.strip():  # a blanked (delivered) record is skipped
                        yield number, offset, SpoolRecord(**json.loads(line))

    def status(self) -> SpoolStatus:
        pending = pending_bytes = 0
        oldest: float | None = None
        for _, _, record in self._pending():
            pending += 1
            pending_bytes += len(record.line())
            oldest = record.spooled_at if oldest is None else oldest
        rejected = 0
        if self._rejected_path.exists():
            with open(self._rejected_path, "rb") as handle:
                rejected = sum(1 for _ in handle)
        return SpoolStatus(
            pending=pending,
            pending_bytes=pending_bytes,
            rejected=rejected,
            oldest_age_s=None if oldest is None else max(0.0, time.time() - oldest),
            segments=len(self._segments()),
            directory=str(self.directory),
        )

    def pending_count(self) -> int:
        return sum(1 for _ in self._pending())

    # -- draining ----------------------------------------------------------------------------
    def drain(
        self,
        send: Sender,
        *,
        batch_items: int = BATCH_ITEMS,
        batch_bytes: int = BATCH_BYTES,
        max_seconds: float | None = None,
    ) -> DrainReport:
        """Deliver pending records in order through `send` (one batch request at a time).
        Stops at the first record the ledger could not take now (it and everything after
        stay, in order); a record refused for good moves to rejected.jsonl. One drainer
        at a time across processes; another one running returns at once."""
        started = time.monotonic()
        delivered = rejected = 0
        stopped_by: str | None = None
        with _locked(self._drain_lock, blocking=False) as acquired:
            if not acquired:
                return DrainReport(0, 0, self.pending_count(), 0.0, "another drainer is running")
            while True:
                batch: list[tuple[int, int, SpoolRecord]] = []
                size = 0
                for entry in self._pending():
                    line = len(entry[2].line())
                    if batch and (len(batch) >= batch_items or size + line > batch_bytes):
                        break
                    batch.append(entry)
                    size += line
                if not batch:
                    break
                try:
                    verdicts = send([record for _, _, record in batch])
                except Exception as exc:  # noqa: BLE001 - the records stay; the caller sees why
                    stopped_by = f"{type(exc).__name__}: {exc}"[:300]
                    break
                settled = 0
                refusals: list[tuple[SpoolRecord, str]] = []
                for (_, _, record), verdict in zip(batch, verdicts, strict=True):
                    if verdict.delivered:
                        delivered += 1
                    elif verdict.retryable:
                        stopped_by = verdict.reason or "the ledger asked to retry later"
                        break
                    else:
                        refusals.append((record, verdict.reason))
                    settled += 1
                if refusals:
                    self._reject(refusals)
                    rejected += len(refusals)
                if settled:
                    segment, offset, _ = batch[settled - 1]
                    self._advance(segment, offset)
                if stopped_by is not None or settled < len(batch):
                    break
                if max_seconds is not None and time.monotonic() - started > max_seconds:
                    stopped_by = "time limit"
                    break
        remaining = self.pending_count()
        if remaining == 0 and stopped_by is None:
            self._outage_told = False
        return DrainReport(delivered, rejected, remaining, time.monotonic() - started, stopped_by)

    def _reject(self, refusals: Sequence[tuple[SpoolRecord, str]]) -> None:
        lines = b"".join(
            json.dumps(
                {
                    "record": {**record.__dict__, "retrieval": without_text(record.retrieval)},
                    "reason": reason,
                },
                separators=(",", ":"),
            ).encode()
            + b"\n"
            for record, reason in refusals
        )
        fd = os.open(self._rejected_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, lines)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _advance(self, segment: int, offset: int) -> None:
        """Move the cursor past delivered records and leave none of them on disk: segments
        wholly behind it are deleted, the delivered part of the cursor's segment is blanked
        first (a crash in between leaves blank lines, which are skipped: they were delivered)."""
        before_segment, before_offset = self._cursor()
        with _locked(self._append_lock):
            current = self._segment(segment)
            if current.exists() and current.stat().st_size > offset:
                self._blank(current, before_offset if before_segment == segment else 0, offset)
            self._save_cursor(segment, offset)
            for path in self._segments():
                number = self._segment_number(path)
                if number < segment or (number == segment and path.stat().st_size == offset):
                    path.unlink()  # an append after this starts the next segment

    @staticmethod
    def _blank(path: Path, start: int, end: int) -> None:
        """Overwrite bytes [start, end) with spaces, keeping the line breaks (offsets hold)."""
        fd = os.open(path, os.O_RDWR)
        try:
            for at in range(start, end, ROTATE_BYTES):
                size = min(ROTATE_BYTES, end - at)
                chunk = os.pread(fd, size, at)
                os.pwrite(fd, chunk.translate(_BLANKS), at)
            os.fsync(fd)
        finally:
            os.close(fd)
