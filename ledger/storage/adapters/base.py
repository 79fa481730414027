"""The store adapter contract: every primitive the ledger needs from its database.

Why one class per backend: SQLite and PostgreSQL differ in placeholders, column
types, how a notification id comes back from an insert, how a cursor reports
its row count, how space is reclaimed, and how a multi-process DDL race is
avoided. Before, each caller branched on the dialect; now each difference has
exactly one home (`ledger/storage/adapters/sqlite.py`, `ledger/storage/adapters/postgres.py`)
and `tests/test_store_contract.py` runs the same behavioural suite against
both, as `eventsourcing` does for its recorders.

SQL that is the same text on both backends is written once here, in the base
class, through `sql()` and `table()`; a backend overrides only what differs.
Table names are constants, never input; every value is a bound parameter.
"""

from __future__ import annotations

from ledger.storage.adapters.core import (
    AdapterCore,
    AppendListener,
    EventStoreApp,
    LogRow,
    StoreUnavailable,
    caused_by,
    driver_error,
    generic_transient,
)
from ledger.storage.adapters.data_keys import KEYS_TABLE, DataKeyRow, DataKeyStatements
from ledger.storage.adapters.side_tables import (
    CLAIMS_TABLE,
    IDEMPOTENCY_TABLE,
    RATE_TABLE,
    TRACKING_TABLE,
    IdempotencyRecord,
    IdempotencyRow,
    SideTableStatements,
)

# The contract's names, where the backends and the store have always imported them from.
__all__ = [
    "CLAIMS_TABLE",
    "IDEMPOTENCY_TABLE",
    "KEYS_TABLE",
    "RATE_TABLE",
    "TRACKING_TABLE",
    "AdapterCore",
    "AppendListener",
    "DataKeyRow",
    "EventStoreApp",
    "IdempotencyRecord",
    "IdempotencyRow",
    "LogRow",
    "StoreAdapter",
    "StoreUnavailable",
    "caused_by",
    "driver_error",
    "generic_transient",
]


class StoreAdapter(DataKeyStatements, SideTableStatements):
    """One open database: eventsourcing's recorder plus the ledger's side tables. The contract
    by concern: `core` (connections, statement shape, the log), `data_keys`, `side_tables`."""
