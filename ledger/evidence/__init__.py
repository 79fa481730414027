"""Evidence checked offline: whole-log verification, receipt bundles, exports.

Imports `ledger.tlog` and `ledger.domain` only: no store, no driver (an auditor's machine).
"""
