"""The verifier's moving parts: what it reports (`Finding`), the running Merkle root, the
signature checker that runs beside the pass (threads, then processes), and the pass's state.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, NoReturn, TypeVar

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ledger.domain.continuity import PartsTracker
from ledger.domain.entries import GENESIS_PREV_HASH, entry_signature_ok
from ledger.tlog.merkle import leaf_hash, node_hash

A = TypeVar("A")
R = TypeVar("R")


@dataclass(frozen=True)
class Finding:
    position: int | None
    problem: str
    checkpoint_seq: int | None = None

    def __str__(self) -> str:
        where = f"position {self.position}" if self.position is not None else "log"
        if self.checkpoint_seq is not None:
            where += f" (checkpoint #{self.checkpoint_seq})"
        return f"{where}: {self.problem}"


class _Stop(Exception):
    def __init__(self, finding: Finding) -> None:
        self.finding = finding


class _RunningRoot:
    """RFC 9162 root of a growing leaf sequence in O(log n) memory."""

    def __init__(self) -> None:
        self._stack: list[tuple[int, bytes]] = []  # (height, perfect subtree hash)

    def append(self, leaf: bytes) -> None:
        height, node = 0, leaf
        stack = self._stack
        while stack and stack[-1][0] == height:
            node = node_hash(stack.pop()[1], node)
            height += 1
        stack.append((height, node))

    def root(self) -> bytes:
        if not self._stack:
            return hashlib.sha256(b"").digest()
        node = self._stack[-1][1]
        for _, left in reversed(self._stack[:-1]):
            node = node_hash(left, node)
        return node


def _verify_batch(batch: list[tuple[int, bytes, bytes]]) -> int | None:
    keys: dict[bytes, Ed25519PublicKey] = {}  # one key object per batch, not per entry
    for position, entry, public_raw in batch:
        key = keys.get(public_raw)
        if key is None:
            key = keys[public_raw] = Ed25519PublicKey.from_public_bytes(public_raw)
        if not entry_signature_ok(entry, key):
            return position
    return None


class BatchPool(Generic[R]):
    """Runs batches beside the caller and hands their results back in submission order
    (so a caller stopping at the first problem still reports the earliest one).

    The first batches go to a thread pool (no start-up cost for small inputs; enough when
    the work releases the GIL, as Ed25519 verification does). After `processes_after` batches
    the rest go to worker processes, one per core: threads still take the GIL for the Python
    around the work and so compete with the caller; processes do not. At most `max_pending`
    batches are in flight: `submit` returns the results it had to wait for to stay under it."""

    def __init__(self, *, processes_after: int, max_pending: int) -> None:
        # One more thread than cores: the caller itself also needs the GIL now and then.
        self._pool: Executor = ThreadPoolExecutor(max_workers=(os.cpu_count() or 2) + 1)
        self._threads: Executor | None = None
        self._processes_after, self._max_pending = processes_after, max_pending
        self.batches = 0
        self.in_processes = 0  # batches sent to worker processes
        self._pending: deque[Future[R]] = deque()

    def submit(self, work: Callable[[A], R], batch: A) -> list[R]:
        self.batches += 1
        if self.batches == self._processes_after + 1 and (os.cpu_count() or 1) > 1:
            self._threads = self._pool  # drains what it already has; shut down in close()
            self._pool = ProcessPoolExecutor(
                max_workers=os.cpu_count(), mp_context=multiprocessing.get_context("forkserver")
            )
        if self._threads is not None:
            self.in_processes += 1
        self._pending.append(self._pool.submit(work, batch))
        settled = []
        while len(self._pending) > self._max_pending:
            settled.append(self._pending.popleft().result())
        return settled

    def drain(self) -> list[R]:
        settled = [future.result() for future in self._pending]
        self._pending.clear()
        return settled

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._threads is not None:
            self._threads.shutdown(wait=True, cancel_futures=True)


class _SignatureChecker:
    """Checks entry signatures off the main pass, which reads and hashes meanwhile, on a
    `BatchPool` (~32k entries on threads, then processes). Findings keep log order: a bad
    signature before a structural problem is the one reported."""

    _BATCH = 1024
    _MAX_PENDING = 16
    _PROCESSES_AFTER = 31  # full batches on threads before the process pool starts (~32k entries)

    def __init__(self) -> None:
        self._pool: BatchPool[int | None] = BatchPool(
            processes_after=self._PROCESSES_AFTER, max_pending=self._MAX_PENDING
        )
        self._batch: list[tuple[int, bytes, bytes]] = []

    def submit(self, position: int, entry: bytes, public_raw: bytes) -> None:
        self._batch.append((position, entry, public_raw))
        if len(self._batch) >= self._BATCH:
            self._flush()

    def _flush(self) -> None:
        settled = self._pool.submit(_verify_batch, self._batch) if self._batch else []
        self._batch = []
        for bad in settled:
            self._settle(bad)

    @staticmethod
    def _settle(bad: int | None) -> None:
        if bad is not None:
            raise _Stop(Finding(bad, "signature does not verify"))

    def drain(self) -> None:
        self._flush()
        for bad in self._pool.drain():
            self._settle(bad)

    def stop(self, finding: Finding) -> NoReturn:
        """Raise `finding`, unless an earlier position has a bad signature."""
        self.drain()
        raise _Stop(finding)

    def close(self) -> None:
        self._pool.close()


_KEY_EVENT_SUFFIX = b'"type":"SigningKeyRotated","v":1}'
_TYPE_MARK = b',"type":"'


def _type_of(entry: bytes) -> str:
    """The event type from the end of a canonical entry (keys sorted: `type`, then `v`)."""
    at = entry.rfind(_TYPE_MARK)
    end = entry.find(b'"', at + len(_TYPE_MARK))
    return entry[at + len(_TYPE_MARK) : end].decode("ascii", "replace") if at >= 0 and end > 0 else ""


class _PassState:
    """Where the pass stands: last position, its leaf hash, the keys learned so far."""

    def __init__(self) -> None:
        self.position = 0
        self.prev_leaf = b""
        self.keys: dict[str, bytes] = {}
        self.current_kid: str | None = None
        self.parts = PartsTracker()  # a split version or receipt: its continuations follow it

    @property
    def prev_leaf_hex(self) -> str:
        return self.prev_leaf.hex() if self.position else GENESIS_PREV_HASH

    def advance(self, entry: bytes) -> None:
        self.prev_leaf = leaf_hash(entry)
        self.position += 1

    def copy(self) -> _PassState:
        clone = _PassState()
        clone.position, clone.prev_leaf, clone.current_kid = self.position, self.prev_leaf, self.current_kid
        clone.keys = dict(self.keys)
        clone.parts = self.parts.copy()
        return clone
