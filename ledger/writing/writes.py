"""What one commit is made of: a caller's prepared drafts (`Write`), what each caller gets back
(`WriteOutcome`), the batch bounds, and the errors of sequencing. Shared by the `Ledger`'s parts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.deadline import Deadline, DeadlineExceeded
from ledger.domain.entries import EventDraft, PreparedDraft, RecordedEvent, prepare
from ledger.domain.payloads import EventRejected
from ledger.storage.adapters import DUPLICATE_KEY_ERRORS, IdempotencyRecord
from ledger.writing import idempotency
from ledger.writing.idempotency import IdempotencyKey, IdempotencyKeyReused, IdempotentWrite, StoredAnswer
from ledger.writing.question_handover import QuestionHashes
from ledger.writing.sealing import Sealer

log = logging.getLogger("citeledger.ledger")


MAX_BATCH_EVENTS = 1_000
MAX_APPEND_ATTEMPTS = 200
_SYNC_PAGE = 10_000
_DUPLICATE_ERRORS: tuple[type[Exception], ...] = DUPLICATE_KEY_ERRORS  # a taken log position


Notification = tuple[int, RecordedEvent]  # (notification id, committed entry)
CommitListener = Callable[[Sequence[Notification]], None]
TransactionHook = Callable[[Any, Sequence[Notification]], None]


@dataclass(frozen=True)
class Write:
    """One caller's drafts, committed together (all or nothing), optionally with
    the idempotency record that must be atomic with them."""

    prepared: list[PreparedDraft]
    idempotent: IdempotentWrite | None = None
    # Claimed right before the transaction: a write whose caller's deadline has passed
    # (or was answered "timed out") commits nothing (`ledger.deadline`).
    deadline: Deadline | None = None
    # The keyed hashes of its receipts' question words, for the question index while this
    # batch is committed (`ledger.writing.question_handover`); never stored.
    question_hashes: QuestionHashes | None = None


@dataclass(frozen=True)
class WriteOutcome:
    events: list[RecordedEvent]  # empty when answered from an earlier record
    answer: idempotency.Answer | None  # the (status, body) of a keyed write
    error: Exception | None = None


class _AlreadyRecorded(Exception):
    def __init__(self, settled: dict[int, StoredAnswer]) -> None:
        self.settled = settled


class _HeadMoved(Exception):
    """Another worker committed between this one's signing and its taking the sequencer."""


class _Late(Exception):
    def __init__(self, indexes: list[int]) -> None:
        self.indexes = indexes


def _too_late(write: Write) -> WriteOutcome:
    assert write.deadline is not None
    return WriteOutcome([], None, DeadlineExceeded(write.deadline.seconds))


def _replayed(stored: StoredAnswer, key: IdempotencyKey, sealer: Sealer) -> WriteOutcome:
    try:
        return WriteOutcome([], stored.replay(key, sealer))
    except IdempotencyKeyReused as exc:
        return WriteOutcome([], None, exc)


def _repeat_of(first: WriteOutcome, write: Write, first_write: Write, sealer: Sealer) -> WriteOutcome:
    """A second write with the same key in one batch: answered like a retry of the first."""
    if first.error is not None or first.answer is None:
        return first
    assert write.idempotent is not None and first_write.idempotent is not None
    stored = StoredAnswer(first_write.idempotent.key.fingerprint, *first.answer)
    return _replayed(stored, write.idempotent.key, sealer)


def prepare_all(drafts: Sequence[EventDraft], *, tenant_id: str | None = None) -> list[PreparedDraft]:
    """Validate drafts for one caller; an event for another tenant than `tenant_id` is refused.
    (A draft built with its payload's encoding keeps it: `EventDraft.encoded`.)"""
    if len(drafts) > MAX_BATCH_EVENTS:
        raise EventRejected("events", f"at most {MAX_BATCH_EVENTS} events per batch")
    prepared = []
    for index, draft in enumerate(drafts):
        if tenant_id is not None and draft.tenant_id != tenant_id:
            raise EventRejected(f"events[{index}].tenant_id", "event is for another tenant")
        prepared.append(prepare(draft))
    return prepared


class LedgerIntegrityError(RuntimeError):
    """The store holds something the ledger itself would never have written."""


class AppendConflict(RuntimeError):
    """Could not win a position after many attempts (extreme contention)."""


def keyed_answers(
    keyed: dict[int, Any], events: dict[int, list[RecordedEvent]]
) -> dict[int, tuple[idempotency.Answer, IdempotencyRecord]]:
    """Each keyed write's answer and the record that stores it."""
    answers = {i: (k.key, k.answer(events[i])) for i, k in keyed.items() if k is not None}
    rows = [(key, answer, events[i][0].position if events[i] else 0) for i, (key, answer) in answers.items()]
    stored = idempotency.records(rows, [keyed[i].plain for i in answers])
    return {i: (answer, record) for (i, (_, answer)), record in zip(answers.items(), stored, strict=True)}
