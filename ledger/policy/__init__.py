"""Policy: bounded YAML, rules and verdicts, globs without backtracking, front matter.

Imports `ledger.domain`, `ledger.deadline`.
"""
