"""The adapter contract for the side tables beside the log: idempotency records, the rate-limit
bucket, document claims and projection tracking.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.config import LedgerConfig
from ledger.storage.adapters.core import AdapterCore

IDEMPOTENCY_TABLE = "citeledger_idempotency"
CLAIMS_TABLE = "citeledger_document_claims"
RATE_TABLE = "citeledger_api_rate_limits"
TRACKING_TABLE = "citeledger_projection_tracking"

# `find` reads idempotency records in chunks so one statement never binds too many parameters.
_IDEMPOTENCY_CHUNK = 500


@dataclass(frozen=True)
class IdempotencyRow:
    """One recorded answer: the request fingerprint and the response it got."""

    tenant_id: str
    idem_key: str
    fingerprint: str
    status_code: int
    response: bytes


@dataclass(frozen=True)
class IdempotencyRecord:
    """What a write records with its entries (inserted in the entries' transaction)."""

    tenant_id: str
    idem_key: str
    fingerprint: str
    status_code: int
    response: bytes
    position: int
    created_at: float


class SideTableStatements(AdapterCore):
    """The side tables' statements, the same text on both backends unless one overrides."""

    def __init__(self, config: LedgerConfig) -> None:
        super().__init__(config)
        self._bucket_sql = self._rate_bucket_statement()

    # -- idempotency records -----------------------------------------------------
    def idempotency_ddl(self) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS {self.table(IDEMPOTENCY_TABLE)} ("
            "tenant_id TEXT NOT NULL, idem_key TEXT NOT NULL, fingerprint TEXT NOT NULL, "
            f"status_code INTEGER NOT NULL, response {self.blob} NOT NULL, position BIGINT NOT NULL, "
            f"created_at {self.real} NOT NULL, PRIMARY KEY (tenant_id, idem_key))"
        ]

    def idempotency_find(
        self, cursor: Any, keys: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], IdempotencyRow]:
        """Recorded answers for (tenant, key) pairs, read through the caller's transaction."""
        found: dict[tuple[str, str], IdempotencyRow] = {}
        by_tenant: dict[str, list[str]] = {}
        for tenant_id, key in sorted(set(keys)):
            by_tenant.setdefault(tenant_id, []).append(key)
        table = self.table(IDEMPOTENCY_TABLE)
        # One IN list per tenant (an index range on the primary key): an OR of hundreds of
        # (tenant, key) pairs is planned slowly by PostgreSQL and grew with the table.
        for tenant_id, wanted in by_tenant.items():
            for start in range(0, len(wanted), _IDEMPOTENCY_CHUNK):
                part = wanted[start : start + _IDEMPOTENCY_CHUNK]
                cursor.execute(
                    self.sql(
                        "SELECT tenant_id, idem_key, fingerprint, status_code, response "
                        f"FROM {table} WHERE tenant_id=? AND idem_key IN ({', '.join('?' * len(part))})"
                    ),
                    (tenant_id, *part),
                )
                for row in cursor.fetchall():
                    found[(row["tenant_id"], row["idem_key"])] = IdempotencyRow(
                        tenant_id=row["tenant_id"],
                        idem_key=row["idem_key"],
                        fingerprint=row["fingerprint"],
                        status_code=int(row["status_code"]),
                        response=bytes(row["response"]),
                    )
        return found

    def idempotency_delete(self, cursor: Any, keys: Sequence[tuple[str, str]]) -> None:
        """Remove the records of (tenant, key) pairs through the caller's transaction (a writer
        replacing its own records, not yet committed, by ones for entries signed again)."""
        table = self.table(IDEMPOTENCY_TABLE)
        for start in range(0, len(keys), _IDEMPOTENCY_CHUNK):
            part = keys[start : start + _IDEMPOTENCY_CHUNK]
            cursor.execute(
                self.sql(
                    f"DELETE FROM {table} WHERE (tenant_id, idem_key) IN "
                    f"(VALUES {', '.join(['(?, ?)'] * len(part))})"
                ),
                [value for pair in part for value in pair],
            )

    def idempotency_lookup(self, tenant_id: str, key: str) -> IdempotencyRow | None:
        """One recorded answer, in a read-only transaction (the fast path before any work)."""
        with self.transaction(commit=False) as cursor:
            return self.idempotency_find(cursor, [(tenant_id, key)]).get((tenant_id, key))

    def idempotency_insert(self, cursor: Any, records: Sequence[IdempotencyRecord]) -> None:
        """Record answers inside the transaction that inserts their entries; a key
        already recorded raises one of `duplicate_errors`."""
        if not records:
            return
        # One multi-row statement per chunk: on PostgreSQL each row of an executemany is a
        # statement of its own for the server, and this runs under the sequencer.
        for start in range(0, len(records), _IDEMPOTENCY_CHUNK):
            part = records[start : start + _IDEMPOTENCY_CHUNK]
            cursor.execute(
                self.sql(
                    f"INSERT INTO {self.table(IDEMPOTENCY_TABLE)} "
                    "(tenant_id, idem_key, fingerprint, status_code, response, position, created_at) "
                    f"VALUES {', '.join(['(?, ?, ?, ?, ?, ?, ?)'] * len(part))}"
                ),
                [
                    value
                    for r in part
                    for value in (
                        r.tenant_id,
                        r.idem_key,
                        r.fingerprint,
                        r.status_code,
                        r.response,
                        r.position,
                        r.created_at,
                    )
                ],
            )

    # -- the rate-limit bucket ---------------------------------------------------
    def rate_bucket_ddl(self) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS {self.table(RATE_TABLE)} ("
            f"bucket TEXT PRIMARY KEY, tokens {self.real} NOT NULL, updated {self.real} NOT NULL, "
            "ok INTEGER NOT NULL)"
        ]

    @abstractmethod
    def _rate_bucket_statement(self) -> str:
        """The one atomic upsert that refills, credits and draws (named parameters:
        bucket, burst, initial, now, rate, returned, want; returns tokens, ok).
        `ok` holds how many tokens the last draw granted (0 = refused); the tokens
        available are those refilled since `updated` plus the credited lease
        remainder, capped at the burst."""

    def rate_bucket_take(
        self, bucket: str, *, want: int, returned: int, rate: float, burst: int, now: float
    ) -> tuple[float, int]:
        """Credit `returned`, refill since the last draw, then draw `want` tokens (or 1
        when fewer are left): (tokens left, tokens granted; 0 = refused). A new bucket
        starts full. One statement, so every process draws from the same bucket."""
        params = {
            "bucket": bucket,
            "burst": float(burst),
            "initial": float(burst) - want,
            "now": now,
            "rate": rate,
            "returned": float(max(0, returned)),
            "want": want,
        }
        with self.transaction(commit=True) as cursor:
            cursor.execute(self._bucket_sql, params)
            row = cursor.fetchone()
        return float(row["tokens"]), int(row["ok"])

    # -- document claims ------------------------------------------------------------
    def claims_ddl(self) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS {self.table(CLAIMS_TABLE)} (tenant_id TEXT NOT NULL, "
            "document_id TEXT NOT NULL, owner TEXT NOT NULL, claimed_at DOUBLE PRECISION NOT NULL, "
            "PRIMARY KEY (tenant_id, document_id))"
        ]

    def claim_take(
        self, tenant_id: str, document_id: str, owner: str, *, now: float, stale_before: float
    ) -> bool:
        """Take the claim if it is free or its holder's claim is older than
        `stale_before` (a holder that died); the primary key is the arbiter."""
        return bool(self.claim_take_many(tenant_id, [document_id], owner, now=now, stale_before=stale_before))

    def claim_take_many(
        self, tenant_id: str, document_ids: Sequence[str], owner: str, *, now: float, stale_before: float
    ) -> list[str]:
        """`claim_take` for many documents in one transaction; the ids taken."""
        taken = []
        with self.transaction(commit=True) as cursor:
            for document_id in document_ids:
                cursor.execute(
                    self.sql(
                        f"INSERT INTO {self.table(CLAIMS_TABLE)} AS c "
                        "(tenant_id, document_id, owner, claimed_at) "
                        "VALUES (?, ?, ?, ?) ON CONFLICT (tenant_id, document_id) DO UPDATE SET "
                        "owner=excluded.owner, claimed_at=excluded.claimed_at WHERE c.claimed_at < ?"
                    ),
                    (tenant_id, document_id, owner, now, stale_before),
                )
                if self.rowcount(cursor) == 1:
                    taken.append(document_id)
        return taken

    def claim_release_many(self, tenant_id: str, document_ids: Sequence[str], owner: str) -> None:
        with self.transaction(commit=True) as cursor:
            cursor.executemany(
                self.sql(
                    f"DELETE FROM {self.table(CLAIMS_TABLE)} WHERE tenant_id=? AND document_id=? AND owner=?"
                ),
                [(tenant_id, document_id, owner) for document_id in document_ids],
            )

    def claim_release(self, tenant_id: str, document_id: str, owner: str) -> None:
        """Give the claim up, only if `owner` still holds it (not after a takeover)."""
        self.claim_release_many(tenant_id, [document_id], owner)

    # -- projection tracking ---------------------------------------------------------
    def tracking_ddl(self) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS {self.table(TRACKING_TABLE)} ("
            "projection TEXT PRIMARY KEY, version INTEGER NOT NULL, notification_id BIGINT NOT NULL, "
            "position BIGINT NOT NULL, status TEXT NOT NULL, error TEXT, failed_position BIGINT, "
            "updated_at TEXT NOT NULL)"
        ]

    def tracking_advance(
        self,
        cursor: Any,
        projection: str,
        *,
        expected_notification_id: int,
        notification_id: int,
        position: int,
        updated_at: str,
    ) -> bool:
        """Compare-and-set, in the caller's transaction: move a running projection's
        tracking from `expected_notification_id` to `notification_id`. False when
        another runner moved it first (or it stopped). Run it before any read-model
        write: it takes the write lock, so the race is decided before work is done."""
        cursor.execute(
            self.sql(
                f"UPDATE {self.table(TRACKING_TABLE)} SET notification_id=?, position=?, updated_at=? "
                "WHERE projection=? AND notification_id=? AND status='running'"
            ),
            (notification_id, position, updated_at, projection, expected_notification_id),
        )
        return self.rowcount(cursor) == 1

    def tracking_advance_many(
        self,
        cursor: Any,
        projections: Sequence[str],
        *,
        expected_notification_id: int,
        notification_id: int,
        position: int,
        updated_at: str,
    ) -> bool:
        """`tracking_advance` of several projections standing at the same notification id, in
        one statement; False (the caller rolls back) unless every one of them moved."""
        cursor.execute(
            self.sql(
                f"UPDATE {self.table(TRACKING_TABLE)} SET notification_id=?, position=?, updated_at=? "
                f"WHERE projection IN ({', '.join('?' * len(projections))}) "
                "AND notification_id=? AND status='running'"
            ),
            (notification_id, position, updated_at, *projections, expected_notification_id),
        )
        return self.rowcount(cursor) == len(projections)
