"""What every use case is given: who calls (`Caller`), and a small context."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ledger.deadline import Deadline
from ledger.domain.entries import EventDraft, RecordedEvent
from ledger.domain.events import Schema
from ledger.domain.payloads import EncodedPayload, PlainPayload
from ledger.domain.receipt_parts import encoded_parts
from ledger.usecases.ports import SearchIndexReader, WriteLookups
from ledger.writing.application import Ledger, Write, WriteOutcome, prepare_all
from ledger.writing.idempotency import IdempotencyKey, IdempotentWrite, reveal
from ledger.writing.question_handover import QuestionHashes
from ledger.writing.retention import RetentionRules
from ledger.writing.sealing import Sealer


@dataclass(frozen=True)
class Caller:
    """Who asks, as plain values: the tenant every object is scoped to, the actor
    recorded in the entries, the scopes held, correlation ids, by when the answer is
    needed (`deadline`: a write past it commits nothing; None: no deadline), and the
    request's `idempotency` key (a write use case answers a repeat of a keyed request
    from its record; None: not keyed). The one parameter object of every use case."""

    tenant_id: str
    actor: str
    scopes: frozenset[str] = frozenset()
    run_id: str | None = None
    trace_id: str | None = None
    deadline: Deadline | None = field(default=None, compare=False)
    idempotency: IdempotencyKey | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Result:
    """A write's answer: `created` is False when nothing new was recorded
    (an unchanged document, a repeat of an idempotent request)."""

    body: dict[str, Any]
    created: bool = True


class Writer(Protocol):
    def __call__(
        self,
        drafts: Sequence[EventDraft],
        *,
        tenant_id: str | None = None,
        idempotent: IdempotentWrite | None = None,
        deadline: Deadline | None = None,
        question_hashes: QuestionHashes | None = None,
    ) -> WriteOutcome: ...


BatchWriter = Callable[[Sequence[Write]], list[WriteOutcome]]


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass
class UseCaseContext:
    ledger: Ledger
    write: Writer  # the group committer: one transaction per batch
    lookups: WriteLookups
    retention_for: Callable[[str], RetentionRules] = field(default=lambda _tenant: RetentionRules())
    clock: Callable[[], dt.datetime] = _utc_now  # tests travel in time by replacing it
    search_index: SearchIndexReader | None = None  # the read model searches rank (None: no search)
    # Several callers' writes in one transaction (batch requests); without a group
    # committer, the ledger's own commit.
    write_all: BatchWriter | None = None

    @property
    def sealer(self) -> Sealer:
        return self.ledger.sealer

    def commit_all(self, writes: Sequence[Write]) -> list[WriteOutcome]:
        return (self.write_all or self.ledger.commit_writes)(writes)


def draft(
    caller: Caller, payload: Schema | PlainPayload, encoded: EncodedPayload | None = None
) -> EventDraft:
    """An event of the caller's tenant; its type is its payload's class. `encoded`: the
    payload's encoding where it was made already (kept by the draft: encoded once)."""
    return EventDraft.of(
        payload,
        tenant_id=caller.tenant_id,
        actor=caller.actor,
        run_id=caller.run_id,
        trace_id=caller.trace_id,
        encoded=encoded,
    )


def record(
    ctx: UseCaseContext,
    caller: Caller,
    payloads: Sequence[Schema],
    answer: Callable[[Sequence[RecordedEvent]], dict[str, Any]],
    idempotency: IdempotencyKey | None = None,
) -> Result:
    """Append the caller's events in the next group commit and answer from the
    committed entries. With a key, the answer is stored in the same transaction,
    so a retry after any crash gets it back (`dedup: true`) instead of a second write."""
    return commit(ctx, Pending(caller, payloads, answer, idempotency))


def commit(ctx: UseCaseContext, pending: Pending) -> Result:
    """One pending write, committed in the next group commit."""
    outcome = ctx.write(
        pending.drafts(),
        tenant_id=pending.caller.tenant_id,
        idempotent=pending.idempotent(),
        deadline=pending.caller.deadline,
        question_hashes=pending.question_hashes,
    )
    return pending.result(outcome)


@dataclass(frozen=True)
class Pending:
    """A write whose events are built and checked but not yet committed: what `record`
    commits alone and a batch commits with others (one transaction, `UseCaseContext.commit_all`)."""

    caller: Caller
    # Models, or JSON forms built from checked values (`PlainPayload`: the batch's hot path).
    payloads: Sequence[Schema | PlainPayload]
    answer: Callable[[Sequence[RecordedEvent]], dict[str, Any]]
    idempotency: IdempotencyKey | None = None
    # Its receipt's question words, hashed before sealing, for the question index
    # (`ledger.writing.question_handover`): the index then never unseals a fresh question.
    question_hashes: QuestionHashes | None = None
    # Its answer holds no protected parts (`ledger.writing.idempotency.Protected`: a recorded
    # retrieval's, an unkeyed search's built in plain): `reveal` would only copy it, so it is
    # returned as built.
    plain_answer: bool = False

    def drafts(self) -> list[EventDraft]:
        """A receipt too large for one log entry is written as several
        (`ledger.domain.receipt_parts`); each draft keeps the encoding its split measured
        (signed and stored as it is, not encoded again)."""
        return [
            draft(self.caller, part, encoded)
            for payload in self.payloads
            for part, encoded in encoded_parts(payload)
        ]

    def idempotent(self) -> IdempotentWrite | None:
        def stored(events: Sequence[RecordedEvent]) -> tuple[int, dict[str, Any]]:
            return 1, {**self.answer(events), "dedup": False}

        if self.idempotency is None:
            return None
        return IdempotentWrite(self.idempotency, stored, plain=self.plain_answer)

    def prepared(self) -> Write:
        """Validated for the caller's tenant (raises `EventRejected`), each payload encoded
        once: a receipt measured for its split keeps the bytes it was measured by."""
        return Write(
            prepare_all(self.drafts(), tenant_id=self.caller.tenant_id),
            self.idempotent(),
            deadline=self.caller.deadline,
            question_hashes=self.question_hashes,
        )

    def result(self, outcome: WriteOutcome) -> Result:
        """The answer in plain (`ledger.writing.idempotency.Protected` parts revealed): only its
        stored copy is sealed."""
        if outcome.error is not None:
            raise outcome.error
        if outcome.answer is not None:
            created, body = outcome.answer
            return Result(body if self.plain_answer else reveal(body), created=bool(created))
        body = {**self.answer(outcome.events), "dedup": False}
        return Result(body if self.plain_answer else reveal(body))


# What every write answers about its entry: where it is and who signed it.
ENTRY_FACTS = ("position", "event_id", "kid", "signature")


def entry_facts(event: RecordedEvent) -> dict[str, Any]:
    return {name: getattr(event, name) for name in ENTRY_FACTS}
