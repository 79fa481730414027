"""The retry rule and the circuit breaker, as decisions only (the driver sends and sleeps):
only what the error envelope calls retryable is tried again; a 429's Retry-After is honoured;
exponential backoff with full jitter; consecutive outages open the breaker."""

from __future__ import annotations

import random
import threading
import time

from client._core.http import Call, ClientSettings
from client.errors import BadResponse, CircuitOpen, LedgerError, Unavailable


class CircuitBreaker:
    """closed -> open after `threshold` consecutive failures -> half-open after `cooldown_s`
    (one probe call at a time) -> closed on its success, open again on its failure."""

    def __init__(self, threshold: int, cooldown_s: float) -> None:
        self.threshold = threshold
        self.cooldown_s = cooldown_s
        self._lock = threading.Lock()
        self._failures = 0
        self._opened_at: float | None = None
        self._probing = False

    @property
    def state(self) -> str:
        with self._lock:
            if self._opened_at is None:
                return "closed"
            if time.monotonic() - self._opened_at >= self.cooldown_s:
                return "half-open"
            return "open"

    def allow(self) -> bool:
        with self._lock:
            if self._opened_at is None:
                return True
            if time.monotonic() - self._opened_at < self.cooldown_s or self._probing:
                return False
            self._probing = True  # this caller is the probe
            return True

    def success(self) -> None:
        with self._lock:
            self._failures = 0
            self._opened_at = None
            self._probing = False

    def failure(self) -> None:
        with self._lock:
            self._failures += 1
            if self._probing or self._failures >= self.threshold:
                self._opened_at = time.monotonic()
            self._probing = False


def is_outage(error: LedgerError) -> bool:
    """What the breaker counts: the ledger down, failing or too slow — not a refusal."""
    if isinstance(error, Unavailable):
        return True
    return isinstance(error, BadResponse) and error.retryable


def delay_s(settings: ClientSettings, attempt: int, error: LedgerError) -> float:
    """Exponential backoff with full jitter; a 429's Retry-After is a floor (capped)."""
    backoff = min(settings.backoff_max_s, settings.backoff_base_s * 2 ** (attempt - 1))
    wait = random.uniform(0, backoff)  # noqa: S311 - jitter, not a secret
    asked = getattr(error, "retry_after_s", None)
    if asked is not None:
        wait = max(wait, min(float(asked), settings.retry_after_max_s))
    return wait


class Attempts:
    """The attempts of one call: `start()` before each (raises CircuitOpen while the breaker
    is open), then `succeeded()`, or `failed(error)` — the seconds to wait before the next
    attempt, or None when the error is final (not retryable, or the last attempt)."""

    def __init__(self, settings: ClientSettings, breaker: CircuitBreaker, call: Call) -> None:
        self.settings, self.breaker, self.call = settings, breaker, call
        self.attempt = 0

    def start(self) -> None:
        self.attempt += 1
        if not self.breaker.allow():
            raise CircuitOpen(
                "circuit_open",
                "the circuit breaker is open after repeated failures",
                retryable=True,
                run_id=self.settings.run_id,
                trace_id=self.call.trace_id,
            )

    def succeeded(self) -> None:
        self.breaker.success()

    def failed(self, error: LedgerError) -> float | None:
        if is_outage(error):
            self.breaker.failure()
        else:
            self.breaker.success()  # it answered: a refusal is not an outage
        if not error.retryable or self.attempt >= self.settings.max_attempts:
            return None
        return delay_s(self.settings, self.attempt, error)
