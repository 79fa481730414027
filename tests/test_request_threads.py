"""`api.request_threads.RequestThreads`: at most `max_threads` run at once, a caller cancelled
before its work started never starts it, errors and context variables reach the caller."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest

from api.request_threads import RequestThreads

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


def test_at_most_max_threads_run_at_once_and_the_rest_queue() -> None:
    threads = RequestThreads(2, "test-request")
    running, most = [0], [0]
    lock = threading.Lock()

    def work(n: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return n * 2

    async def run() -> list[int]:
        return list(await asyncio.gather(*(threads.run(work, n) for n in range(6))))

    try:
        assert asyncio.run(run()) == [0, 2, 4, 6, 8, 10]
        assert most[0] == 2
    finally:
        threads.close()


def test_a_caller_cancelled_before_its_work_started_never_starts_it() -> None:
    threads = RequestThreads(1, "test-request")
    release = threading.Event()
    started: list[str] = []

    def hold() -> None:
        started.append("hold")
        release.wait(5)

    def queued() -> None:
        started.append("queued")

    async def run() -> None:
        first = asyncio.ensure_future(threads.run(hold))
        await asyncio.sleep(0.05)  # the one thread is busy
        second = asyncio.ensure_future(threads.run(queued))
        await asyncio.sleep(0.01)
        second.cancel()
        with pytest.raises(asyncio.CancelledError):
            await second
        release.set()
        await first
        await asyncio.sleep(0.05)  # the thread takes the cancelled job next: it must skip it

    try:
        asyncio.run(run())
        assert started == ["hold"]
    finally:
        release.set()
        threads.close()


def test_errors_and_context_variables_reach_the_caller() -> None:
    threads = RequestThreads(4, "test-request")

    def fails() -> None:
        raise ValueError("refused")

    async def run() -> str:
        WHO.set("caller")
        with pytest.raises(ValueError, match="refused"):
            await threads.run(fails)
        return await threads.run(WHO.get)

    try:
        assert asyncio.run(run()) == "caller"
    finally:
        threads.close()
