"""The adapter contract for data keys (crypto-shredding; never in the log): create, read, destroy,
and what the log has recorded of them.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ledger.storage.adapters.core import AdapterCore

KEYS_TABLE = "citeledger_data_keys"


@dataclass(frozen=True)
class DataKeyRow:
    """A data key as stored: `wrapped` is None once destroyed (or for a tombstone)."""

    tenant_id: str
    wrapped: bytes | None
    destroyed: bool


class DataKeyStatements(AdapterCore):
    """Data keys' statements, the same text on both backends unless one overrides."""

    # -- data keys (crypto-shredding; never in the log) -------------------------
    def data_keys_ddl(self) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS {self.table(KEYS_TABLE)} ("
            "key_ref TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, "
            f"wrapped {self.blob}, created_at TEXT NOT NULL, "
            # scrub_position: where the RetentionScrubbed entry recording this
            # destruction sits; NULL until recorded, so a crash in between is redone.
            "destroyed_at TEXT, destroy_reason TEXT, scrub_position BIGINT)"
        ]

    def data_key_get(self, key_ref: str) -> DataKeyRow | None:
        """The stored key, or None when the ref was never created nor tombstoned."""
        return self.data_keys_get_many([key_ref]).get(key_ref)

    def data_keys_get_many(self, key_refs: Sequence[str]) -> dict[str, DataKeyRow]:
        """The stored keys of `key_refs`; refs never created nor tombstoned are absent."""
        return {
            row["key_ref"]: DataKeyRow(
                row["tenant_id"],
                None if row["wrapped"] is None else bytes(row["wrapped"]),
                row["destroyed_at"] is not None,
            )
            for row in self._key_rows("key_ref, tenant_id, wrapped, destroyed_at", "", key_refs)
        }

    def data_key_destructions(self, key_refs: Sequence[str]) -> dict[str, tuple[str, str]]:
        """(destroyed_at, reason) of the destroyed refs among `key_refs` (live or unknown: absent)."""
        rows = self._key_rows(
            "key_ref, destroyed_at, destroy_reason", "destroyed_at IS NOT NULL AND ", key_refs
        )
        return {row["key_ref"]: (str(row["destroyed_at"]), str(row["destroy_reason"] or "")) for row in rows}

    def _key_rows(self, columns: str, condition: str, key_refs: Sequence[str]) -> list[Any]:
        """Rows of the key table for `key_refs` (each once), 500 refs a statement (each one
        read alone, `read_rows`: no BEGIN and ROLLBACK around it)."""
        rows: list[Any] = []
        refs = list(dict.fromkeys(key_refs))
        for start in range(0, len(refs), 500):
            part = refs[start : start + 500]
            rows.extend(
                self.read_rows(
                    self.sql(  # `columns` and `condition` are this module's constants, never input
                        f"SELECT {columns} FROM {self.table(KEYS_TABLE)} "
                        f"WHERE {condition}key_ref IN ({', '.join('?' * len(part))})"
                    ),
                    tuple(part),
                )
            )
        return rows

    def data_key_create(self, key_ref: str, tenant_id: str, wrapped: bytes, created_at: str) -> bool:
        """Store a new key unless the ref exists (live, destroyed or tombstoned: a
        concurrent creator won, or the ref was shredded). True when this call stored it."""
        with self.transaction(commit=True) as cursor:
            cursor.execute(
                self.sql(
                    f"INSERT INTO {self.table(KEYS_TABLE)} (key_ref, tenant_id, wrapped, created_at) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT (key_ref) DO NOTHING"
                ),
                (key_ref, tenant_id, wrapped, created_at),
            )
            return self.rowcount(cursor) == 1

    def data_keys_create_many(self, rows: Sequence[tuple[str, str, bytes]], created_at: str) -> int:
        """`data_key_create` for many (key_ref, tenant_id, wrapped) in one transaction; how
        many of them it stored (a ref that exists is left as it is and not counted).

        Its commit does not wait for the disk (`relaxed_transaction`): the keys are made for
        entries about to be appended, and the append's own commit, which waits for the disk,
        makes them durable too (SQLite's WAL and PostgreSQL's WAL are written in order, and a
        synced commit syncs everything before it). A power cut before that append loses the
        keys and the unacknowledged append alike; nothing durable was ever sealed under them."""
        with self.relaxed_transaction() as cursor:
            cursor.executemany(
                self.sql(
                    f"INSERT INTO {self.table(KEYS_TABLE)} (key_ref, tenant_id, wrapped, created_at) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT (key_ref) DO NOTHING"
                ),
                [(key_ref, tenant_id, wrapped, created_at) for key_ref, tenant_id, wrapped in rows],
            )
            return self.rowcount(cursor)

    def data_key_destroy(self, key_ref: str, tenant_id: str, reason: str, now: str) -> bool:
        """Shred a key; a ref never used gets a tombstone so it can never be created
        later. False when it was already destroyed (idempotent)."""
        table = self.table(KEYS_TABLE)
        with self.transaction(commit=True) as cursor:
            cursor.execute(
                self.sql(
                    f"INSERT INTO {table} "
                    "(key_ref, tenant_id, wrapped, created_at, destroyed_at, destroy_reason) "
                    "VALUES (?, ?, NULL, ?, ?, ?) ON CONFLICT (key_ref) DO NOTHING"
                ),
                (key_ref, tenant_id, now, now, reason),
            )
            created_tombstone = self.rowcount(cursor)
            cursor.execute(
                self.sql(
                    f"UPDATE {table} SET wrapped=NULL, destroyed_at=?, destroy_reason=? "
                    "WHERE key_ref=? AND tenant_id=? AND destroyed_at IS NULL"
                ),
                (now, reason, key_ref, tenant_id),
            )
            return bool(created_tombstone or self.rowcount(cursor))

    def data_keys_unrecorded(self, tenant_id: str | None = None) -> list[tuple[str, str, str]]:
        """(key_ref, tenant_id, reason) destroyed but not yet recorded in the log."""
        statement = (
            f"SELECT key_ref, tenant_id, destroy_reason FROM {self.table(KEYS_TABLE)} "
            "WHERE destroyed_at IS NOT NULL AND scrub_position IS NULL"
        )
        params: tuple[str, ...] = ()
        if tenant_id is not None:
            statement += " AND tenant_id=?"
            params = (tenant_id,)
        with self.transaction(commit=False) as cursor:
            cursor.execute(self.sql(statement + " ORDER BY key_ref"), params)
            return [(row["key_ref"], row["tenant_id"], row["destroy_reason"]) for row in cursor.fetchall()]

    def data_keys_mark_recorded(self, key_refs: Sequence[str], position: int) -> None:
        """Note where the log records these destructions (first recording wins)."""
        with self.transaction(commit=True) as cursor:
            cursor.executemany(
                self.sql(
                    f"UPDATE {self.table(KEYS_TABLE)} SET scrub_position=? "
                    "WHERE key_ref=? AND scrub_position IS NULL"
                ),
                [(position, key_ref) for key_ref in key_refs],
            )

    def data_keys_live(self, tenant_id: str, prefix: str, below: str, limit: int = 10_000) -> list[str]:
        """Undestroyed key refs of a tenant with `prefix <= ref < below`, in order (bounded)."""
        with self.transaction(commit=False) as cursor:
            cursor.execute(
                self.sql(
                    f"SELECT key_ref FROM {self.table(KEYS_TABLE)} "
                    "WHERE tenant_id=? AND destroyed_at IS NULL AND key_ref >= ? AND key_ref < ? "
                    f"ORDER BY key_ref LIMIT {int(limit)}"
                ),
                (tenant_id, prefix, below),
            )
            return [row["key_ref"] for row in cursor.fetchall()]

    @abstractmethod
    def purge_data_key_residue(self) -> None:
        """Push destroyed key bytes out of the database's files (old page images,
        dead tuples), so shredding is not undone by reading the raw files."""
