"""Storage: the eventsourcing store, the dialect adapters (SQLite, PostgreSQL), the tile store,
side tables (witnessed sizes, claims), and the store reader verification uses.

Imports `ledger.tlog`, `ledger.domain`, `ledger.evidence`, `ledger.config`.
"""
