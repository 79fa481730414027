"""The domain: event types, signed entries and their size limit, split entries (parts), the key
chain, time.

Imports `ledger.tlog` only.
"""
