"""Typed errors: every failure the client raises carries the error envelope's
`code`, `message` and `retryable`, the `run_id` / `trace_id` of the call, and the
HTTP status when there was one."""

from __future__ import annotations


class LedgerError(Exception):
    """A refusal or failure of a call to the ledger."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        retryable: bool = False,
        run_id: str | None = None,
        trace_id: str | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.retryable = retryable
        self.run_id = run_id
        self.trace_id = trace_id
        self.status = status


class Refused(LedgerError):
    """The ledger answered 4xx: the request itself is wrong (never retried)."""


class NotFound(Refused):
    """404: unknown, or another tenant's (the two are never told apart)."""


class Unauthorized(Refused):
    """401/403: token missing, invalid, or without the scope."""


class IdempotencyConflict(Refused):
    """409 idempotency_key_reused: the key was used for a different request."""


class RateLimited(LedgerError):
    """429 after the retries: the ledger asks to slow down."""


class Unavailable(LedgerError):
    """The ledger could not be reached, timed out, or failed (5xx), after the retries."""


class CircuitOpen(Unavailable):
    """The circuit breaker is open: the call was not attempted."""


class BadResponse(LedgerError):
    """The peer answered something that is not the contract: empty, not JSON, too large."""


class CheckpointMismatch(LedgerError):
    """The server's checkpoint is older than, or inconsistent with, the newest one this
    client has seen (`code`: checkpoint_rollback, checkpoint_fork, checkpoint_inconsistent,
    checkpoint_other_log, checkpoint_invalid): the log was rolled back or rewritten."""


def for_status(status: int, code: str) -> type[LedgerError]:
    if status == 404:
        return NotFound
    if status in (401, 403):
        return Unauthorized
    if status == 409 and code == "idempotency_key_reused":
        return IdempotencyConflict
    if status == 429:
        return RateLimited
    if status >= 500 or status == 408:
        return Unavailable
    return Refused
