"""Shared fixtures: every ledger test runs on a real SQLite file and on the
real PostgreSQL server (a fresh schema per test, dropped afterwards).

PostgreSQL being unreachable is an error, never a skip.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ledger.config import LedgerConfig
from ledger.writing.application import Ledger

PG_DSN = os.environ.get("CITELEDGER_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")


def pg_connect() -> psycopg.Connection[Any]:
    try:
        return psycopg.connect(PG_DSN, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:  # fail loudly: the suite needs the real server
        raise RuntimeError(f"PostgreSQL at {PG_DSN} is required for the test suite: {exc}") from exc


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@contextmanager
def fresh_schema(prefix: str = "t_", digits: int = 16) -> Iterator[str]:
    """A new PostgreSQL schema's name, the schema dropped with all it holds afterwards."""
    schema = prefix + uuid.uuid4().hex[:digits]
    _schema_ddl(f'CREATE SCHEMA "{schema}"')
    try:
        yield schema
    finally:
        _schema_ddl(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


_kept: list[psycopg.Connection[Any]] = []


def _schema_ddl(statement: str) -> None:
    """On one connection kept per test process: a new connection is a new server process
    (~10-30 ms of CPU between client and server), and every PostgreSQL test made two."""
    for attempt in (1, 2):
        if not _kept or _kept[0].closed:
            _kept[:] = [pg_connect()]
        try:
            _kept[0].execute(statement)
            return
        except psycopg.OperationalError:  # the kept session ended: once more on a new one
            _kept[0].close()
            if attempt == 2:
                raise


@contextmanager
def fresh_config(backend: str, root: Path) -> Iterator[LedgerConfig]:
    """A ledger config on a new SQLite directory or a new PostgreSQL schema, dropped afterwards."""
    data_dir = root / uuid.uuid4().hex[:12]
    if backend == "sqlite":
        yield LedgerConfig(data_dir=data_dir, run_checkpointer=False)
        return
    with fresh_schema() as schema:
        yield LedgerConfig(
            data_dir=data_dir, database_url=f"{PG_DSN}?schema={schema}", run_checkpointer=False
        )


@pytest.fixture
def ledger_config(backend: str, tmp_path: Path) -> Iterator[LedgerConfig]:
    with fresh_config(backend, tmp_path) as config:
        yield config


@pytest.fixture
def open_ledger(ledger_config: LedgerConfig) -> Iterator[Callable[..., Ledger]]:
    opened: list[Ledger] = []

    def factory(**overrides: Any) -> Ledger:
        config = LedgerConfig(**{**ledger_config.__dict__, **overrides})
        ledger = Ledger(config)
        opened.append(ledger)
        return ledger

    yield factory
    for ledger in opened:
        ledger.close()


@pytest.fixture
def ledger(open_ledger: Callable[..., Ledger]) -> Ledger:
    return open_ledger()


class RawStore:
    """Direct SQL on the events table, for tamper tests (what an attacker with DB access does)."""

    def __init__(self, config: LedgerConfig) -> None:
        self.config = config

    def execute(self, sqlite_sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        if self.config.database_url is None:
            import sqlite3

            conn = sqlite3.connect(self.config.sqlite_path)
            try:
                rows = conn.execute(sqlite_sql, params).fetchall()
                conn.commit()
                return rows
            finally:
                conn.close()
        schema = self.config.database_url.split("schema=")[1]
        with pg_connect() as conn:
            conn.execute(f'SET search_path TO "{schema}"')
            # eventsourcing names the PostgreSQL events table after the application.
            statement = sqlite_sql.replace("?", "%s").replace("stored_events", "citeledger_events")
            cursor = conn.execute(statement, params)  # type: ignore[arg-type]
            return cursor.fetchall() if cursor.description else []

    def stream_value(self, stream: uuid.UUID) -> Any:
        return stream.hex if self.config.database_url is None else stream


@pytest.fixture
def raw_store(ledger_config: LedgerConfig) -> RawStore:
    return RawStore(ledger_config)


# The longest test modules start first (the sum of each module's `--durations=0`, a quiet machine,
# 2026-11-28; every module of 4 s or more). The suite runs with `--dist loadscope`: a module is one
# unit on one worker, so its module-scoped servers are made once, and units go out in collection
# order; a long module drawn last would keep the run going on one core while the others idle.
# (xdist's loadgroup cannot be used: with pytest 9.2 its group suffix no longer reaches the node
# ids, and grouped tests spread over the workers.)
LONGEST_FIRST = (
    "tests/test_api_schemathesis.py",
    "tests/test_api_policy_hardening.py",
    "tests/test_mcp.py",
    "tests/test_projections.py",
    "tests/test_question_search.py",
    "tests/test_cli_receipts.py",
    "tests/test_console_browser.py",
    "tests/test_integrity_durable.py",
    "tests/test_client_delivery.py",
    "tests/test_witness.py",
    "tests/test_operations_guide.py",
    "tests/test_client_contract.py",
    "tests/test_tree_store.py",
    "tests/test_entry_size.py",
    "tests/test_api_contract_faults.py",
    "tests/test_api_replay.py",
    "tests/test_api_openapi.py",
    "tests/test_report.py",
    "tests/test_fixture_ledgers.py",
    "tests/test_search.py",
    "tests/test_policy_limits.py",
    "tests/test_cli_imports.py",
    "tests/test_cli.py",
    "tests/test_auditor_guide.py",
    "tests/test_replay_property.py",
    "tests/test_store_faults.py",
    "tests/test_api_citations.py",
    "tests/test_console_lists.py",
    "tests/test_erasure_residue.py",
    "tests/test_console_explain_browser.py",
    "tests/test_check_checkpoint.py",
    "tests/test_tokens_console_browser.py",
    "tests/test_api_hot_path.py",
    "tests/test_api_contract_findings.py",
    "tests/test_console_axe_browser.py",
    "tests/test_golden.py",
    "tests/test_merkle.py",
    "tests/test_api_contract.py",
    "tests/test_api_replay_search.py",
    "tests/test_mcp_documents.py",
    "tests/test_api_tokens.py",
    "tests/test_migrations.py",
    "tests/test_api_fuzz.py",
    "tests/test_readme_examples.py",
    "tests/test_cli_failures.py",
    "tests/test_canonical.py",
    "tests/test_projections_worker.py",
    "tests/test_api_tenant_export.py",
    "tests/test_mcp_lists.py",
    "tests/test_tokens_processes.py",
    "tests/test_report_console.py",
    "tests/test_mcp_inspector.py",
    "tests/test_otlp_answers.py",
    "tests/test_tamper.py",
    "tests/test_api_receipt_shortcut.py",
    "tests/test_crash_retry.py",
    "tests/test_api_restricted.py",
    "tests/test_replay_engines.py",
    "tests/test_api_batch.py",
    "tests/test_client_spool.py",
    "tests/test_sources_sync.py",
    "tests/test_api_ui_browser.py",
    "tests/test_processes.py",
    "tests/test_api_reads.py",
    "tests/test_search_v3.py",
    "tests/test_documents_by_path.py",
    "tests/test_ledger.py",
    "tests/test_cli_replay.py",
    "tests/test_search_v4.py",
    "tests/test_otlp_langchain.py",
    "tests/test_policy_cost.py",
    "tests/test_otlp_crash.py",
    "tests/test_search_no_hit.py",
    "tests/test_otlp_llamaindex.py",
    "tests/test_front_matter_fail_closed.py",
    "tests/test_erasure_sticks.py",
    "tests/test_api_processes.py",
    "tests/test_search_file_bm25.py",
    "tests/test_api_integrity_hold.py",
    "tests/test_api_batch_reuse.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: index for index, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable
