"""Document claims: a short exclusive hold, across every writer process, on one
document while its current version is read and its next one appended.

Without it two workers ingesting a changed file at once could both read
version N and both record version N+1. A claim is a row under the table's
primary key (the database is the arbiter); a claim left by a process that
died is taken over after `CLAIM_STALE_S`.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager

from ledger.storage import adapters
from ledger.storage.store import Store

CLAIMS_TABLE = adapters.CLAIMS_TABLE
CLAIM_STALE_S = 120.0


class ClaimBusy(RuntimeError):
    """Another writer holds the claim."""


def ddl(store: Store) -> list[str]:
    return store.adapter.claims_ddl()


class DocumentClaims:
    def __init__(self, store: Store) -> None:
        self.store = store
        store.create_tables(*ddl(store))
        self._guard = threading.Lock()
        self._local: dict[tuple[str, str], threading.Lock] = {}

    def _thread_lock(self, tenant_id: str, document_id: str) -> threading.Lock:
        with self._guard:
            if len(self._local) > 10_000:
                self._local.clear()
            return self._local.setdefault((tenant_id, document_id), threading.Lock())

    @contextmanager
    def hold(self, tenant_id: str, document_id: str, wait_s: float = 2.0) -> Iterator[None]:
        """Exclusive within this process (a lock) and across processes (a row);
        raises `ClaimBusy` after `wait_s`."""
        with self._thread_lock(tenant_id, document_id):
            owner = uuid.uuid4().hex
            self._take(tenant_id, document_id, owner, wait_s)
            try:
                yield
            finally:
                self._release(tenant_id, document_id, owner)

    @contextmanager
    def hold_many(self, tenant_id: str, document_ids: Sequence[str], wait_s: float = 2.0) -> Iterator[None]:
        """`hold` for many documents at once (a source sync), in a few transactions instead of
        two per document; all or none: raises `ClaimBusy` after `wait_s`."""
        wanted = sorted(set(document_ids))  # one order: two batches never wait on each other
        if not wanted:  # a re-sync of unchanged files: no claim, no transaction
            yield
            return
        owner = uuid.uuid4().hex
        deadline = time.monotonic() + wait_s
        with ExitStack() as locks:
            for document_id in wanted:
                lock = self._thread_lock(tenant_id, document_id)
                if not lock.acquire(timeout=max(deadline - time.monotonic(), 0.001)):
                    raise ClaimBusy(document_id)
                locks.callback(lock.release)
            held: list[str] = []
            try:
                while True:
                    now = time.time()
                    missing = [d for d in wanted if d not in set(held)]
                    held += self.store.adapter.claim_take_many(
                        tenant_id, missing, owner, now=now, stale_before=now - CLAIM_STALE_S
                    )
                    if len(held) == len(wanted):
                        break
                    if time.monotonic() >= deadline:
                        raise ClaimBusy(next(d for d in wanted if d not in set(held)))
                    time.sleep(0.02)
                yield
            finally:
                if held:
                    self.store.adapter.claim_release_many(tenant_id, held, owner)

    def _take(self, tenant_id: str, document_id: str, owner: str, wait_s: float) -> None:
        deadline = time.monotonic() + wait_s
        while True:
            now = time.time()
            if self.store.adapter.claim_take(
                tenant_id, document_id, owner, now=now, stale_before=now - CLAIM_STALE_S
            ):
                return
            if time.monotonic() >= deadline:
                raise ClaimBusy(document_id)
            time.sleep(0.02)

    def _release(self, tenant_id: str, document_id: str, owner: str) -> None:
        self.store.adapter.claim_release(tenant_id, document_id, owner)
