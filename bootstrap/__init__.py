"""The one composition root: how a process wires the ledger's read side (the projection
runner, the write path's lookups, the search index) and the use-case context. The API's
`Services` (and through it MCP and the console) and the command line all start here.

May import `projections` and `ledger`; `api` and `cli` import it, never the other way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ledger.deadline import Deadline
from ledger.domain.entries import EventDraft
from ledger.usecases.context import UseCaseContext, Writer
from ledger.writing.application import Ledger, Write, WriteOutcome, prepare_all
from ledger.writing.idempotency import IdempotentWrite
from ledger.writing.question_handover import QuestionHashes
from projections.lookups import ProjectedLookups
from projections.runner import ProjectionRunner
from projections.search_index import PROJECTION_NAME as SEARCH_PROJECTION
from projections.search_index import SearchIndexProjection
from projections.search_query import SearchIndex

__all__ = ["ReadSide", "direct_writer", "ledger_context", "read_side", "search_index_of", "use_case_context"]


@dataclass(frozen=True)
class ReadSide:
    """The read models of one process and what the use cases read through them."""

    runner: ProjectionRunner
    lookups: ProjectedLookups
    search_index: SearchIndex


def read_side(ledger: Ledger, *, catch_up: bool = True) -> ReadSide:
    """Projections on the ledger's own database, following this process's commits at once
    (read-your-writes). `catch_up=False`: another process (`citeledger project`) runs them."""
    runner = ProjectionRunner(ledger.store)
    lookups = ProjectedLookups(ledger.store, runner, ledger.get)
    if catch_up:
        runner.catch_up()
    runner.attach(ledger)
    ledger.on_commit(lookups.observe)
    return ReadSide(runner, lookups, search_index_of(runner))


def direct_writer(ledger: Ledger) -> Writer:
    """A writer without a group committer (one process, one caller: the CLI)."""

    def write(
        drafts: Sequence[EventDraft],
        *,
        tenant_id: str | None = None,
        idempotent: IdempotentWrite | None = None,
        deadline: Deadline | None = None,
        question_hashes: QuestionHashes | None = None,
    ) -> WriteOutcome:
        outcome = ledger.commit_writes(
            [Write(prepare_all(drafts, tenant_id=tenant_id), idempotent, deadline, question_hashes)]
        )[0]
        if outcome.error is not None:
            raise outcome.error
        return outcome

    return write


def use_case_context(ledger: Ledger, side: ReadSide, write: Writer, **settings: Any) -> UseCaseContext:
    """The context every use case runs in: the ledger, how this process writes, and what
    it reads through its read side."""
    return UseCaseContext(
        ledger=ledger, write=write, lookups=side.lookups, search_index=side.search_index, **settings
    )


def ledger_context(ledger: Ledger, **settings: Any) -> UseCaseContext:
    """The use-case context of a process without the API (the command line, the demo):
    projections run here, on the ledger's own database."""
    return use_case_context(ledger, read_side(ledger), direct_writer(ledger), **settings)


def search_index_of(runner: ProjectionRunner) -> SearchIndex:
    """The in-memory search index over the runner's `search_index` read model."""
    projection = runner.projection(SEARCH_PROJECTION)
    assert isinstance(projection, SearchIndexProjection)
    return SearchIndex(runner.store, projection, lambda: runner.catch_up(names=[SEARCH_PROJECTION]))
