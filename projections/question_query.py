"""The question index's query side: a page of receipts whose question has every word of `q`.

The plan, the same on both stores: hash the words (the tenant's key), count each word's
postings well enough to find the rarest (`_postings`), and walk the rarest word's posting list in
the page's order; every other word is one primary-key probe per candidate, the receipt one
more, and the walk stops when the page is full. A word with no posting answers an empty page
without walking anything. The receipt filters (mode, times, ...) apply to the joined receipt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ledger.storage.store import Store
from projections.question_index import QUESTION_WORDS_TABLE, question_keys
from projections.receipt_index import RECEIPTS_TABLE

# Postings counted before a word counts as common; ties at a cap are counted up to the next.
PROBE_CAPS = (2_000, 25_000, 250_000)


def question_rows(
    store: Store,
    tenant_id: str,
    words: Sequence[str],
    conditions: Sequence[str],
    params: Sequence[Any],
    *,
    after: int | None,
    limit: int,
    descending: bool,
) -> list[Any]:
    """Receipt rows (the receipt index's columns) in position order from `after` (exclusive),
    at most `limit`, whose question holds every one of `words`. `conditions` name the
    receipt index's columns unqualified (the posting table's columns have other names)."""
    keys = question_keys(store)
    hashes = sorted({keys.word_hash(tenant_id, word) for word in words})
    table = store.table(QUESTION_WORDS_TABLE)
    # One word leads without counting (an empty list is an empty page all the same).
    counts = _postings(store, table, tenant_id, hashes) if len(hashes) > 1 else {h: 1 for h in hashes}
    if not hashes or min(counts.values()) == 0:
        return []
    lead, *others = sorted(hashes, key=lambda h: counts[h])
    where = ["w.word_tenant_id=?", "w.word_hash=?"]
    values: list[Any] = [tenant_id, lead]
    if after is not None:
        where.append("w.receipt_position<?" if descending else "w.receipt_position>?")
        values.append(after)
    for other in others:
        where.append(
            f"EXISTS (SELECT 1 FROM {table} x WHERE x.word_tenant_id=w.word_tenant_id "
            "AND x.word_hash=? AND x.receipt_position=w.receipt_position)"
        )
        values.append(other)
    where.append("position=w.receipt_position")
    direction = "DESC" if descending else "ASC"
    # CROSS JOIN: SQLite keeps the posting list as the outer loop (it reorders any other join).
    statement = (
        f"SELECT r.* FROM {table} w CROSS JOIN {store.table(RECEIPTS_TABLE)} r "
        f"WHERE {' AND '.join([*where, *conditions])} "
        f"ORDER BY w.receipt_position {direction} LIMIT ?"
    )
    return store.rows(statement, [*values, *params, limit])


def _postings(store: Store, table: str, tenant_id: str, hashes: Sequence[int]) -> dict[int, int]:
    """How many receipts hold each word, well enough to pick the rarest: counted up to the
    first of `PROBE_CAPS` (an index range each, one statement), and again up to the next cap
    only while every word reaches it (then none is rare, and the least common still leads)."""
    counts: dict[int, int] = {}
    params = [value for h in hashes for value in (tenant_id, h)]
    for cap in PROBE_CAPS:
        parts = [
            f"SELECT {i} AS i, COUNT(*) AS n FROM (SELECT 1 AS one FROM {table} "
            f"WHERE word_tenant_id=? AND word_hash=? LIMIT {cap}) p{i}"
            for i in range(len(hashes))
        ]
        for row in store.rows(" UNION ALL ".join(parts), params):
            counts[hashes[int(row["i"])]] = int(row["n"])
        if min(counts.values()) < cap:
            break
    return counts
