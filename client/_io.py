"""The I/O under the client, written by hand: httpx's failures as typed errors, and what
each flavour does its own way — waiting, file work off the event loop, delivering the
spool, background delivery. `client/_async/` calls the `Async…` classes; unasync renames
them `Sync…` in the generated `client/_sync/`."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, ParamSpec, TypeVar

import httpx

from client._core.http import Call, ClientSettings
from client._core.retry import CircuitBreaker
from client.errors import BadResponse, LedgerError, Unavailable
from client.spool import DrainReport, ItemVerdict, Spool, SpoolRecord

P = ParamSpec("P")
T = TypeVar("T")


def transport_error(call: Call, settings: ClientSettings, exc: Exception) -> LedgerError:
    """A failure below HTTP: the ledger unreachable, too slow, or closing without an answer.
    All retryable: every write carries its Idempotency-Key, so a second try never doubles it."""
    run_id, trace_id = settings.run_id, call.trace_id
    if isinstance(exc, httpx.TimeoutException):
        message = f"no answer within {settings.timeout(call.kind):g} s ({call.kind})"
        return Unavailable("timeout", message, retryable=True, run_id=run_id, trace_id=trace_id)
    if isinstance(exc, httpx.RemoteProtocolError):
        message = "the server closed the connection without an answer"
        return BadResponse("empty_response", message, retryable=True, run_id=run_id, trace_id=trace_id)
    if isinstance(exc, httpx.ConnectError):
        message = "the ledger could not be reached"
        return Unavailable("unreachable", message, retryable=True, run_id=run_id, trace_id=trace_id)
    return Unavailable(
        "transport_error", type(exc).__name__, retryable=True, run_id=run_id, trace_id=trace_id
    )


class AsyncRuntime:
    drain_interval_s: float | None = None  # no background delivery: the service calls flush_spool()

    @staticmethod
    async def sleep(seconds: float) -> None:
        await asyncio.sleep(seconds)

    @staticmethod
    async def offload(function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """File work (an fsync) in a thread, so the event loop never waits on it."""
        return await asyncio.to_thread(function, *args, **kwargs)

    @staticmethod
    async def drain(
        spool: Spool,
        deliver: Callable[[Sequence[SpoolRecord]], Coroutine[Any, Any, list[ItemVerdict]]],
        max_seconds: float | None,
    ) -> DrainReport:
        """The spool's file work in a thread; each delivery back on this event loop."""
        loop = asyncio.get_running_loop()

        def send(records: Sequence[SpoolRecord]) -> list[ItemVerdict]:
            return asyncio.run_coroutine_threadsafe(deliver(records), loop).result()

        return await asyncio.to_thread(spool.drain, send, max_seconds=max_seconds)


class SyncRuntime:
    drain_interval_s: float | None = ClientSettings.drain_interval_s

    @staticmethod
    def sleep(seconds: float) -> None:
        time.sleep(seconds)

    @staticmethod
    def offload(function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return function(*args, **kwargs)

    @staticmethod
    def drain(
        spool: Spool, deliver: Callable[[Sequence[SpoolRecord]], list[ItemVerdict]], max_seconds: float | None
    ) -> DrainReport:
        return spool.drain(deliver, max_seconds=max_seconds)


class AsyncDrainer:
    """No background delivery on an event loop: the service calls `flush_spool()`."""

    def __init__(
        self, flush: Callable[..., object], breaker: CircuitBreaker, interval_s: float | None
    ) -> None:
        pass

    def stop(self) -> None:
        pass


class SyncDrainer:
    """Delivers the spool every `interval_s` from a daemon thread (not while the breaker is
    open); `interval_s` None: only on demand."""

    def __init__(
        self, flush: Callable[..., object], breaker: CircuitBreaker, interval_s: float | None
    ) -> None:
        self._flush, self._breaker, self._interval_s = flush, breaker, interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if interval_s:
            self._thread = threading.Thread(target=self._run, name="citeledger-spool", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        assert self._interval_s is not None
        while not self._stop.wait(self._interval_s):
            if self._breaker.state == "open":
                continue
            try:
                self._flush(max_seconds=self._interval_s * 4)
            except Exception:  # noqa: BLE001, S112 - the records stay; the next round tries again
                continue

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
