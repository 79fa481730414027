"""The store adapter contract, run against every backend (issue item 9).

As `eventsourcing` tests its recorders: one abstract suite (`StoreContract`,
not collected by itself) states what every adapter primitive must do, and one
subclass per backend supplies a fresh real store (a new SQLite directory, a new
PostgreSQL schema; no mocks). A new backend is done when its subclass passes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from functools import partial
from typing import ClassVar

import pytest
from eventsourcing.persistence import StoredEvent

from ledger.storage.adapters import (
    CLAIMS_TABLE,
    DUPLICATE_KEY_ERRORS,
    IDEMPOTENCY_TABLE,
    KEYS_TABLE,
    RATE_TABLE,
    TRACKING_TABLE,
    TRANSIENT_ERRORS,
    IdempotencyRecord,
    PostgresAdapter,
    SQLiteAdapter,
    StoreAdapter,
)
from ledger.storage.store import CHECKPOINT_STREAM_ID, LEDGER_STREAM_ID, Store
from tests.conftest import fresh_config

T0 = 1_700_000_000.0  # an explicit clock: the bucket and claim primitives take `now`


def _event(position: int, stream: object = LEDGER_STREAM_ID) -> StoredEvent:
    return StoredEvent(
        originator_id=stream,
        originator_version=position,
        topic="citeledger:event:Test",
        state=f"entry {position}".encode(),
    )


def _record(tenant: str, key: str, position: int = 1) -> IdempotencyRecord:
    return IdempotencyRecord(tenant, key, f"fp-{key}", 201, b'{"ok": true}', position, T0)


class StoreContract:
    """Every adapter primitive's behaviour; subclasses name the backend."""

    backend: ClassVar[str]
    adapter_type: ClassVar[type[StoreAdapter]]

    @pytest.fixture(scope="class")
    @classmethod
    def store(cls, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
        """One new store per backend (a new SQLite directory, a new PostgreSQL schema),
        emptied before each test by `adapter`: each test sees a fresh store, without
        paying PostgreSQL's schema and DDL cost (~0.4 s) for every test."""
        with fresh_config(cls.backend, tmp_path_factory.mktemp(cls.backend)) as config:
            store = Store(config)
            adapter = store.adapter
            adapter.create_tables(
                *adapter.data_keys_ddl(),
                *adapter.idempotency_ddl(),
                *adapter.rate_bucket_ddl(),
                *adapter.claims_ddl(),
                *adapter.tracking_ddl(),
            )
            try:
                yield store
            finally:
                store.close()

    @pytest.fixture
    def adapter(self, store: Store) -> StoreAdapter:
        adapter = store.adapter
        tables = [
            KEYS_TABLE,
            IDEMPOTENCY_TABLE,
            RATE_TABLE,
            CLAIMS_TABLE,
            TRACKING_TABLE,
            adapter.events_table,
        ]
        with adapter.transaction(commit=True) as cursor:
            for table in tables:
                cursor.execute(f"DELETE FROM {adapter.table(table)}")
        return adapter

    # -- shape -------------------------------------------------------------------
    def test_store_picks_this_backend(self, adapter: StoreAdapter) -> None:
        assert type(adapter) is self.adapter_type
        assert set(adapter.duplicate_errors) <= set(DUPLICATE_KEY_ERRORS)
        assert set(adapter.transient_errors) <= set(TRANSIENT_ERRORS)

    def test_ddl_is_idempotent(self, adapter: StoreAdapter) -> None:
        adapter.create_tables(*adapter.data_keys_ddl(), *adapter.tracking_ddl())

    def test_rowcount_counts_touched_rows(self, adapter: StoreAdapter) -> None:
        with adapter.transaction(commit=True) as cursor:
            for name in ("a", "b", "c"):
                _add_tracking(adapter, cursor, name)
            cursor.execute(adapter.sql(f"UPDATE {adapter.table(TRACKING_TABLE)} SET version=? "), (2,))
            assert adapter.rowcount(cursor) == 3

    # -- the log -------------------------------------------------------------------
    def test_insert_log_returns_increasing_notification_ids(self, adapter: StoreAdapter) -> None:
        with adapter.transaction(commit=True) as cursor:
            first = adapter.insert_log(cursor, [_event(1), _event(2)])
        with adapter.transaction(commit=True) as cursor:
            second = adapter.insert_log(cursor, [_event(1, CHECKPOINT_STREAM_ID), _event(3)])
        ids = first + second
        assert len(ids) == 4
        assert ids == sorted(ids) and len(set(ids)) == 4
        with adapter.transaction(commit=False) as cursor:
            rows = adapter.log_page(cursor, 0, 10)
        assert [row.notification_id for row in rows] == ids
        assert [row.version for row in rows] == [1, 2, 1, 3]
        ledger_key, checkpoint_key = (
            adapter.stream_key(LEDGER_STREAM_ID),
            adapter.stream_key(CHECKPOINT_STREAM_ID),
        )
        assert [row.stream for row in rows] == [ledger_key, ledger_key, checkpoint_key, ledger_key]
        assert rows[1].state == b"entry 2" and rows[1].topic == "citeledger:event:Test"

    def test_log_page_pages_after_a_notification_id(self, adapter: StoreAdapter) -> None:
        with adapter.transaction(commit=True) as cursor:
            ids = adapter.insert_log(cursor, [_event(p) for p in range(1, 6)])
        with adapter.transaction(commit=False) as cursor:
            page = adapter.log_page(cursor, ids[1], 2)
            rest = adapter.log_page(cursor, page[-1].notification_id, 10)
        assert [row.version for row in page] == [3, 4]
        assert [row.version for row in rest] == [5]

    def test_taken_position_conflicts_and_writes_nothing(self, adapter: StoreAdapter) -> None:
        with adapter.transaction(commit=True) as cursor:
            adapter.insert_log(cursor, [_event(1)])
        with pytest.raises(adapter.duplicate_errors), adapter.transaction(commit=True) as cursor:
            adapter.idempotency_insert(cursor, [_record("t", "k")])
            adapter.insert_log(cursor, [_event(2), _event(1)])
        with adapter.transaction(commit=False) as cursor:
            rows = adapter.log_page(cursor, 0, 10)
        assert [(row.version, row.state) for row in rows] == [(1, b"entry 1")]
        assert adapter.idempotency_lookup("t", "k") is None  # the whole transaction rolled back
        with adapter.transaction(commit=True) as cursor:  # and the position is still free
            adapter.insert_log(cursor, [_event(2)])

    def test_append_listener_wakes_on_insert_or_backend_polls(self, adapter: StoreAdapter) -> None:
        listener = adapter.listen_appends()
        if listener is None:
            assert not adapter.scale_out  # the follower polls; only one process writes
            return
        try:
            with adapter.transaction(commit=True) as cursor:
                adapter.insert_log(cursor, [_event(1)])
            started = time.monotonic()
            listener.wait(5.0)
            assert time.monotonic() - started < 2.0
        finally:
            listener.close()

    # -- data keys -----------------------------------------------------------------
    def test_data_key_create_then_get_and_first_creator_wins(self, adapter: StoreAdapter) -> None:
        assert adapter.data_key_get("tenant/a") is None
        assert adapter.data_key_create("tenant/a", "a", b"wrapped-1", "2024-01-01T00:00:00Z")
        assert not adapter.data_key_create("tenant/a", "a", b"wrapped-2", "2024-01-01T00:00:01Z")
        row = adapter.data_key_get("tenant/a")
        assert row is not None
        assert (row.tenant_id, row.wrapped, row.destroyed) == ("a", b"wrapped-1", False)

    def test_data_keys_create_many_counts_the_keys_it_stored(self, adapter: StoreAdapter) -> None:
        """What `DataKeyStore.ensure` relies on to skip reading its new keys back: a ref that
        exists (another process created it first) is left as it is and not counted."""
        assert adapter.data_key_create("tenant/a", "a", b"first", "2024-01-01T00:00:00Z")
        rows = [("tenant/a", "a", b"second"), ("tenant/b", "b", b"only")]
        assert adapter.data_keys_create_many(rows, "2024-01-01T00:00:01Z") == 1
        assert adapter.data_keys_create_many([("tenant/c", "c", b"c")], "2024-01-01T00:00:02Z") == 1
        stored = adapter.data_keys_get_many(["tenant/a", "tenant/b", "tenant/c"])
        assert {ref: row.wrapped for ref, row in stored.items()} == {
            "tenant/a": b"first",
            "tenant/b": b"only",
            "tenant/c": b"c",
        }

    def test_data_key_destroy_is_final_and_idempotent(self, adapter: StoreAdapter) -> None:
        adapter.data_key_create("document/a/d1", "a", b"wrapped", "2024-01-01T00:00:00Z")
        assert adapter.data_key_destroy("document/a/d1", "a", "erasure", "2024-01-02T00:00:00Z")
        row = adapter.data_key_get("document/a/d1")
        assert row is not None and row.destroyed and row.wrapped is None
        assert not adapter.data_key_destroy("document/a/d1", "a", "erasure", "2024-01-03T00:00:00Z")
        assert not adapter.data_key_create("document/a/d1", "a", b"again", "2024-01-04T00:00:00Z")
        row = adapter.data_key_get("document/a/d1")
        assert row is not None and row.destroyed and row.wrapped is None

    def test_destroying_an_unused_ref_leaves_a_tombstone(self, adapter: StoreAdapter) -> None:
        assert adapter.data_key_destroy("subject/a/s1", "a", "erasure", "2024-01-01T00:00:00Z")
        row = adapter.data_key_get("subject/a/s1")
        assert row is not None and row.destroyed and row.wrapped is None
        assert not adapter.data_key_create("subject/a/s1", "a", b"wrapped", "2024-01-02T00:00:00Z")

    def test_another_tenant_cannot_destroy_a_key(self, adapter: StoreAdapter) -> None:
        adapter.data_key_create("tenant/a", "a", b"wrapped", "2024-01-01T00:00:00Z")
        assert not adapter.data_key_destroy("tenant/a", "b", "erasure", "2024-01-02T00:00:00Z")
        row = adapter.data_key_get("tenant/a")
        assert row is not None and not row.destroyed and row.wrapped == b"wrapped"

    def test_destructions_are_listed_until_recorded(self, adapter: StoreAdapter) -> None:
        adapter.data_key_destroy("expiry/a/2024-01-01:d1", "a", "retention", "2024-01-02T00:00:00Z")
        adapter.data_key_destroy("document/a/d2", "a", "erasure", "2024-01-02T00:00:00Z")
        adapter.data_key_destroy("document/b/d3", "b", "erasure", "2024-01-02T00:00:00Z")
        assert adapter.data_keys_unrecorded("a") == [
            ("document/a/d2", "a", "erasure"),
            ("expiry/a/2024-01-01:d1", "a", "retention"),
        ]
        assert len(adapter.data_keys_unrecorded()) == 3
        adapter.data_keys_mark_recorded(["document/a/d2", "document/b/d3"], 7)
        assert adapter.data_keys_unrecorded() == [("expiry/a/2024-01-01:d1", "a", "retention")]

    def test_live_refs_are_a_bounded_range_of_undestroyed_keys(self, adapter: StoreAdapter) -> None:
        for day in ("2024-01-01", "2024-01-02", "2024-01-03"):
            adapter.data_key_create(f"expiry/a/{day}:d", "a", b"w", "2024-01-01T00:00:00Z")
        adapter.data_key_create("expiry/b/2024-01-01:d", "b", b"w", "2024-01-01T00:00:00Z")
        adapter.data_key_destroy("expiry/a/2024-01-02:d", "a", "retention", "2024-01-03T00:00:00Z")
        assert adapter.data_keys_live("a", "expiry/a/", "expiry/a/2024-01-03") == ["expiry/a/2024-01-01:d"]
        assert adapter.data_keys_live("a", "expiry/a/", "expiry/a0", limit=1) == ["expiry/a/2024-01-01:d"]

    def test_purge_residue_runs_and_keeps_the_table(self, adapter: StoreAdapter) -> None:
        adapter.data_key_create("tenant/a", "a", b"secret-bytes", "2024-01-01T00:00:00Z")
        adapter.data_key_destroy("tenant/a", "a", "erasure", "2024-01-02T00:00:00Z")
        adapter.purge_data_key_residue()
        row = adapter.data_key_get("tenant/a")
        assert row is not None and row.destroyed and row.wrapped is None
        assert adapter.data_key_create("tenant/b", "b", b"w", "2024-01-02T00:00:00Z")

    # -- idempotency records ---------------------------------------------------------
    def test_idempotency_insert_then_find_and_lookup(self, adapter: StoreAdapter) -> None:
        with adapter.transaction(commit=True) as cursor:
            adapter.idempotency_insert(cursor, [_record("a", "k1"), _record("b", "k1", 2)])
            inside = adapter.idempotency_find(cursor, [("a", "k1"), ("a", "missing")])
        assert set(inside) == {("a", "k1")}
        row = adapter.idempotency_lookup("b", "k1")
        assert row is not None
        assert (row.fingerprint, row.status_code, row.response) == ("fp-k1", 201, b'{"ok": true}')
        assert adapter.idempotency_lookup("c", "k1") is None

    def test_idempotency_find_reads_many_keys(self, adapter: StoreAdapter) -> None:
        keys = [("a", f"k{i}") for i in range(450)]
        with adapter.transaction(commit=True) as cursor:
            adapter.idempotency_insert(cursor, [_record(t, k) for t, k in keys])
        with adapter.transaction(commit=False) as cursor:
            assert set(adapter.idempotency_find(cursor, [*keys, ("a", "nope")])) == set(keys)

    def test_idempotency_find_keeps_tenants_apart_across_chunks(self, adapter: StoreAdapter) -> None:
        recorded = [("a", f"k{i}") for i in range(700)] + [("b", f"k{i}") for i in range(0, 700, 2)]
        with adapter.transaction(commit=True) as cursor:
            adapter.idempotency_insert(cursor, [_record(t, k) for t, k in recorded])
        asked = [("a", f"k{i}") for i in range(0, 700, 3)] + [("b", f"k{i}") for i in range(700)]
        with adapter.transaction(commit=False) as cursor:
            found = adapter.idempotency_find(cursor, asked)
        assert set(found) == set(asked) & set(recorded)
        assert all(row.tenant_id == tenant and row.idem_key == key for (tenant, key), row in found.items())

    def test_idempotency_duplicate_key_is_refused(self, adapter: StoreAdapter) -> None:
        with adapter.transaction(commit=True) as cursor:
            adapter.idempotency_insert(cursor, [_record("a", "k")])
        duplicate = IdempotencyRecord("a", "k", "other", 500, b"{}", 9, T0)
        with pytest.raises(adapter.duplicate_errors), adapter.transaction(commit=True) as cursor:
            adapter.idempotency_insert(cursor, [duplicate])
        row = adapter.idempotency_lookup("a", "k")
        assert row is not None and row.fingerprint == "fp-k"

    # -- the rate-limit bucket ---------------------------------------------------------
    def test_bucket_grants_from_a_full_bucket(self, adapter: StoreAdapter) -> None:
        take = partial(adapter.rate_bucket_take, "t", returned=0, rate=1.0, burst=10, now=T0)
        tokens, granted = take(want=3)
        assert (granted, tokens) == (3, pytest.approx(7.0))
        tokens, granted = take(want=5)
        assert (granted, tokens) == (5, pytest.approx(2.0))

    def test_bucket_grants_one_when_short_then_refuses(self, adapter: StoreAdapter) -> None:
        take = partial(adapter.rate_bucket_take, returned=0, rate=1.0, burst=5, now=T0)
        take("t", want=4)
        tokens, granted = take("t", want=4)
        assert (granted, tokens) == (1, pytest.approx(0.0))
        tokens, granted = take("t", want=1)
        assert granted == 0 and tokens < 1
        assert take("u", want=1)[1] == 1  # buckets are per key

    def test_bucket_refills_at_the_rate_up_to_the_burst(self, adapter: StoreAdapter) -> None:
        take = partial(adapter.rate_bucket_take, "t", returned=0, rate=2.0, burst=10)
        take(want=10, now=T0)
        tokens, granted = take(want=3, now=T0 + 1.5)
        assert (granted, tokens) == (3, pytest.approx(0.0))
        tokens, granted = take(want=1, now=T0 + 100)
        assert (granted, tokens) == (1, pytest.approx(9.0))

    def test_bucket_credits_returned_tokens(self, adapter: StoreAdapter) -> None:
        take = partial(adapter.rate_bucket_take, "t", want=1, rate=0.001, burst=10, now=T0)
        take(want=8, returned=0)
        tokens, granted = take(returned=5)
        assert (granted, tokens) == (1, pytest.approx(6.0))
        tokens, granted = take(returned=50)
        assert (granted, tokens) == (1, pytest.approx(9.0))  # capped at the burst

    # -- document claims -----------------------------------------------------------------
    def test_claim_is_exclusive_until_released(self, adapter: StoreAdapter) -> None:
        stale = T0 - 120
        assert adapter.claim_take("a", "d", "owner-1", now=T0, stale_before=stale)
        assert not adapter.claim_take("a", "d", "owner-2", now=T0 + 1, stale_before=stale + 1)
        assert adapter.claim_take("a", "other", "owner-2", now=T0 + 1, stale_before=stale + 1)
        adapter.claim_release("a", "d", "owner-2")  # not the holder: no effect
        assert not adapter.claim_take("a", "d", "owner-2", now=T0 + 2, stale_before=stale + 2)
        adapter.claim_release("a", "d", "owner-1")
        assert adapter.claim_take("a", "d", "owner-2", now=T0 + 3, stale_before=stale + 3)

    def test_stale_claim_is_taken_over(self, adapter: StoreAdapter) -> None:
        assert adapter.claim_take("a", "d", "dead", now=T0, stale_before=T0 - 120)
        later = T0 + 121
        assert adapter.claim_take("a", "d", "alive", now=later, stale_before=later - 120)
        adapter.claim_release("a", "d", "dead")  # the dead holder's late release frees nothing
        assert not adapter.claim_take("a", "d", "third", now=later + 1, stale_before=later - 119)

    def test_claim_has_one_winner_under_contention(self, adapter: StoreAdapter) -> None:
        winners: list[str] = []
        barrier = threading.Barrier(4)

        def contend(owner: str) -> None:
            barrier.wait()
            if adapter.claim_take("a", "d", owner, now=T0, stale_before=T0 - 120):
                winners.append(owner)

        threads = [threading.Thread(target=contend, args=(f"o{i}",)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(winners) == 1

    # -- projection tracking ----------------------------------------------------------------
    def test_tracking_compare_and_set_succeeds_once(self, adapter: StoreAdapter) -> None:
        with adapter.transaction(commit=True) as cursor:
            _add_tracking(adapter, cursor, "p")
        assert _advance(adapter, "p", expected=0, to=5)
        assert not _advance(adapter, "p", expected=0, to=7)  # stale: another runner moved it
        assert _advance(adapter, "p", expected=5, to=7)
        assert _tracking(adapter, "p") == (7, 70)

    def test_tracking_compare_and_set_fails_on_a_stopped_projection(self, adapter: StoreAdapter) -> None:
        with adapter.transaction(commit=True) as cursor:
            _add_tracking(adapter, cursor, "p")
            cursor.execute(
                adapter.sql(f"UPDATE {adapter.table(TRACKING_TABLE)} SET status='failed' WHERE projection=?"),
                ("p",),
            )
        assert not _advance(adapter, "p", expected=0, to=5)
        assert not _advance(adapter, "missing", expected=0, to=5)

    def test_tracking_move_rolls_back_with_its_transaction(self, adapter: StoreAdapter) -> None:
        with adapter.transaction(commit=True) as cursor:
            _add_tracking(adapter, cursor, "p")
        with pytest.raises(RuntimeError), adapter.transaction(commit=True) as cursor:
            assert adapter.tracking_advance(
                cursor, "p", expected_notification_id=0, notification_id=3, position=3, updated_at="x"
            )
            raise RuntimeError("read-model write failed")
        assert _tracking(adapter, "p") == (0, 0)


def _add_tracking(adapter: StoreAdapter, cursor: object, name: str) -> None:
    cursor.execute(  # type: ignore[attr-defined]
        adapter.sql(
            f"INSERT INTO {adapter.table(TRACKING_TABLE)} "
            "(projection, version, notification_id, position, status, updated_at) "
            "VALUES (?, 1, 0, 0, 'running', 'now')"
        ),
        (name,),
    )


def _advance(adapter: StoreAdapter, name: str, *, expected: int, to: int) -> bool:
    with adapter.transaction(commit=True) as cursor:
        return adapter.tracking_advance(
            cursor,
            name,
            expected_notification_id=expected,
            notification_id=to,
            position=to * 10,
            updated_at="t",
        )


def _tracking(adapter: StoreAdapter, name: str) -> tuple[int, int]:
    with adapter.transaction(commit=False) as cursor:
        cursor.execute(
            adapter.sql(
                f"SELECT notification_id, position FROM {adapter.table(TRACKING_TABLE)} WHERE projection=?"
            ),
            (name,),
        )
        row = cursor.fetchone()
    return int(row["notification_id"]), int(row["position"])


class TestSQLiteStore(StoreContract):
    backend = "sqlite"
    adapter_type = SQLiteAdapter


class TestPostgresStore(StoreContract):
    backend = "postgres"
    adapter_type = PostgresAdapter


def test_every_backend_runs_the_contract() -> None:
    """A new adapter is not done until it has a subclass of the contract here."""
    covered = {cls.adapter_type for cls in StoreContract.__subclasses__()}
    assert covered == set(StoreAdapter.__subclasses__())
