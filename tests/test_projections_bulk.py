"""A rebuild's large batches (one COPY per table on PostgreSQL) leave every read model as a
catch-up of one entry per transaction (one INSERT per row) does, duplicate keys included."""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

import pytest

from ledger.storage.adapters.postgres import PostgresAdapter
from ledger.writing.application import Ledger
from projections.citations import CITATIONS_TABLE
from projections.digest import digests
from projections.runner import ProjectionRunner
from tests.conftest import fresh_config
from tests.factories import TENANT
from tests.projection_fixtures import TENANTS, Op, Scenario


def _operations() -> list[Op]:
    ops = [Op("ingest", tenant, doc=doc, chunks=3) for tenant in TENANTS for doc in range(3)]
    ops.append(Op("ingest", TENANTS[0], doc=3, chunks=60))  # search rows (bytes columns) by COPY too
    for i in range(40):
        tenant = TENANTS[i % 2]
        ops.append(Op("retrieve", tenant, snapshot=("absent", "null_pair", "bundle")[i % 3], cites=(0, 1, 2)))
        if i == 20:  # a scrub and a removal inside the batch: inserts before them must land first
            ops += [Op("scrub_doc", tenant, doc=1), Op("remove", tenant, doc=2), Op("scrub_citation", tenant)]
    return ops


def test_bulk_rebuild_equals_one_entry_per_transaction(
    backend: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="citeledger.projections")
    with fresh_config(backend, tmp_path) as config:
        ledger = Ledger(config)
        try:
            scenario = Scenario(ledger)
            drafts = [scenario.draft(op) for op in _operations()]
            # The same receipt (same receipt and citation ids) recorded again later: the first wins.
            again = [d for d in drafts if d.type == "RetrievalRecorded"][::7]
            drafts += [dataclasses.replace(d, event_id=os.urandom(16).hex()) for d in again]
            for start in range(0, len(drafts), 25):
                ledger.append_batch(drafts[start : start + 25])

            one_by_one = ProjectionRunner(ledger.store, batch_size=1)
            one_by_one.catch_up()
            expected = digests(one_by_one.projections, ledger.store)
            rows = ledger.store.rows(
                f"SELECT COUNT(*) AS n FROM {ledger.store.table(CITATIONS_TABLE)} WHERE tenant_id=?",
                (TENANT,),
            )
            assert int(rows[0]["n"]) >= (
                PostgresAdapter.copy_from_rows or 0
            )  # the rebuild's batch goes the bulk way

            bulk = ProjectionRunner(ledger.store, batch_size=1000)
            bulk.rebuild()
            assert bulk.applied_position() == ledger.size
            assert all(state.status == "running" for state in bulk.states().values())
            assert digests(bulk.projections, ledger.store) == expected

            # Batches still large enough to go the bulk way, the repeated receipts in a later one
            # than their first recording: the rows already stored are left alone.
            bulk.reset()
            bulk.batch_size = 30  # ~70 citation rows a batch
            bulk.catch_up()
            assert all(state.status == "running" for state in bulk.states().values())
            assert digests(bulk.projections, ledger.store) == expected
            # ... and no batch failed into the one-entry-at-a-time retry (which would hide it).
            assert "group batch failed" not in caplog.text
        finally:
            ledger.close()
