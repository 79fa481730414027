"""A request's deadline, shared by the thread doing the work and the one answering.

The two must agree on one fact: did the request write? A caller that gives up (an HTTP
408) must never be told "nothing happened" about a write that committed, and a write
must never commit after its caller was told so. Both sides go through one lock:

- the writer `claim`s the deadline as the last step before its transaction commits (or
  before destroying a key): refused once the deadline has passed or expired, and from
  then on irrevocable;
- the waiting side `expire`s it before answering 408: refused once a claim was made, in
  which case the answer is owed and it waits for it instead.

CPU-heavy work calls `check` now and then: past the deadline (and unclaimed) it expires
the deadline and raises `DeadlineExceeded`, so abandoned work stops instead of burning on.
"""

from __future__ import annotations

import threading
import time

_OPEN, _CLAIMED, _EXPIRED = "open", "claimed", "expired"


class DeadlineExceeded(Exception):  # not a TimeoutError: that one means "the store is slow" (503)
    """The work passed its deadline and was stopped before it wrote anything."""

    def __init__(self, seconds: float) -> None:
        super().__init__(
            f"request exceeded the {seconds:g} s deadline; nothing was written (a retry runs it again)"
        )
        self.seconds = seconds


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds
        self._lock = threading.Lock()
        self._state = _OPEN

    def remaining(self) -> float:
        return self.at - time.monotonic()

    def passed(self) -> bool:
        return time.monotonic() >= self.at

    def lapsed(self) -> bool:
        """Expired, or passed and unclaimed: a claim would be refused (nothing changes)."""
        return self._state == _EXPIRED or (self._state == _OPEN and self.passed())

    def claim(self) -> bool:
        """Before a write takes effect: True if it may (and from now on the answer is owed)."""
        with self._lock:
            if self._state == _OPEN and self.passed():
                self._state = _EXPIRED
            if self._state == _EXPIRED:
                return False
            self._state = _CLAIMED
            return True

    def expire(self) -> bool:
        """Before answering "timed out": True if nothing was or ever will be written."""
        with self._lock:
            if self._state == _CLAIMED:
                return False
            self._state = _EXPIRED
            return True

    def check(self) -> None:
        """Cooperative: raise `DeadlineExceeded` once past the deadline, unless claimed."""
        if (self._state == _EXPIRED or self.passed()) and self.expire():
            raise DeadlineExceeded(self.seconds)


def claim_or_raise(deadline: Deadline | None) -> None:
    """Claim `deadline` for a write that is about to take effect (None: no deadline)."""
    if deadline is not None and not deadline.claim():
        raise DeadlineExceeded(deadline.seconds)
