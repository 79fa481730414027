"""The threads that run a request's blocking ledger work (`Services.blocking`), off the event loop.

A hand-off costs the event loop a queue put, a future and one thread-safe callback: no
`concurrent.futures.Future` (a condition variable each) chained to an asyncio one, no
sniffio look-up, cancel scope or capacity limiter (`anyio.to_thread`). Measured under load,
that hand-off was a quarter of a cached receipt read's server time with anyio and half of that
with `loop.run_in_executor` (`docs/benchmarks/api.md`, "where the time went").

The semantics are anyio's `run_sync(abandon_on_cancel=True)`: at most `max_threads` run at
once (the others queue); a caller cancelled before its work started never starts it; work
that started runs to its end (the caller no longer waits for it); the caller's context
variables go with the work.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar, TypeVarTuple

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

_Job = tuple[
    asyncio.AbstractEventLoop, "asyncio.Future[Any]", contextvars.Context, Callable[..., Any], tuple[Any, ...]
]


def _settle(result: Any, future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.set_result(result)


def _fail(error: BaseException, future: asyncio.Future[Any]) -> None:
    if isinstance(error, StopIteration):  # a future cannot carry one
        error = RuntimeError("StopIteration raised in a request thread")
    if not future.cancelled():
        future.set_exception(error)


class RequestThreads:
    def __init__(self, max_threads: int, name: str) -> None:
        self.max_threads = max_threads
        self._name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0  # threads waiting for a job that no queued job is promised to

    async def run(self, fn: Callable[[*Ts], T], *args: *Ts) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((loop, future, contextvars.copy_context(), fn, args))
        with self._lock:
            if self._idle > 0:
                self._idle -= 1
            elif len(self._threads) < self.max_threads:
                self._start_thread()
        return await future

    def _start_thread(self) -> None:
        thread = threading.Thread(target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            self._run(*job)
            del job  # hold nothing of a finished request while waiting for the next
            with self._lock:
                self._idle += 1

    @staticmethod
    def _run(
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[Any],
        context: contextvars.Context,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
    ) -> None:
        if future.cancelled():
            return
        answer: Callable[[Any, asyncio.Future[Any]], None] = _settle
        try:
            value = context.run(fn, *args)
        except BaseException as error:  # noqa: BLE001 - the caller's to raise
            answer, value = _fail, error
        try:
            loop.call_soon_threadsafe(answer, value, future)
        except RuntimeError:  # the loop has closed: nobody waits for this answer any more
            pass

    def close(self) -> None:
        """Let every thread end once the jobs queued before this are done (none is waited for)."""
        with self._lock:
            for _ in self._threads:
                self._jobs.put(None)
