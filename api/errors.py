"""The one place domain errors of the service layer become HTTP answers."""

from __future__ import annotations

from api.api_error import RETRY_AFTER_S, ApiError
from ledger.deadline import DeadlineExceeded
from ledger.domain.entry_limit import EntryTooLarge
from ledger.storage.adapters import store_unavailable
from ledger.usecases import errors
from ledger.writing.idempotency import IdempotencyKeyReused, IdempotencyRecordErased
from ledger.writing.integrity import IntegrityHold

# Most specific first: the first class the error is an instance of decides.
_STATUS: tuple[tuple[type[errors.UseCaseError], int, bool], ...] = (
    (errors.CitationUnavailable, 404, False),
    (errors.NotFound, 404, False),
    (errors.AccessDenied, 403, False),
    (errors.TooLarge, 413, False),
    (errors.Invalid, 422, False),
    (errors.Busy, 409, True),
    (errors.Unavailable, 503, False),
    (errors.Conflict, 409, False),
)


def to_api_error(exc: Exception) -> ApiError | None:
    """The HTTP form of a domain error; None for anything that is not one."""
    if isinstance(exc, IdempotencyRecordErased):
        return ApiError(
            409,
            "idempotency_key_erased",
            "Idempotency-Key's request quoted text that was erased since; its record can no longer be "
            "matched (use a new key)",
            retryable=False,
        )
    if isinstance(exc, IdempotencyKeyReused):
        return ApiError(
            409,
            "idempotency_key_reused",
            "Idempotency-Key was already used with a different request",
            retryable=False,
        )
    if isinstance(exc, IntegrityHold):
        findings = [finding.describe() for finding in exc.findings]
        return ApiError(503, exc.code, str(exc), retryable=False, extra_body={"findings": findings})
    if store_unavailable(exc):
        # Read-only, full, unreachable or restarting: nothing was written (a write's
        # transaction rolled back), and the same request can succeed once the store is back.
        return ApiError(
            503,
            "storage_unavailable",
            "the ledger's store cannot be written or read right now; retry after Retry-After seconds",
            retryable=True,
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )
    if isinstance(exc, DeadlineExceeded):
        return ApiError(408, "request_timeout", str(exc), retryable=True)
    if isinstance(exc, EntryTooLarge):  # names the tlog-tiles bound; nothing was written
        return ApiError(413, "entry_too_large", f"{exc.field}: {exc.message}", retryable=False)
    if not isinstance(exc, errors.UseCaseError):
        return None
    status, retryable = next(((s, r) for cls, s, r in _STATUS if isinstance(exc, cls)), (422, False))
    headers: dict[str, str] = {}
    extra: dict[str, object] = {}
    if isinstance(exc, errors.CitationUnavailable):
        headers["x-replay-reason"] = exc.reason
    if isinstance(exc, errors.AccessDenied):
        headers["x-replay-reason"] = exc.reason
    if isinstance(exc, errors.UnderLegalHold):
        extra["hold_ids"] = exc.hold_ids
    return ApiError(status, exc.code, exc.message, retryable=retryable, headers=headers, extra_body=extra)
