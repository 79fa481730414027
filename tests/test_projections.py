"""Read models on real SQLite and PostgreSQL: read-your-writes, queries,
tenant isolation, as_of, lag, failure stops, rebuild == incremental."""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import StoredEvent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.config import LedgerConfig
from ledger.domain.entries import RecordedEvent
from ledger.domain.events import PolicySnapshot
from ledger.storage.store import EVENT_TOPIC_PREFIX, LEDGER_STREAM_ID, Store
from ledger.usecases.context import Caller, draft
from ledger.usecases.ports import ReceiptFilter
from ledger.writing.application import Ledger
from projections.base import Projection
from projections.catalog import default_projections
from projections.digest import digests
from projections.queries import ReadModels
from projections.runner import ProjectionRunner, embedded
from projections.views import HistoryFilter, InvalidCursor, TextUnavailable
from tests.conftest import fresh_config
from tests.factories import TENANT, UseCases, document_draft, retrieval_draft
from tests.projection_fixtures import Op, Scenario, ops


@pytest.fixture
def runner(ledger: Ledger) -> ProjectionRunner:
    return embedded(ledger)


@pytest.fixture
def reads(ledger: Ledger) -> ReadModels:
    return ReadModels(ledger.store)


def test_read_your_writes(ledger: Ledger, reads: ReadModels) -> None:
    cases = UseCases(ledger)
    doc = cases.ingest("alpha beta")
    receipt = cases.retrieve(doc, "what is alpha?")
    # No waiting: append returns after the projections applied the entry.
    view = reads.receipt(TENANT, receipt.payload["receipt_id"])
    assert view is not None and view.position == receipt.position and view.signature == receipt.signature
    assert view.body == receipt.payload and view.kid == receipt.kid
    citation_id = receipt.payload["selected_entries"][0]["citation_id"]
    citation = reads.citation(TENANT, citation_id)
    assert citation is not None and citation.state == "live" and citation.receipt_id == view.receipt_id
    assert reads.citation_text(citation, ledger.sealer) == "alpha beta"  # the cited passage
    chunks = reads.corpus_now(TENANT)
    assert [c.live_from_position for c in chunks] == [doc.position]
    assert reads.chunk_text(chunks[0], ledger.sealer) == "alpha beta"
    assert [e.position for e in reads.events(TENANT).items] == [doc.position, receipt.position]
    assert all(item.lag == 0 for item in cases.runner.lag())


def test_plain_text_never_reaches_a_read_model(ledger: Ledger) -> None:
    cases = UseCases(ledger)
    cases.retrieve(cases.ingest("SECRET-CHUNK-TEXT"), "SECRET-QUERY-TEXT")
    with ledger.store.transaction(commit=False) as cursor:
        for spec in (t for p in cases.runner.projections for t in p.tables):
            cursor.execute(f"SELECT * FROM {ledger.store.table(spec.name)}")
            dump = repr([dict(row) for row in cursor.fetchall()])
            assert "SECRET" not in dump, spec.name


def test_other_tenants_rows_are_invisible(
    ledger: Ledger, runner: ProjectionRunner, reads: ReadModels
) -> None:
    receipt = ledger.append(retrieval_draft(ledger, tenant="other"))
    ledger.append(document_draft(ledger, tenant="other"))
    rid = receipt.payload["receipt_id"]
    cid = receipt.payload["selected_entries"][0]["citation_id"]
    assert reads.receipt(TENANT, rid) is None and reads.receipt("other", rid) is not None
    assert reads.citation(TENANT, cid) is None and reads.citation("other", cid) is not None
    assert reads.receipts(TENANT).items == [] and reads.events(TENANT).items == []
    assert (
        reads.corpus_as_of(TENANT, ledger.size) == [] and len(reads.corpus_as_of("other", ledger.size)) == 1
    )
    assert reads.citations_as_of(TENANT, ledger.size) == []


def test_policy_snapshot_absent_and_null_pair_stay_distinct(
    ledger: Ledger, runner: ProjectionRunner, reads: ReadModels
) -> None:
    legacy = ledger.append(retrieval_draft(ledger))
    null_pair = ledger.append(
        retrieval_draft(
            ledger,
            snapshot=PolicySnapshot(bundle_hash=None, bundle_yaml=None, captured_at="2026-01-01T00:00:00Z"),
        )
    )
    legacy_view = reads.receipt(TENANT, legacy.payload["receipt_id"])
    null_view = reads.receipt(TENANT, null_pair.payload["receipt_id"])
    assert legacy_view is not None and null_view is not None
    assert not legacy_view.has_policy_snapshot and legacy_view.policy_snapshot is None
    assert null_view.has_policy_snapshot
    assert null_view.policy_snapshot == {
        "bundle_hash": None,
        "bundle_yaml": None,
        "captured_at": "2026-01-01T00:00:00Z",
    }


def test_lists_filter_and_page_with_cursors(
    ledger: Ledger, runner: ProjectionRunner, reads: ReadModels
) -> None:
    written = [ledger.append(retrieval_draft(ledger, f"q{i}", run_id=f"run-{i % 2}")) for i in range(7)]
    ledger.append(document_draft(ledger))
    seen: list[int] = []
    cursor = None
    while True:
        page = reads.receipts(TENANT, ReceiptFilter(run_id="run-0"), cursor=cursor, limit=2)
        seen.extend(r.position for r in page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == [e.position for e in written if e.envelope["run_id"] == "run-0"]
    newest = reads.events(TENANT, HistoryFilter(types=["RetrievalRecorded"]), limit=3, order="desc")
    assert [e.position for e in newest.items] == [e.position for e in written[::-1][:3]]
    following = reads.events(
        TENANT, HistoryFilter(types=["RetrievalRecorded"]), limit=3, order="desc", cursor=newest.next_cursor
    )
    assert [e.position for e in following.items] == [e.position for e in written[::-1][3:6]]
    by_receipt = reads.events(TENANT, HistoryFilter(receipt_id=written[2].payload["receipt_id"]))
    assert [e.position for e in by_receipt.items] == [written[2].position]
    ranged = reads.events(
        TENANT, HistoryFilter(from_position=written[1].position, to_position=written[3].position)
    )
    assert [e.position for e in ranged.items] == [e.position for e in written[1:4]]
    timed = reads.events(TENANT, HistoryFilter(recorded_from=written[4].envelope["recorded_at"]))
    assert timed.items[0].position == written[4].position
    assert reads.events(TENANT, HistoryFilter(actor="nobody")).items == []
    with pytest.raises(InvalidCursor):
        reads.events(TENANT, cursor="not-a-cursor")


def test_corpus_citations_and_receipts_as_of(
    ledger: Ledger, runner: ProjectionRunner, reads: ReadModels
) -> None:
    scenario = Scenario(ledger)
    v1 = ledger.append(scenario.draft(Op("ingest", TENANT, doc=0, chunks=2)))
    other = ledger.append(scenario.draft(Op("ingest", TENANT, doc=1, chunks=1)))
    cited = ledger.append(scenario.draft(Op("retrieve", TENANT, cites=(0,))))
    v2 = ledger.append(scenario.draft(Op("ingest", TENANT, doc=0, chunks=1)))
    removed = ledger.append(scenario.draft(Op("remove", TENANT, doc=1)))
    scrub = ledger.append(scenario.draft(Op("scrub_doc", TENANT, doc=0)))

    def versions(position: int) -> list[tuple[str, int]]:
        return sorted((c.version_id, c.ordinal) for c in reads.corpus_as_of(TENANT, position))

    assert versions(v1.position - 1) == []
    assert versions(v1.position) == [("doc-acme-0-v1", 0), ("doc-acme-0-v1", 1)]
    assert versions(other.position) == [("doc-acme-0-v1", 0), ("doc-acme-0-v1", 1), ("doc-acme-1-v1", 0)]
    assert versions(v2.position) == [("doc-acme-0-v2", 0), ("doc-acme-1-v1", 0)]
    assert versions(removed.position) == [("doc-acme-0-v2", 0)]
    # The superseded version, seen from before it was superseded, is still open there.
    old = [c for c in reads.corpus_as_of(TENANT, other.position) if c.version_id == "doc-acme-0-v1"]
    assert all(c.live_to_position is None for c in old)
    before_scrub = reads.corpus_as_of(TENANT, removed.position)[0]
    after_scrub = reads.corpus_as_of(TENANT, scrub.position)[0]
    assert not before_scrub.scrubbed and after_scrub.scrubbed and after_scrub.text is None
    with pytest.raises(TextUnavailable):
        reads.chunk_text(after_scrub, ledger.sealer)

    citation_id = cited.payload["selected_entries"][0]["citation_id"]
    [as_then] = reads.citations_as_of(TENANT, removed.position)
    [as_now] = reads.citations_as_of(TENANT, scrub.position)
    assert as_then.citation_id == citation_id and as_then.state == "live"
    assert as_now.state == "scrubbed" and as_now.snapshot is None
    current = reads.citation(TENANT, citation_id)
    assert current is not None and current.state == "scrubbed"
    with pytest.raises(TextUnavailable):
        reads.citation_text(current, ledger.sealer)
    assert reads.citations_as_of(TENANT, cited.position - 1) == []
    assert [r.position for r in reads.receipts_as_of(TENANT, scrub.position)] == [cited.position]
    assert reads.receipts_as_of(TENANT, cited.position - 1) == []


def test_citation_expiry_is_decided_at_read_time(
    ledger: Ledger, runner: ProjectionRunner, reads: ReadModels
) -> None:
    receipt = ledger.append(retrieval_draft(ledger))  # expires_at 2027-05-22
    cid = receipt.payload["selected_entries"][0]["citation_id"]
    early = reads.citation(TENANT, cid, now=datetime(2027, 5, 21, tzinfo=UTC))
    late = reads.citation(TENANT, cid, now=datetime(2027, 5, 22, tzinfo=UTC))
    assert early is not None and early.state == "live"
    assert late is not None and late.state == "expired"
    with pytest.raises(TextUnavailable):
        reads.citation_text(late, ledger.sealer)


def test_lag_is_head_minus_applied(ledger: Ledger, reads: ReadModels) -> None:
    runner = ProjectionRunner(ledger.store)  # not attached: nothing applies on commit
    ledger.append_batch([retrieval_draft(ledger) for _ in range(5)])
    lags = {item.projection: item.lag for item in reads.lag()}
    assert lags == {p.name: ledger.size for p in runner.projections}
    runner.catch_up(until_position=3)
    assert all(item.applied_position >= 3 for item in runner.lag())
    runner.catch_up()
    assert {item.lag for item in runner.lag()} == {0}


class ExplodingReceipts(Projection):
    """A receipts-like model with a bug: it cannot handle the second retrieval."""

    name = "exploding"
    version = 1
    tables = default_projections()[1].tables

    def __init__(self) -> None:
        self.inner = default_projections()[1]
        self.tables, self.indexes = self.inner.tables, self.inner.indexes

    def table_ddl(self, store: Store) -> list[str]:
        return self.inner.table_ddl(store)

    def apply(self, cursor: Any, store: Store, events: Sequence[RecordedEvent]) -> None:
        for event in events:
            self.inner.apply(cursor, store, [event])  # written first: must be rolled back
            if event.type == "RetrievalRecorded" and event.payload["task"].get("task_id") == "boom":
                raise RuntimeError("cannot handle this receipt")


def test_a_failing_event_stops_only_that_projection(
    ledger: Ledger, reads: ReadModels, caplog: pytest.LogCaptureFixture
) -> None:
    projections = [*default_projections()[:1], ExplodingReceipts()]
    runner = ProjectionRunner(ledger.store, projections, batch_size=50)
    good = ledger.append(retrieval_draft(ledger))
    bad_draft = retrieval_draft(ledger)
    payload = bad_draft.payload.model_copy(  # type: ignore[union-attr]
        update={"task": bad_draft.payload.task.model_copy(update={"task_id": "boom"})}  # type: ignore[union-attr]
    )
    bad = ledger.append(draft(Caller(TENANT, "svc-rag"), payload))
    later = ledger.append(retrieval_draft(ledger))
    with caplog.at_level(logging.ERROR, logger="citeledger.projections"):
        runner.catch_up()
    assert f"projection exploding stopped at position {bad.position}" in caplog.text
    health = runner.health()
    assert not health["ok"]
    stopped = health["projections"]["exploding"]
    assert stopped["status"] == "failed" and stopped["failed_position"] == bad.position
    assert stopped["applied_position"] == good.position
    assert "cannot handle this receipt" in stopped["error"]
    # Nothing of the failing event, nor after it, was written; the event before it was.
    assert reads.receipt(TENANT, good.payload["receipt_id"]) is not None
    assert reads.receipt(TENANT, bad.payload["receipt_id"]) is None
    assert reads.receipt(TENANT, later.payload["receipt_id"]) is None
    # The other projection went on to the head.
    assert health["projections"]["history"]["applied_position"] == later.position
    # Stopped means stopped: more events and catch-ups do not skip past it.
    ledger.append(retrieval_draft(ledger))
    runner.catch_up()
    assert runner.states()["exploding"].position == good.position


def _boom_draft(ledger: Ledger) -> Any:
    bad_draft = retrieval_draft(ledger)
    payload = bad_draft.payload.model_copy(  # type: ignore[union-attr]
        update={"task": bad_draft.payload.task.model_copy(update={"task_id": "boom"})}  # type: ignore[union-attr]
    )
    return draft(Caller(TENANT, "svc-rag"), payload)


def test_a_failing_event_in_the_write_transaction_stops_only_that_projection(
    ledger: Ledger, reads: ReadModels
) -> None:
    """Applied with the entries (PostgreSQL: all projections under one savepoint, their tracking
    moved by one statement; SQLite: a savepoint each): a projection that fails is rolled back
    alone, nothing of it stays, and the catch-up after the commit stops it at that event; the
    other goes on."""
    runner = embedded(ledger, [*default_projections()[:1], ExplodingReceipts()])
    good = [ledger.append(retrieval_draft(ledger)) for _ in range(2)]  # the second: all at once
    bad = ledger.append(_boom_draft(ledger))
    later = ledger.append(retrieval_draft(ledger))
    states = runner.states()
    assert states["exploding"].status == "failed" and states["exploding"].position == good[-1].position
    assert reads.receipt(TENANT, bad.payload["receipt_id"]) is None
    assert reads.receipt(TENANT, good[-1].payload["receipt_id"]) is not None
    assert states["history"].position == later.position
    assert [e.position for e in reads.events(TENANT).items] == [e.position for e in [*good, bad, later]]


def test_projections_behind_or_not_are_each_applied_once(ledger: Ledger, reads: ReadModels) -> None:
    """With the entries (together on PostgreSQL) when every tracking row is right behind the
    entries; when one is not (another runner reset it), the others one by one and that one
    by the catch-up after the commit: every entry applied exactly once to every read model."""
    runner = embedded(ledger)
    first = [ledger.append(retrieval_draft(ledger)) for _ in range(2)]
    other = ProjectionRunner(ledger.store)
    other.reset(["history"])
    second = ledger.append(retrieval_draft(ledger))
    other.catch_up()
    third = ledger.append(retrieval_draft(ledger))
    positions = [e.position for e in [*first, second, third]]
    assert [e.position for e in reads.events(TENANT).items] == positions
    assert {state.position for state in runner.states().values()} == {third.position}
    assert all(item.lag == 0 for item in runner.lag())


def test_an_unknown_event_type_stops_projections_at_that_position(
    ledger: Ledger, runner: ProjectionRunner
) -> None:
    ledger.append(retrieval_draft(ledger))
    # A future writer's event type this code does not know (written under the ledger's lock).
    head = ledger.size
    entry = (
        b'{"actor":"x","event_id":"' + uuid.uuid4().hex.encode() + b'","kid":"0000000000000000",'
        b'"payload":{},"position":' + str(head + 1).encode() + b',"prev_hash":"' + b"0" * 64 + b'",'
        b'"recorded_at":"2026-01-01T00:00:00.000000Z","run_id":null,"signature":"x",'
        b'"tenant_id":"acme","trace_id":null,"type":"FutureThing","v":1}'
    )
    ledger.recorder.insert_events(
        [StoredEvent(LEDGER_STREAM_ID, head + 1, EVENT_TOPIC_PREFIX + "FutureThing", entry)]
    )
    runner.catch_up()
    for name, state in runner.states().items():
        assert state.status == "failed" and state.failed_position == head + 1, name
        assert state.position == head and "unknown event type 'FutureThing'" in (state.error or "")


# -- rebuild == incremental, with crashes ------------------------------------------------


class SimulatedCrash(BaseException):
    """Not an Exception: like a kill, it is not handled as a bad event."""


class CrashAfter(Projection):
    """Wraps a projection; the n-th apply writes its rows and then 'dies' mid-transaction."""

    name = "wrapped"
    version = 0
    tables = ()

    def __init__(self, inner: Projection, crash_on_call: int) -> None:
        self.inner, self.crash_on_call, self.calls = inner, crash_on_call, 0
        self.name, self.version, self.tables = inner.name, inner.version, inner.tables  # type: ignore[misc]
        self.indexes = inner.indexes  # type: ignore[misc]

    def table_ddl(self, store: Store) -> list[str]:
        return self.inner.table_ddl(store)

    def apply(self, cursor: Any, store: Store, events: Sequence[RecordedEvent]) -> None:
        self.inner.apply(cursor, store, events)
        self.calls += 1
        if self.calls == self.crash_on_call:
            raise SimulatedCrash


def project_with_crashes(store: Store, rng: random.Random, head: int, restarts: int) -> None:
    """Catch up in random steps; every step is a new runner (a restarted process),
    some die mid-batch."""
    for _ in range(restarts):
        wrapped = [
            CrashAfter(p, rng.randint(1, 4)) if rng.random() < 0.5 else p for p in default_projections()
        ]
        runner = ProjectionRunner(store, wrapped, batch_size=rng.randint(1, 7))
        try:
            runner.catch_up(stop_position=rng.randint(1, max(1, head)))
        except SimulatedCrash:
            pass
    ProjectionRunner(store, batch_size=rng.randint(1, 50)).catch_up()


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=ops(), seed=st.integers(0, 2**32 - 1), embedded_mode=st.booleans())
def test_incremental_with_crashes_equals_rebuild(
    backend: str, tmp_path: Path, operations: list[Op], seed: int, embedded_mode: bool
) -> None:
    rng = random.Random(seed)
    with fresh_config(backend, tmp_path) as config:
        ledger = Ledger(config)
        try:
            scenario = Scenario(ledger)
            if embedded_mode:
                embedded(ledger)  # half the examples project on every commit as well
            drafts = [scenario.draft(op) for op in operations]
            while drafts:
                take = rng.randint(1, 4)
                ledger.append_batch(drafts[:take])
                drafts = drafts[take:]
                if rng.random() < 0.4:
                    project_with_crashes(ledger.store, rng, ledger.size, restarts=rng.randint(0, 2))
            project_with_crashes(ledger.store, rng, ledger.size, restarts=rng.randint(0, 3))
            runner = ProjectionRunner(ledger.store)
            assert runner.applied_position() == ledger.size
            assert all(state.status == "running" for state in runner.states().values())
            incremental = digests(runner.projections, ledger.store)
            runner.rebuild()
            assert digests(runner.projections, ledger.store) == incremental
            # A rebuild into a scratch SQLite file from the same log agrees too (cross-dialect).
            scratch = Store(LedgerConfig(data_dir=tmp_path / ("scratch-" + uuid.uuid4().hex[:8])))
            try:
                from projections.tracking import NotificationSource

                ProjectionRunner(scratch, source=NotificationSource(ledger.store)).catch_up()
                assert digests(default_projections(), scratch) == incremental
            finally:
                scratch.close()
        finally:
            ledger.close()


def test_as_of_digest_is_a_function_of_the_log_prefix(
    ledger: Ledger, runner: ProjectionRunner, tmp_path: Path
) -> None:
    scenario = Scenario(ledger)
    for op in [
        Op("ingest", TENANT, doc=0, chunks=2),
        Op("retrieve", TENANT, cites=(0,)),
        Op("ingest", TENANT, doc=0, chunks=1),
    ]:
        ledger.append(scenario.draft(op))
    prefix = ledger.size
    for op in [Op("scrub_doc", TENANT, doc=0), Op("remove", TENANT, doc=0), Op("scrub_citation", TENANT)]:
        ledger.append(scenario.draft(op))
    from projections.tracking import NotificationSource

    scratch = Store(LedgerConfig(data_dir=tmp_path / "scratch"))
    try:
        ProjectionRunner(scratch, source=NotificationSource(ledger.store)).catch_up(stop_position=prefix)
        expected = digests(default_projections(), scratch)
        assert digests(runner.projections, ledger.store, as_of=prefix) == digests(
            default_projections(), scratch, as_of=prefix
        )
        # The live models moved on (scrub, removal) yet their as-of view matches the prefix rebuild
        # on everything but the ciphertext columns a scrub erases.
        assert digests(runner.projections, ledger.store) != expected
    finally:
        scratch.close()


def test_version_change_rebuilds_that_model(ledger: Ledger, runner: ProjectionRunner) -> None:
    ledger.append_batch([retrieval_draft(ledger) for _ in range(3)])
    before = digests(runner.projections, ledger.store)

    receipts = type(runner.projections[1])

    class ReceiptsNext(receipts):  # type: ignore[misc,valid-type]
        version = receipts.version + 1

    upgraded: list[Projection] = [*default_projections()[:1], ReceiptsNext(), *default_projections()[2:]]
    fresh = ProjectionRunner(ledger.store, upgraded)
    assert fresh.states()["receipts"].position == 0
    assert fresh.states()["receipts"].version == ReceiptsNext.version
    fresh.catch_up()
    after = digests(upgraded, ledger.store)
    assert (
        after["history"] == before["history"] and after["receipts"] != before["receipts"]
    )  # version in digest


FactoryT = Callable[..., Ledger]
