"""Domain errors of the use cases. Each names a stable `code`; every adapter maps
them to its own terms in one place (the HTTP API: `api.errors`)."""

from __future__ import annotations


class UseCaseError(Exception):
    """A refusal the caller can act on. `message` never holds document text or secrets."""

    code = "refused"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class NotFound(UseCaseError):
    """Unknown, or another tenant's: the two are never told apart."""

    code = "not_found"

    def __init__(self, what: str) -> None:
        super().__init__(f"{what} not found")


class Invalid(UseCaseError):
    """Well-formed input that breaks a rule (the message names the field or rule)."""

    code = "unprocessable"


class TooLarge(UseCaseError):
    code = "payload_too_large"


class Conflict(UseCaseError):
    """The state of the ledger forbids it (scrubbed key, legal hold)."""

    code = "conflict"


class Unavailable(UseCaseError):
    """The tenant's own state stops the request until an operator acts (an unloadable
    live policy): refused fast, not retried."""

    code = "unavailable"


class Busy(UseCaseError):
    """Another writer holds what this one needs for a moment: retry."""

    code = "busy"


class UnknownChunk(Invalid):
    code = "unknown_chunk"


class ChunkScrubbed(Invalid):
    code = "chunk_scrubbed"


class SubjectErased(Invalid):
    code = "subject_scrubbed"


class UnderLegalHold(Conflict):
    code = "legal_hold"

    def __init__(self, message: str, hold_ids: list[str]) -> None:
        super().__init__(message)
        self.hold_ids = hold_ids


class AccessDenied(UseCaseError):
    """The caller lacks a scope the object needs (recorded as a signed AccessDenied)."""

    code = "forbidden"

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class CitationUnavailable(NotFound):
    """A citation that cannot be read back; `reason` is told only out of band."""

    MESSAGE = "The requested citation was not found"

    def __init__(self, reason: str) -> None:
        UseCaseError.__init__(self, self.MESSAGE)
        self.reason = reason


class Unreplayable(Invalid):
    """A receipt replay cannot re-run (`code` is one of the `unreplayable.*` codes)."""

    code = "unreplayable"
