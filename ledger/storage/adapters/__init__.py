"""Store adapters: the dialect-specific SQL and behaviour, one module per backend.

`ledger.storage.store.Store(config)` picks the adapter; callers use its primitives
(`insert_log`, `data_key_*`, `idempotency_*`, `rate_bucket_take`, `claim_*`,
`tracking_advance`, ...) and never branch on the backend themselves. The
contract both adapters meet is `tests/test_store_contract.py`.
"""

from __future__ import annotations

from ledger.config import LedgerConfig
from ledger.storage.adapters.base import StoreAdapter
from ledger.storage.adapters.core import (
    AppendListener,
    EventStoreApp,
    LogRow,
    StoreUnavailable,
    generic_transient,
)
from ledger.storage.adapters.data_keys import KEYS_TABLE, DataKeyRow
from ledger.storage.adapters.postgres import PostgresAdapter
from ledger.storage.adapters.side_tables import (
    CLAIMS_TABLE,
    IDEMPOTENCY_TABLE,
    RATE_TABLE,
    TRACKING_TABLE,
    IdempotencyRecord,
    IdempotencyRow,
)
from ledger.storage.adapters.sqlite import SQLiteAdapter

ADAPTERS: tuple[type[StoreAdapter], ...] = (SQLiteAdapter, PostgresAdapter)

# For `except` clauses written once for whichever backend is open.
DUPLICATE_KEY_ERRORS: tuple[type[Exception], ...] = tuple(
    dict.fromkeys(error for adapter in ADAPTERS for error in adapter.duplicate_errors)
)
TRANSIENT_ERRORS: tuple[type[Exception], ...] = tuple(
    dict.fromkeys(error for adapter in ADAPTERS for error in adapter.transient_errors)
)


def store_unavailable(exc: BaseException) -> bool:
    """Whether `exc` says the database cannot serve now (read-only, full, unreachable,
    restarting, busy) rather than that the request or the code is wrong: the driver's own
    error decides where there is one."""
    for adapter in ADAPTERS:
        verdict = adapter.transient(exc)
        if verdict is not None:
            return verdict
    return generic_transient(exc)


def adapter_class(config: LedgerConfig) -> type[StoreAdapter]:
    """The adapter for the configured database (PostgreSQL when a URL is set); its
    class attributes answer capability questions before any store is opened."""
    return PostgresAdapter if config.is_postgres else SQLiteAdapter


def open_adapter(config: LedgerConfig) -> StoreAdapter:
    """Open the configured database through its adapter."""
    return adapter_class(config)(config)


__all__ = [
    "ADAPTERS",
    "CLAIMS_TABLE",
    "DUPLICATE_KEY_ERRORS",
    "IDEMPOTENCY_TABLE",
    "KEYS_TABLE",
    "RATE_TABLE",
    "TRACKING_TABLE",
    "TRANSIENT_ERRORS",
    "AppendListener",
    "DataKeyRow",
    "EventStoreApp",
    "IdempotencyRecord",
    "IdempotencyRow",
    "LogRow",
    "PostgresAdapter",
    "SQLiteAdapter",
    "StoreAdapter",
    "StoreUnavailable",
    "adapter_class",
    "open_adapter",
    "store_unavailable",
]
