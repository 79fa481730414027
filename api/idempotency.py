"""`Idempotency-Key` on writes, held in a side table of the ledger's database
so it holds across worker processes.

The first request with a key reserves it (one atomic insert), runs, and
stores its response; a repeat with the same body gets that response back
with `dedup: true`; a repeat with a different body is 409
`idempotency_key_reused`; a repeat while the first is still running is 409
`idempotency_in_progress` (retryable). A failed first attempt releases the
key, so the client's retry runs again.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import orjson

from api.contract import ApiError
from ledger.store import Store

IDEMPOTENCY_TABLE = "citeledger_api_idempotency"
_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")
STALE_PENDING_S = 300.0


def check_key(key: str) -> str:
    if not _KEY.match(key):
        raise ApiError(400, "bad_request", "Idempotency-Key must be 1-255 visible ASCII characters")
    return key


class IdempotencyStore:
    def __init__(self, store: Store) -> None:
        self.store = store
        blob = "BLOB" if store.dialect == "sqlite" else "BYTEA"
        real = "REAL" if store.dialect == "sqlite" else "DOUBLE PRECISION"
        store.create_tables(
            f"CREATE TABLE IF NOT EXISTS {store.table(IDEMPOTENCY_TABLE)} ("
            "tenant_id TEXT NOT NULL, idem_key TEXT NOT NULL, fingerprint TEXT NOT NULL, "
            f"state TEXT NOT NULL, status_code INTEGER, response {blob}, created_at {real} NOT NULL, "
            "PRIMARY KEY (tenant_id, idem_key))"
        )
        self.table = store.table(IDEMPOTENCY_TABLE)

    def _reserve(self, tenant: str, key: str, fingerprint: str) -> bool:
        store = self.store
        with store.transaction(commit=True) as cursor:
            cursor.execute(
                store.sql(
                    f"INSERT INTO {self.table} (tenant_id, idem_key, fingerprint, state, "
                    "created_at) "
                    "VALUES (?, ?, ?, 'pending', ?) ON CONFLICT (tenant_id, idem_key) DO NOTHING"
                ),
                (tenant, key, fingerprint, time.time()),
            )
            return store.rowcount(cursor) == 1

    def _read(self, tenant: str, key: str) -> Any:
        store = self.store
        with store.transaction(commit=False) as cursor:
            cursor.execute(
                store.sql(
                    "SELECT fingerprint, state, status_code, response, "
                    f"created_at FROM {self.table} "
                    "WHERE tenant_id=? AND idem_key=?"
                ),
                (tenant, key),
            )
            return cursor.fetchone()

    def release(self, tenant: str, key: str) -> None:
        store = self.store
        with store.transaction(commit=True) as cursor:
            cursor.execute(
                store.sql(f"DELETE FROM {self.table} WHERE tenant_id=? AND idem_key=? AND state='pending'"),
                (tenant, key),
            )

    def complete(self, tenant: str, key: str, status: int, body: dict[str, Any]) -> None:
        store = self.store
        with store.transaction(commit=True) as cursor:
            cursor.execute(
                store.sql(
                    f"UPDATE {self.table} SET state='done', status_code=?, response=? "
                    "WHERE tenant_id=? AND idem_key=?"
                ),
                (status, orjson.dumps(body), tenant, key),
            )

    def run(
        self,
        tenant: str,
        key: str | None,
        fingerprint: str,
        action: Callable[[], tuple[int, dict[str, Any]]],
    ) -> tuple[int, dict[str, Any]]:
        """Run `action` at most once per (tenant, key); returns (status, body)."""
        if key is None:
            return action()
        check_key(key)
        for _ in range(3):
            if self._reserve(tenant, key, fingerprint):
                break
            row = self._read(tenant, key)
            if row is None:
                continue  # released between our insert and read: try again
            if row["fingerprint"] != fingerprint:
                raise ApiError(
                    409,
                    "idempotency_key_reused",
                    "Idempotency-Key was already used with a different request",
                    retryable=False,
                )
            if row["state"] == "done":
                body = orjson.loads(bytes(row["response"]))
                body["dedup"] = True
                return int(row["status_code"]), body
            if time.time() - float(row["created_at"]) > STALE_PENDING_S:
                self.release(tenant, key)  # the first attempt died; let this one run
                continue
            raise ApiError(
                409,
                "idempotency_in_progress",
                "a request with this Idempotency-Key is still running",
                retryable=True,
            )
        else:
            raise ApiError(409, "idempotency_in_progress", "Idempotency-Key is contended", retryable=True)
        try:
            status, body = action()
        except BaseException:
            self.release(tenant, key)
            raise
        if 200 <= status < 300:
            self.complete(tenant, key, status, body)
        else:
            self.release(tenant, key)
        return status, body
