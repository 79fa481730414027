"""The API's refusal vocabulary: status codes, their stable names, and the one error type.

Kept apart from `api/contract.py` (the request pipeline) so the domain-error table in
`api/errors.py` and the pipeline both import it without importing each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from litestar.exceptions import HTTPException

CODES: dict[int, str] = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    408: "request_timeout",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "unprocessable",
    429: "rate_limited",
    500: "internal_error",
    503: "unavailable",
}
RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
RETRY_AFTER_S = 1  # what a retryable 5xx without a better figure tells the client to wait


class ApiError(HTTPException):
    """An error of ours: status, stable code, safe message, retryability."""

    def __init__(
        self,
        status_code: int,
        code: str,
        message: str,
        *,
        retryable: bool | None = None,
        headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(detail=message, status_code=status_code, headers=dict(headers or {}))
        self.code = code
        self.message = message
        self.retryable = status_code in RETRYABLE_STATUSES if retryable is None else retryable
        self.extra_body = dict(extra_body or {})


def not_found(what: str = "resource") -> ApiError:
    """The one 404: identical whether the object never existed or is another tenant's."""
    return ApiError(404, "not_found", f"{what} not found")
