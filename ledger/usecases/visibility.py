"""Who may see a restricted chunk: the one rule every surface applies.

A chunk of a `restricted` document reaches a caller only when the caller's scopes
hold `knowledge.restricted.read`: its text, snippets, path, heading path and id. The
rule is built in: no policy bundle can lift it (a bundle may only add rules). Search
ranks as if the chunks the caller may not see were never ingested (`VisibleCorpus`),
a recorded retrieval that cites one is refused exactly like a citation of a chunk the
ledger does not hold, and a replay answers without them (`restricted_chunk_ids`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import numpy as np

from ledger.usecases.ports import CorpusView, IndexedChunk
from ledger.usecases.scopes import RESTRICTED_SCOPE


def sees_restricted(scopes: Collection[str]) -> bool:
    return RESTRICTED_SCOPE in scopes


def may_see(scopes: Collection[str], sensitivity: str) -> bool:
    """Whether a caller holding `scopes` may be shown anything of a chunk of this sensitivity."""
    return sensitivity != "restricted" or sees_restricted(scopes)


def narrowed(held: Collection[str], claimed: Iterable[str] | None) -> frozenset[str]:
    """The scopes a task ran under: what it claims (its envelope's `auth_scope`), narrowed to
    what the token holds; never widened. No claim: the token's scopes."""
    return frozenset(held) if claimed is None else frozenset(held) & frozenset(claimed)


def restricted_chunk_ids(entries: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """Chunk ids among `entries` (dicts with `chunk_id` and `sensitivity`) that only the
    restricted scope may see."""
    return frozenset(str(e["chunk_id"]) for e in entries if not may_see((), str(e["sensitivity"])))


@dataclass(frozen=True)
class VisibleCorpus:
    """A corpus view without the chunk versions a caller may not see: N, avgdl, df and
    every posting as if they had never been ingested, so no score, gap or count of an
    answer depends on them (implements `ledger.usecases.ports.CorpusView`)."""

    inner: CorpusView
    live: Any  # numpy bool array: live at the position and visible
    live_count: int
    total_length: int

    # What hiding chunks leaves as it is: read through to the inner view.
    position = property(attrgetter("inner.position"))
    lengths = property(attrgetter("inner.lengths"))
    ordinals = property(attrgetter("inner.ordinals"))
    document_numbers = property(attrgetter("inner.document_numbers"))
    restricted = property(attrgetter("inner.restricted"))
    change_logs = property(attrgetter("inner.change_logs"))

    def body_postings(self, term: str) -> tuple[Any, Any]:
        rows, counts = self.inner.body_postings(term)
        keep = self.live[rows]
        return rows[keep], counts[keep]

    def field_postings(self, term: str) -> tuple[Any, Any]:
        rows, codes = self.inner.field_postings(term)
        keep = self.live[rows]
        return rows[keep], codes[keep]

    def chunk(self, row: int) -> IndexedChunk:
        return self.inner.chunk(row)


def visible_corpus(view: CorpusView, scopes: Collection[str]) -> tuple[CorpusView, int]:
    """`view` as a caller with `scopes` may rank it, and how many live chunk versions it
    withholds. The count is the tenant's at that position, whatever the query: a count of
    the restricted chunks a query matches would confirm guessed words one query at a time."""
    if sees_restricted(scopes):
        return view, 0
    hidden = view.live & view.restricted
    withheld = int(np.count_nonzero(hidden))
    if withheld == 0:
        return view, 0
    # Subtracted rather than summed again: restricted versions are usually the few.
    total = view.total_length - int(np.asarray(view.lengths)[np.flatnonzero(hidden)].sum())
    return VisibleCorpus(view, view.live & ~view.restricted, view.live_count - withheld, total), withheld
