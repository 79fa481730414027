"""Idempotency records: the answer a write gave, stored atomically with its entries.

A write that carries an idempotency key (tenant, key, fingerprint of the
request) is committed together with one row holding the answer it produced,
in the same transaction as its log entries. So after any crash a retry with
the same key either finds the row (the entries exist: answer it again,
`dedup: true`) or does not (nothing was written: run it again) — there is no
"pending" state to wait out, and no entry is ever written twice.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ledger import adapters
from ledger.adapters import IdempotencyRecord, IdempotencyRow
from ledger.entries import RecordedEvent
from ledger.store import Store

IDEMPOTENCY_TABLE = adapters.IDEMPOTENCY_TABLE
KEY_PATTERN = re.compile(r"^[\x21-\x7e]{1,255}$")  # visible ASCII, as HTTP headers carry it

Answer = tuple[int, dict[str, Any]]  # (status, body)


class IdempotencyKeyReused(ValueError):
    """The key was already used for a different request."""


@dataclass(frozen=True)
class IdempotencyKey:
    tenant_id: str
    key: str
    fingerprint: str  # what makes two requests "the same request"

    def __post_init__(self) -> None:
        if not KEY_PATTERN.match(self.key):
            raise ValueError("Idempotency-Key must be 1-255 visible ASCII characters")


@dataclass(frozen=True)
class StoredAnswer:
    fingerprint: str
    status: int
    body: dict[str, Any]

    def replay(self, idempotency: IdempotencyKey) -> Answer:
        """The first answer again, marked as a repeat; a different request is refused."""
        if self.fingerprint != idempotency.fingerprint:
            raise IdempotencyKeyReused(idempotency.key)
        return self.status, {**self.body, "dedup": True}


@dataclass(frozen=True)
class IdempotentWrite:
    """What a write asks to be recorded with its entries: its key, and how to
    turn its committed entries into the answer (run inside the transaction)."""

    key: IdempotencyKey
    answer: Callable[[Sequence[RecordedEvent]], Answer]


def ddl(store: Store) -> list[str]:
    return store.adapter.idempotency_ddl()


def _row_answer(row: IdempotencyRow) -> StoredAnswer:
    return StoredAnswer(fingerprint=row.fingerprint, status=row.status_code, body=orjson.loads(row.response))


def find(cursor: Any, store: Store, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], StoredAnswer]:
    """Stored answers for (tenant, key) pairs, read through the caller's transaction."""
    return {ident: _row_answer(row) for ident, row in store.adapter.idempotency_find(cursor, keys).items()}


def lookup(store: Store, tenant_id: str, key: str) -> StoredAnswer | None:
    """One stored answer, in a read-only transaction (the fast path before any work)."""
    row = store.adapter.idempotency_lookup(tenant_id, key)
    return None if row is None else _row_answer(row)


def lookup_many(store: Store, tenant_id: str, keys: Sequence[str]) -> dict[str, StoredAnswer]:
    """Stored answers of many keys of one tenant, in one read-only transaction (a batch's fast path)."""
    with store.transaction(commit=False) as cursor:
        found = find(cursor, store, [(tenant_id, key) for key in keys])
    return {key: answer for (_, key), answer in found.items()}


def insert(cursor: Any, store: Store, rows: Sequence[tuple[IdempotencyKey, Answer, int]]) -> None:
    """Record answers inside the transaction that inserts their entries."""
    now = time.time()
    store.adapter.idempotency_insert(
        cursor,
        [
            IdempotencyRecord(
                key.tenant_id, key.key, key.fingerprint, status, orjson.dumps(body), position, now
            )
            for key, (status, body), position in rows
        ],
    )


RETENTION_S = 24 * 3600.0  # how long a retry is answered from its record


def purge(store: Store, older_than_s: float = RETENTION_S) -> int:
    """Forget answers older than `older_than_s`: a retry later than that runs afresh."""
    with store.transaction(commit=True) as cursor:
        cursor.execute(
            store.sql(f"DELETE FROM {store.table(IDEMPOTENCY_TABLE)} WHERE created_at < ?"),
            (time.time() - older_than_s,),
        )
        return store.rowcount(cursor)
