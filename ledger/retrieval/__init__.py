"""Retrieval's pure parts: chunking, the tokenizer, markdown sources, the replay diff.

Imports `ledger.domain`, `ledger.config`.
"""
