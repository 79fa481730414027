"""The read API the HTTP layer and replay call. Every query is scoped to one
tenant: another tenant's rows are never returned (they look absent).

Lists page by log position with an opaque cursor; `as_of(position)` views
show the corpus, citations and receipts as they stood after that position.
Sealed text is returned sealed; `citation_text` / `chunk_text` decrypt on
demand through the ledger's sealer, so plain text never lands in a table.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any, Unpack

from ledger.domain.timestamps import format_timestamp, parse_timestamp
from ledger.retrieval.question_words import search_words
from ledger.storage.store import Store
from ledger.usecases.ports import SEARCH_ENGINE_PREFIX, Order, PageRequest, ReceiptFilter
from ledger.writing.sealing import KeyDestroyed, Sealer
from projections.citations import CITATIONS_TABLE
from projections.corpus import CORPUS_TABLE
from projections.history import HISTORY_TABLE
from projections.question_query import question_rows
from projections.receipt_index import RECEIPTS_TABLE, receipt_bodies
from projections.rows import from_row
from projections.tracking import ProjectionLag, read_lag
from projections.views import (
    ChunkView,
    CitationView,
    HistoryEntry,
    HistoryFilter,
    Page,
    ReceiptView,
    T,
    TextUnavailable,
    chunk_view,
    citation_view,
    decode_cursor,
    encode_cursor,
    receipt_view,
)

MAX_PAGE = 500
MAX_AS_OF_ROWS = 100_000
# A list counts its matches up to this many and then says "more than": a count that stays
# fast on any ledger size (filters without an index of their own read a row per match;
# docs/benchmarks/lists.md).
COUNT_LIMIT = 1_000
ALL_RECEIPTS = ReceiptFilter()  # no narrowing
ALL_HISTORY = HistoryFilter()


class ReadModels:
    """Queries over the read models in one store (SQLite file or PostgreSQL schema)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    # -- receipts ----------------------------------------------------------------
    def receipt(self, tenant_id: str, receipt_id: str) -> ReceiptView | None:
        rows = self.store.rows(
            f"SELECT * FROM {self.store.table(RECEIPTS_TABLE)} WHERE tenant_id=? AND receipt_id=?",
            (tenant_id, receipt_id),
        )
        return self._receipt_views(rows)[0] if rows else None

    def receipts(
        self,
        tenant_id: str,
        filters: ReceiptFilter = ALL_RECEIPTS,
        *,
        count: bool = True,
        **paging: Unpack[PageRequest],
    ) -> Page[ReceiptView]:
        cursor, limit, order = _asked(paging)
        conditions, params = ["tenant_id=?"], [tenant_id]
        for column in ("mode", "status", "engine", "actor", "trace_id", "run_id", "parent_receipt_id"):
            value = getattr(filters, column)
            if value is not None:
                conditions.append(f"{column}=?")
                params.append(value)
        # No index of their own: matched within the tenant's rows with LIKE, as when they were
        # matched in the receipt's JSON (so SQLite still ignores ASCII case, PostgreSQL does not).
        if filters.task_id is not None:
            conditions.append("task_id LIKE ? ESCAPE '!'")
            params.append(_like_literal(filters.task_id))
        if filters.document_id is not None:  # every cited id, each with a space around it
            conditions.append("document_ids LIKE ? ESCAPE '!'")
            params.append(f"% {_like_literal(filters.document_id)} %")
        if filters.kind is not None:
            _kind(conditions, params, filters.kind)
        _ranges(conditions, params, filters.from_position, filters.to_position)
        _times(conditions, params, filters.recorded_from, filters.recorded_to)
        if filters.q is not None:  # the question index leads (projections/question_query.py)
            _check_page(limit, order)
            after = None if cursor is None else decode_cursor(cursor)
            words = search_words(filters.q)
            rows = question_rows(
                self.store,
                tenant_id,
                words,
                conditions,
                params,
                after=after,
                limit=limit + 1,
                descending=order == "desc",
            )
            page = _paged(self._receipt_views(rows), limit, len(rows))
            if cursor is None and page.next_cursor is None:
                return page  # one page holds every match: its count is exact
            # Counting every match would cost the whole intersection: "more than" this page's rows.
            return replace(page, total=len(page.items), total_exact=False)
        rows, total = self._page(RECEIPTS_TABLE, conditions, params, cursor, limit, order, count)
        return _paged(self._receipt_views(rows), limit, total)

    def receipts_as_of(
        self, tenant_id: str, position: int, *, limit: int = MAX_AS_OF_ROWS
    ) -> list[ReceiptView]:
        rows = self.store.rows(
            f"SELECT * FROM {self.store.table(RECEIPTS_TABLE)} "
            "WHERE tenant_id=? AND position<=? ORDER BY position LIMIT ?",
            (tenant_id, position, limit),
        )
        return self._receipt_views(rows)

    def _receipt_views(self, rows: list[Any]) -> list[ReceiptView]:
        """Views of receipt index rows, each with its payload read from the log (one read)."""
        return [
            receipt_view(row, body) for row, body in zip(rows, receipt_bodies(self.store, rows), strict=True)
        ]

    # -- citations ---------------------------------------------------------------
    def citation(
        self, tenant_id: str, citation_id: str, *, now: datetime | None = None
    ) -> CitationView | None:
        rows = self.store.rows(
            f"SELECT * FROM {self.store.table(CITATIONS_TABLE)} WHERE tenant_id=? AND citation_id=?",
            (tenant_id, citation_id),
        )
        return citation_view(rows[0], None, now) if rows else None

    def citations_as_of(
        self, tenant_id: str, position: int, *, now: datetime | None = None, limit: int = MAX_AS_OF_ROWS
    ) -> list[CitationView]:
        rows = self.store.rows(
            f"SELECT * FROM {self.store.table(CITATIONS_TABLE)} "
            "WHERE tenant_id=? AND position<=? ORDER BY position, citation_id LIMIT ?",
            (tenant_id, position, limit),
        )
        return [citation_view(r, position, now) for r in rows]

    def citation_text(self, citation: CitationView, sealer: Sealer) -> str:
        """Decrypt a citation's snapshot now; TextUnavailable when expired or scrubbed."""
        if citation.state != "live" or citation.snapshot is None:
            raise TextUnavailable("chunk_retention_expired")
        try:
            return sealer.unseal(citation.snapshot, tenant_id=citation.tenant_id)
        except KeyDestroyed:
            raise TextUnavailable("chunk_retention_expired") from None

    # -- corpus --------------------------------------------------------------------
    def corpus_as_of(self, tenant_id: str, position: int, *, limit: int = MAX_AS_OF_ROWS) -> list[ChunkView]:
        """Every chunk live right after `position`.

        Two index ranges on (tenant, live_to, live_from): still-open versions, and
        versions closed after `position`; live_from is filtered inside the index, so
        only matching rows are read, whatever the length of the log."""
        table = self.store.table(CORPUS_TABLE)
        rows = self.store.rows(
            f"SELECT * FROM (SELECT * FROM {table} "
            "WHERE tenant_id=? AND live_to_position IS NULL AND live_from_position<=? "
            f"UNION ALL SELECT * FROM {table} "
            "WHERE tenant_id=? AND live_to_position>? AND live_from_position<=?) AS live "
            "ORDER BY path, start_line, chunk_id LIMIT ?",
            (tenant_id, position, tenant_id, position, position, limit),
        )
        return [chunk_view(r, position) for r in rows]

    def corpus_now(self, tenant_id: str, *, limit: int = MAX_AS_OF_ROWS) -> list[ChunkView]:
        rows = self.store.rows(
            f"SELECT * FROM {self.store.table(CORPUS_TABLE)} "
            "WHERE tenant_id=? AND live_to_position IS NULL ORDER BY path, start_line, chunk_id LIMIT ?",
            (tenant_id, limit),
        )
        return [chunk_view(r, None) for r in rows]

    def chunk_text(self, chunk: ChunkView, sealer: Sealer) -> str:
        if chunk.text is None:
            raise TextUnavailable("chunk_retention_expired")
        try:
            return sealer.unseal(chunk.text, tenant_id=chunk.tenant_id)
        except KeyDestroyed:
            raise TextUnavailable("chunk_retention_expired") from None

    # -- history ---------------------------------------------------------------------
    def events(
        self, tenant_id: str, filters: HistoryFilter = ALL_HISTORY, **paging: Unpack[PageRequest]
    ) -> Page[HistoryEntry]:
        cursor, limit, order = _asked(paging)
        conditions, params = ["tenant_id=?"], [tenant_id]
        if filters.types:
            conditions.append(f"type IN ({', '.join('?' * len(filters.types))})")
            params.extend(filters.types)
        for column in ("actor", "trace_id", "run_id", "receipt_id"):
            value = getattr(filters, column)
            if value is not None:
                conditions.append(f"{column}=?")
                params.append(value)
        _ranges(conditions, params, filters.from_position, filters.to_position)
        _times(conditions, params, filters.recorded_from, filters.recorded_to)
        rows, total = self._page(HISTORY_TABLE, conditions, params, cursor, limit, order)
        return _paged([from_row(HistoryEntry, r) for r in rows], limit, total)

    def event_counts(self, tenant_id: str, recorded_from: str) -> list[tuple[str, str, int]]:
        """(day, type, count) of the tenant's events recorded since `recorded_from` (the
        console's overview chart): one grouped, indexed query."""
        rows = self.store.rows(
            f"SELECT substr(recorded_at, 1, 10) AS day, type, COUNT(*) AS n "
            f"FROM {self.store.table(HISTORY_TABLE)} WHERE tenant_id=? AND recorded_at>=? "
            "GROUP BY substr(recorded_at, 1, 10), type ORDER BY day, type",
            (tenant_id, recorded_from),
        )
        return [(str(r["day"]), str(r["type"]), int(r["n"])) for r in rows]

    # -- lag -------------------------------------------------------------------------
    def lag(self) -> list[ProjectionLag]:
        return read_lag(self.store)

    def _page(
        self,
        table: str,
        conditions: list[str],
        params: list[Any],
        cursor: str | None,
        limit: int,
        order: Order,
        count: bool = True,
    ) -> tuple[list[Any], int]:
        """One page of rows and how many match in all (the filter without the cursor),
        counted up to COUNT_LIMIT + 1 so the count costs at most that many rows (0 without
        `count`)."""
        _check_page(limit, order)
        total = 0
        if count:
            counted = self.store.rows(
                f"SELECT COUNT(*) AS n FROM (SELECT 1 FROM {self.store.table(table)} "
                f"WHERE {' AND '.join(conditions)} LIMIT ?) AS matching",
                [*params, COUNT_LIMIT + 1],
            )
            total = int(counted[0]["n"])
        if cursor is not None:
            conditions.append("position>?" if order == "asc" else "position<?")
            params.append(decode_cursor(cursor))
        statement = (
            f"SELECT * FROM {self.store.table(table)} WHERE {' AND '.join(conditions)} "
            f"ORDER BY position {order.upper()} LIMIT ?"
        )
        return self.store.rows(statement, [*params, limit + 1]), total


def _asked(paging: PageRequest) -> tuple[str | None, int, Order]:
    """The page asked for, what was left out filled in (`PageRequest`)."""
    unknown = paging.keys() - PageRequest.__optional_keys__  # what a signature would refuse
    if unknown:
        raise TypeError(f"unexpected page keywords {sorted(unknown)}")
    return paging.get("cursor"), paging.get("limit", 50), paging.get("order", "asc")


def _check_page(limit: int, order: Order) -> None:
    if not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be between 1 and {MAX_PAGE}")
    if order not in ("asc", "desc"):
        raise ValueError("order must be asc or desc")


def _like_literal(value: str) -> str:
    return value.replace("!", "!!").replace("%", "!%").replace("_", "!_")


def _kind(conditions: list[str], params: list[Any], kind: str) -> None:
    """`receipt_kind` as a condition on the indexed columns."""
    if kind == "replay":
        conditions.append("mode=?")
        params.append("as_of_replay")
        return
    if kind not in ("search", "external"):
        raise ValueError("kind must be one of: search, external, replay")
    conditions.append("mode=?")
    params.append("live")
    conditions.append("engine LIKE ?" if kind == "search" else "engine NOT LIKE ?")
    params.append(SEARCH_ENGINE_PREFIX + "%")


def _ranges(conditions: list[str], params: list[Any], low: int | None, high: int | None) -> None:
    if low is not None:
        conditions.append("position>=?")
        params.append(low)
    if high is not None:
        conditions.append("position<=?")
        params.append(high)


def _times(conditions: list[str], params: list[Any], start: str | None, end: str | None) -> None:
    # recorded_at is always written as YYYY-MM-DDTHH:MM:SS.ffffffZ, so text order is time order
    # once the bounds are normalised to the same shape.
    if start is not None:
        conditions.append("recorded_at>=?")
        params.append(_normalise_time(start))
    if end is not None:
        conditions.append("recorded_at<?")
        params.append(_normalise_time(end))


def _normalise_time(value: str) -> str:
    try:
        moment = parse_timestamp(value)
    except ValueError:
        raise ValueError(f"not an RFC 3339 timestamp: {value!r}") from None
    return format_timestamp(moment)


def _paged(items: list[T], limit: int, total: int) -> Page[T]:
    cursor = None
    if len(items) > limit:
        items = items[:limit]
        cursor = encode_cursor(getattr(items[-1], "position"))  # noqa: B009
    return Page(items, cursor, min(total, COUNT_LIMIT), total <= COUNT_LIMIT)
