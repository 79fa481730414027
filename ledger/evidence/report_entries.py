"""`verify-report`'s check of the counted entries, split over the cores.

The entries of `evidence/entries.ndjson.zst` are read (decompressed on a thread) in chunks
of whole lines (`CHUNK_BYTES`); each chunk is parsed, signature-checked (with `deep`), checked to
lie in the period and fed to a figure builder of its own in a worker (`BatchPool`: threads
for the first chunks, then one process per core). The caller takes the chunks' results in
file order: it compares each entry's leaf hash with `leaves.bin` (which it read and checked
against the end checkpoint's root itself) and merges the chunk's figures into its builder.
So what is checked, and the first problem reported with its place, are those of one pass
over the file in order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ledger.domain.entries import entry_signature_ok
from ledger.domain.keychain import kid_in_force
from ledger.evidence import report_files as files
from ledger.evidence.report_figures import FigureBuilder, Period
from ledger.evidence.report_files import ReportInvalid
from ledger.evidence.verify_pass import BatchPool
from ledger.tlog.merkle import HASH_SIZE, leaf_hash

# ~4 MB of entries (~2,500) a chunk: one read of the decompressed file, sent to a worker as
# one bytes object; big enough that sending costs little against checking, small enough that
# two chunks a core in flight keep memory low.
CHUNK_BYTES = 1 << 22
PROCESSES_AFTER = 2  # chunks checked on threads before worker processes start (a small report: all)
_MAX_PENDING = 4


@dataclass(frozen=True)
class Keys:
    """The verified key chain, as a worker needs it for `deep`."""

    by_kid: Mapping[str, bytes]
    positions: Sequence[tuple[int, str]]  # (position introduced, kid), ascending

    def for_entry(self, envelope: Mapping[str, Any]) -> bytes | None:
        if envelope.get("type") == "SigningKeyRotated":
            return self.by_kid.get(str(envelope.get("kid")))
        kid = kid_in_force(self.positions, int(envelope["position"]))
        return self.by_kid.get(kid) if kid else None


def signed(entry: bytes, envelope: Mapping[str, Any], keys: Keys, where: str) -> None:
    """ReportInvalid at `where` unless the entry's own signature verifies by the key in force."""
    key = keys.for_entry(envelope)
    if key is None or not entry_signature_ok(entry, key):
        raise ReportInvalid(where, f"position {int(envelope['position'])}: signature does not verify")


@dataclass(frozen=True)
class Chunk:
    lines: bytes  # whole lines, newline-separated (sent as one object: no line handled here)
    after: int | None  # the position of the line before the chunk (None for the first chunk)
    tenant_id: str
    period: Period
    seed: str
    keys: Keys | None  # with `deep`


@dataclass
class ChunkResult:
    """The positions and leaf hashes of the lines parsed, in order, up to the first problem
    (`problem`, raised by the caller once it has compared those hashes), and the chunk's figures."""

    positions: list[int] = field(default_factory=list)
    hashes: list[bytes] = field(default_factory=list)
    builder: FigureBuilder | None = None
    problem: BaseException | None = None


def check_chunk(chunk: Chunk) -> ChunkResult:
    """Everything checked of one chunk's entries but their leaf hashes against `leaves.bin`
    (run in a worker; a problem is returned, not raised, with what came before it)."""
    builder = FigureBuilder(tenant_id=chunk.tenant_id, period=chunk.period, seed=chunk.seed, context={})
    builder.last = chunk.after
    result = ChunkResult(builder=builder)
    try:
        for line in chunk.lines.split(b"\n"):
            try:
                envelope = orjson.loads(line)
                position = int(envelope["position"])
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                raise ReportInvalid(files.ENTRIES, "a line is not an entry") from None
            result.positions.append(position)
            result.hashes.append(leaf_hash(line))
            if chunk.keys is not None:
                signed(line, envelope, chunk.keys, files.ENTRIES)
            if not chunk.period.holds(str(envelope["recorded_at"])):
                raise ReportInvalid(files.ENTRIES, f"position {position}: recorded outside the period")
            try:
                builder.add(envelope)
            except ValueError as exc:
                raise ReportInvalid(files.ENTRIES, str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - the caller raises it after the leaf hashes before it
        result.problem = exc
    return result


def _position_of_last(block: bytes) -> int | None:
    """The block's last line's position, for the next chunk's order check (None when it has
    none: then this chunk fails on that line first, and the next chunk's result is not used)."""
    try:
        return int(orjson.loads(block[block.rfind(b"\n") + 1 :])["position"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


@dataclass
class EntriesChecked:
    entries: int = 0
    signatures: int = 0
    in_processes: int = 0  # chunks checked in worker processes


def check_entries(
    path: Path,
    builder: FigureBuilder,
    leaves: bytes,
    start_size: int,
    keys: Keys | None,
    checked: EntriesChecked,
) -> None:
    """Check every counted entry (see the module's docstring), feed its figures to `builder`
    and count into `checked` (kept up to the first problem, which is raised)."""
    count = len(leaves) // HASH_SIZE

    def take(result: ChunkResult) -> None:
        for position, digest in zip(result.positions, result.hashes, strict=True):
            index = position - start_size - 1
            if not 0 <= index < count or leaves[index * HASH_SIZE : (index + 1) * HASH_SIZE] != digest:
                raise ReportInvalid(files.ENTRIES, f"position {position}: not the entry the log holds there")
        if result.problem is not None:
            raise result.problem
        assert result.builder is not None
        builder.merge(result.builder)
        checked.entries += len(result.positions)
        checked.signatures += len(result.positions) if keys is not None else 0

    pool: BatchPool[ChunkResult] = BatchPool(processes_after=PROCESSES_AFTER, max_pending=_MAX_PENDING)
    try:
        after = builder.last
        blocks = files.entry_blocks(path, CHUNK_BYTES)
        while True:
            try:
                block = next(blocks, None)
            except ReportInvalid:
                for result in pool.drain():  # the lines before the problem are checked first
                    take(result)
                raise
            if block is None:
                break
            chunk = Chunk(block, after, builder.tenant_id, builder.period, builder.seed, keys)
            after = _position_of_last(block)
            for result in pool.submit(check_chunk, chunk):
                take(result)
        for result in pool.drain():
            take(result)
    finally:
        checked.in_processes = pool.in_processes
        pool.close()
