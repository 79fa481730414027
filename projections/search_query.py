"""The search index's query side: per tenant, numpy arrays loaded lazily from the
`search_index` read model's tables (`projections/search_index.py`) and caught up from
the rows after its last loaded position (postings in a sorted, CSC-like layout plus a
small unsorted tail); a view as of position p masks chunk versions live at p, so N(p),
avgdl(p) and df(t, p) come from the same arrays the live search uses.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ledger.retrieval.change_logs import is_change_log
from ledger.storage.store import Store
from ledger.usecases.ports import ChunkState, IndexedChunk
from projections.corpus import CORPUS_TABLE, chunk_state
from projections.search_index import (
    BODY_DTYPE,
    FIELDS_DTYPE,
    PROJECTION_NAME,
    SEARCH_CHUNKS_TABLE,
    SEARCH_ERASURES_TABLE,
    TRACKING_TABLE,
    SearchIndexProjection,
)

log = logging.getLogger("citeledger.search_index")

STATE_CACHE_MAX = 50_000
OPEN = np.iinfo(np.int64).max  # live_to of a chunk version still live


def _unpack(text: str, dtype: np.dtype[Any]) -> npt.NDArray[Any]:
    return np.frombuffer(base64.b64decode(text), dtype=dtype)


class _Postings:
    """(key, row, value) triples: a sorted part (searchsorted on unique keys) and a tail.

    What readers see is one tuple of arrays, replaced whole by `seal` (never changed in
    place): a search on another thread reads a consistent set while a load adds rows."""

    TAIL_MAX = 50_000

    def __init__(self, value_dtype: str) -> None:
        self.value_dtype = value_dtype
        self._tail: list[tuple[npt.NDArray[np.uint64], npt.NDArray[np.int32], npt.NDArray[Any]]] = []
        empty_keys, empty_rows = np.zeros(0, np.uint64), np.zeros(0, np.int32)
        empty_values = np.zeros(0, value_dtype)
        # keys (unique, sorted), starts, rows, values; then the unsorted tail's keys, rows, values
        self._visible = (
            empty_keys,
            np.zeros(1, np.int64),
            empty_rows,
            empty_values,
            empty_keys,
            empty_rows,
            empty_values,
        )

    def add(
        self, keys: npt.NDArray[np.uint64], rows: npt.NDArray[np.int32], values: npt.NDArray[Any]
    ) -> None:
        if len(keys):
            self._tail.append((keys, rows, values.astype(self.value_dtype)))

    def seal(self) -> None:
        """Make appended postings visible (merging the tail into the sorted part when large)."""
        if not self._tail:
            return
        s_keys, s_starts, s_rows, s_values, t_keys, t_rows, t_values = self._visible
        keys = np.concatenate([t_keys, *(t[0] for t in self._tail)])
        rows = np.concatenate([t_rows, *(t[1] for t in self._tail)])
        values = np.concatenate([t_values, *(t[2] for t in self._tail)])
        self._tail = []
        if len(keys) > max(self.TAIL_MAX, len(s_rows) // 5):
            full_keys = np.concatenate([np.repeat(s_keys, np.diff(s_starts)), keys])
            order = np.argsort(full_keys, kind="stable")
            full_keys = full_keys[order]
            s_rows = np.concatenate([s_rows, rows])[order]
            s_values = np.concatenate([s_values, values])[order]
            s_keys, first = np.unique(full_keys, return_index=True)
            s_starts = np.append(first, len(full_keys)).astype(np.int64)
            keys, rows, values = np.zeros(0, np.uint64), np.zeros(0, np.int32), np.zeros(0, self.value_dtype)
        self._visible = (s_keys, s_starts, s_rows, s_values, keys, rows, values)

    def lookup(self, key: int) -> tuple[npt.NDArray[np.int32], npt.NDArray[Any]]:
        s_keys, s_starts, s_rows, s_values, t_keys, t_rows, t_values = self._visible
        at = int(np.searchsorted(s_keys, np.uint64(key)))
        rows, values = s_rows[:0], s_values[:0]
        if at < len(s_keys) and int(s_keys[at]) == key:
            rows = s_rows[s_starts[at] : s_starts[at + 1]]
            values = s_values[s_starts[at] : s_starts[at + 1]]
        if len(t_keys):
            hit = np.nonzero(t_keys == np.uint64(key))[0]
            if len(hit):
                rows = np.concatenate([rows, t_rows[hit]])
                values = np.concatenate([values, t_values[hit]])
        return rows, values


class _TenantIndex:
    def __init__(self) -> None:
        self.position = 0
        self.erased_through = 0
        self.live_from = np.zeros(0, np.int64)
        self.live_to = np.zeros(0, np.int64)
        self.length = np.zeros(0, np.int64)
        self.ordinal = np.zeros(0, np.int64)
        self.restricted = np.zeros(0, np.bool_)
        self.change_log = np.zeros(0, np.bool_)
        self.document_number = np.zeros(0, np.int64)
        self.document_numbers: dict[str, int] = {}
        self.chunks: list[IndexedChunk] = []
        self.row_of: dict[tuple[int, int], int] = {}
        # (last change, chunks then, the live mask past it, its live count and total length)
        self.settled: tuple[int, int, npt.NDArray[np.bool_], int, int] | None = None
        self.body = _Postings("u4")
        self.fields = _Postings("u1")

    def add(self, rows: Sequence[Any]) -> None:
        first = len(self.chunks)
        self.live_from = np.concatenate([self.live_from, [int(r["live_from_position"]) for r in rows]])
        self.live_to = np.concatenate(
            [
                self.live_to,
                [OPEN if r["live_to_position"] is None else int(r["live_to_position"]) for r in rows],
            ]
        ).astype(np.int64)
        self.length = np.concatenate([self.length, [int(r["length"]) for r in rows]]).astype(np.int64)
        self.ordinal = np.concatenate([self.ordinal, [int(r["ordinal"]) for r in rows]]).astype(np.int64)
        self.restricted = np.concatenate(
            [self.restricted, [r["sensitivity"] == "restricted" for r in rows]]
        ).astype(np.bool_)
        logs = {path: is_change_log(path) for path in {r["path"] for r in rows}}  # once per file
        self.change_log = np.concatenate([self.change_log, [logs[r["path"]] for r in rows]]).astype(np.bool_)
        numbers = self.document_numbers
        self.document_number = np.concatenate(
            [self.document_number, [numbers.setdefault(r["document_id"], len(numbers)) for r in rows]]
        ).astype(np.int64)
        for offset, row in enumerate(rows):
            index = first + offset
            chunk = IndexedChunk(
                row=index,
                live_from_position=int(row["live_from_position"]),
                ordinal=int(row["ordinal"]),
                document_id=row["document_id"],
                path=row["path"],
                sensitivity=row["sensitivity"],
            )
            self.chunks.append(chunk)
            self.row_of[(chunk.live_from_position, chunk.ordinal)] = index
            body = _unpack(row["terms"], BODY_DTYPE)
            self.body.add(body["h"], np.full(len(body), index, np.int32), body["tf"])
            fields = _unpack(row["fields"], FIELDS_DTYPE)
            self.fields.add(fields["h"], np.full(len(fields), index, np.int32), fields["f"])
        self.body.seal()
        self.fields.seal()


@dataclass(frozen=True)
class AsOfView:
    """One tenant's index as of `position` (implements `ledger.usecases.ports.CorpusView`)."""

    position: int
    live: npt.NDArray[np.bool_]
    lengths: npt.NDArray[np.int64]
    ordinals: npt.NDArray[np.int64]
    document_numbers: npt.NDArray[np.int64]
    restricted: npt.NDArray[np.bool_]
    change_logs: npt.NDArray[np.bool_]
    live_count: int
    total_length: int
    _index: _TenantIndex
    _hash: Callable[[str], int]

    def body_postings(self, term: str) -> tuple[npt.NDArray[np.int32], npt.NDArray[Any]]:
        rows, tf = self._index.body.lookup(self._hash(term))
        return self._live_only(rows, tf)

    def field_postings(self, term: str) -> tuple[npt.NDArray[np.int32], npt.NDArray[Any]]:
        rows, codes = self._index.fields.lookup(self._hash(term))
        return self._live_only(rows, codes)

    def _live_only(
        self, rows: npt.NDArray[np.int32], values: npt.NDArray[Any]
    ) -> tuple[npt.NDArray[np.int32], npt.NDArray[Any]]:
        """The postings of live rows (read only, as every posting array here)."""
        within = len(rows) == 0 or int(rows.max()) < len(self.live)
        if within and self.live_count == len(self.live):  # every row live (no version closed)
            return rows, values
        keep = self.live[rows] if within else self._live(rows)
        return rows[keep], values[keep]

    def _live(self, rows: npt.NDArray[np.int32]) -> npt.NDArray[np.bool_]:
        """Rows a load added after this view was taken are past its mask: not live here
        (they opened after its position)."""
        inside = rows < len(self.live)
        keep = np.zeros(len(rows), np.bool_)
        keep[inside] = self.live[rows[inside]]
        return keep

    def chunk(self, row: int) -> IndexedChunk:
        return self._index.chunks[row]


class StaleIndex(LookupError):
    """The read model has not reached the asked position yet."""


class SearchIndex:
    """In-memory per-tenant copies of the search read model (implements
    `ledger.usecases.ports.SearchIndexReader`)."""

    def __init__(
        self, store: Store, projection: SearchIndexProjection, catch_up: Callable[[], object]
    ) -> None:
        self.store = store
        self.projection = projection
        self._catch_up = catch_up
        self._tenants: dict[str, _TenantIndex] = {}
        # Corpus rows of chunk versions never change but for a scrub, which reloads the tenant.
        self._states: dict[tuple[str, int, int], ChunkState] = {}
        self._lock = threading.Lock()

    def refresh(self) -> int:
        """Apply what the log holds to the read model; its position after."""
        self._catch_up()
        return self.tracked_position()

    def tracked_position(self) -> int:
        rows = self.store.rows(
            f"SELECT position FROM {self.store.table(TRACKING_TABLE)} WHERE projection=?",
            (PROJECTION_NAME,),
        )
        return int(rows[0]["position"]) if rows else 0

    def view(self, tenant_id: str, position: int) -> AsOfView:
        try:
            return self._view(tenant_id, position)
        except StaleIndex:
            self._catch_up()  # behind the log (entries of another process): apply them once
            return self._view(tenant_id, position)

    def _view(self, tenant_id: str, position: int) -> AsOfView:
        with self._lock:
            index = self._load(tenant_id, position)
            # Past the last position that opened or closed a chunk version the mask stops
            # changing: live searches (one receipt further each time) reuse it.
            settled = index.settled
            lengths = index.length
            if settled is not None and position >= settled[0] and settled[1] == len(index.chunks):
                live, live_count, total_length = settled[2:]  # counted once per mask
            else:
                live = (index.live_from <= position) & (position < index.live_to)
                live_count, total_length = int(live.sum()), int(lengths[live].sum())
                last_change = max(
                    int(index.live_from.max(initial=0)),
                    int(index.live_to[index.live_to != OPEN].max(initial=0)),
                )
                if position >= last_change:
                    index.settled = (last_change, len(index.chunks), live, live_count, total_length)
            return AsOfView(
                position=position,
                live=live,
                lengths=lengths,
                ordinals=index.ordinal,
                document_numbers=index.document_number,
                restricted=index.restricted,
                change_logs=index.change_log,
                live_count=live_count,
                total_length=total_length,
                _index=index,
                _hash=self.projection.keys(self.store).hasher(tenant_id),
            )

    def chunk_states(self, tenant_id: str, chunks: list[IndexedChunk]) -> dict[int, ChunkState]:
        if not chunks:
            return {}
        store = self.store
        wanted = {(c.live_from_position, c.ordinal): c.row for c in chunks}
        found: dict[int, ChunkState] = {}
        for key, row in list(wanted.items()):
            cached = self._states.get((tenant_id, *key))
            if cached is not None:
                found[row] = cached
                del wanted[key]
        keys = sorted(wanted)
        for start in range(0, len(keys), 200):
            part = keys[start : start + 200]
            clause = " OR ".join("(live_from_position=? AND ordinal=?)" for _ in part)
            # The IN list steers the planner to the primary key: with the OR alone, SQLite
            # scans the tenant's rows once there are more than a few (cost grew with the corpus).
            positions = sorted({key[0] for key in part})
            rows = store.rows(
                f"SELECT * FROM {store.table(CORPUS_TABLE)} WHERE tenant_id=? "
                f"AND live_from_position IN ({', '.join('?' * len(positions))}) AND ({clause})",
                (tenant_id, *positions, *(value for key in part for value in key)),
            )
            for row in rows:
                at = wanted[(int(row["live_from_position"]), int(row["ordinal"]))]
                found[at] = chunk_state(row)
                if found[at].text is not None:
                    if len(self._states) > STATE_CACHE_MAX:
                        self._states.clear()
                    self._states[(tenant_id, int(row["live_from_position"]), int(row["ordinal"]))] = found[at]
        return found

    def forget(self, tenant_id: str | None = None) -> None:
        with self._lock:
            self._states.clear()
            if tenant_id is None:
                self._tenants.clear()
            else:
                self._tenants.pop(tenant_id, None)

    def _load(self, tenant_id: str, position: int) -> _TenantIndex:
        index = self._tenants.get(tenant_id)
        if index is not None and position <= index.position:
            return index
        store = self.store
        chunks, erasures = store.table(SEARCH_CHUNKS_TABLE), store.table(SEARCH_ERASURES_TABLE)
        with store.transaction(commit=False) as cursor:
            cursor.execute(
                store.sql(f"SELECT position FROM {store.table(TRACKING_TABLE)} WHERE projection=?"),
                (PROJECTION_NAME,),
            )
            found = cursor.fetchall()
            tracked = int(found[0]["position"]) if found else 0
            if position > tracked:
                raise StaleIndex(f"search index at position {tracked}, asked for {position}")
            cursor.execute(
                store.sql(f"SELECT MAX(position) AS last FROM {erasures} WHERE tenant_id=? AND position<=?"),
                (tenant_id, tracked),
            )
            erased = cursor.fetchall()[0]["last"] or 0
            if index is None or erased > index.erased_through:
                if index is not None:  # an erasure since this copy was loaded
                    self.projection.forget_terms(tenant_id)
                index = _TenantIndex()
                # A copy of the keys first: other threads' chunk_states write to the cache.
                for key in [k for k in list(self._states) if k[0] == tenant_id]:
                    del self._states[key]
            cursor.execute(
                store.sql(
                    f"SELECT * FROM {chunks} WHERE tenant_id=? AND live_from_position>? "
                    "AND live_from_position<=? ORDER BY live_from_position, ordinal"
                ),
                (tenant_id, index.position, tracked),
            )
            fresh = cursor.fetchall()
            cursor.execute(
                store.sql(
                    f"SELECT live_from_position, ordinal, live_to_position FROM {chunks} "
                    "WHERE tenant_id=? AND live_to_position>? AND live_to_position<=? "
                    "AND live_from_position<=?"
                ),
                (tenant_id, index.position, tracked, index.position),
            )
            closed = cursor.fetchall()
        fresh = [
            {
                **dict(row),
                "live_to_position": row["live_to_position"]
                if row["live_to_position"] is not None and row["live_to_position"] <= tracked
                else None,
            }
            for row in fresh
        ]
        if fresh:
            index.add(fresh)
        if closed:
            live_to = index.live_to.copy()
            for row in closed:
                at = index.row_of.get((int(row["live_from_position"]), int(row["ordinal"])))
                if at is not None:
                    live_to[at] = int(row["live_to_position"])
            index.live_to = live_to
            index.settled = None
        index.position = tracked
        index.erased_through = max(index.erased_through, int(erased))
        self._tenants[tenant_id] = index
        return index
