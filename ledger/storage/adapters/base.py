"""The store adapter contract: every primitive the ledger needs from its database.

Why one class per backend: SQLite and PostgreSQL differ in placeholders, column
types, how a notification id comes back from an insert, how a cursor reports
its row count, how space is reclaimed, and how a multi-process DDL race is
avoided. Before, each caller branched on the dialect; now each difference has
exactly one home (`ledger/storage/adapters/sqlite.py`, `ledger/storage/adapters/postgres.py`)
and `tests/test_store_contract.py` runs the same behavioural suite against
both, as `eventsourcing` does for its recorders.

SQL that is the same text on both backends is written once, in the contract's classes
(`core`, `data_keys`, `side_tables`, which `StoreAdapter` combines), through `sql()` and
`table()`; a backend overrides only what differs.
Table names are constants, never input; every value is a bound parameter.
"""

from __future__ import annotations

from ledger.storage.adapters.data_keys import DataKeyStatements
from ledger.storage.adapters.side_tables import SideTableStatements


class StoreAdapter(DataKeyStatements, SideTableStatements):
    """One open database: eventsourcing's recorder plus the ledger's side tables. The contract
    by concern: `core` (connections, statement shape, the log), `data_keys`, `side_tables`."""
