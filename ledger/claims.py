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
from collections.abc import Iterator
from contextlib import contextmanager

from ledger.store import Store

CLAIMS_TABLE = "citeledger_document_claims"
CLAIM_STALE_S = 120.0


class ClaimBusy(RuntimeError):
    """Another writer holds the claim."""


def ddl(store: Store) -> list[str]:
    return [
        f"CREATE TABLE IF NOT EXISTS {store.table(CLAIMS_TABLE)} (tenant_id TEXT NOT NULL, "
        "document_id TEXT NOT NULL, owner TEXT NOT NULL, claimed_at DOUBLE PRECISION NOT NULL, "
        "PRIMARY KEY (tenant_id, document_id))"
    ]


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

    def _take(self, tenant_id: str, document_id: str, owner: str, wait_s: float) -> None:
        store, table = self.store, self.store.table(CLAIMS_TABLE)
        deadline = time.monotonic() + wait_s
        while True:
            now = time.time()
            with store.transaction(commit=True) as cursor:
                cursor.execute(
                    store.sql(
                        f"INSERT INTO {table} AS c (tenant_id, document_id, owner, claimed_at) "
                        "VALUES (?, ?, ?, ?) ON CONFLICT (tenant_id, document_id) DO UPDATE SET "
                        "owner=excluded.owner, claimed_at=excluded.claimed_at WHERE c.claimed_at < ?"
                    ),
                    (tenant_id, document_id, owner, now, now - CLAIM_STALE_S),
                )
                if store.rowcount(cursor) == 1:
                    return
            if time.monotonic() >= deadline:
                raise ClaimBusy(document_id)
            time.sleep(0.02)

    def _release(self, tenant_id: str, document_id: str, owner: str) -> None:
        store = self.store
        with store.transaction(commit=True) as cursor:
            cursor.execute(
                store.sql(
                    f"DELETE FROM {store.table(CLAIMS_TABLE)} WHERE tenant_id=? AND document_id=? AND owner=?"
                ),
                (tenant_id, document_id, owner),
            )
