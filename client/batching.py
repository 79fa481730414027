"""Buffered batch mode, the way OpenTelemetry's BatchSpanProcessor exports spans:
`record()` queues and returns at once; a worker sends what is queued as one batch
request when `max_batch` items are waiting or the oldest has waited `max_delay_s`.

In memory (the default) a crash loses what is still queued — like spans. With
`durable=True` each `record()` first appends to the client's spool (fsynced), so
what it acknowledged survives a crash; the worker then drains the spool in batches.
The queue is bounded: `record()` blocks when it is full (backpressure, never a drop).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from client._core.calls import Retrieval, as_retrieval, body
from client._core.http import new_key
from client._sync.client import Client
from client.errors import LedgerError
from client.models import BatchItemResult, Spooled
from client.spool import SpoolRecord

ResultHandler = Callable[[str, BatchItemResult | Spooled], None]


class BatchRecorder:
    def __init__(
        self,
        client: Client,
        *,
        max_batch: int = 500,
        max_delay_s: float = 1.0,
        max_queue: int = 20_000,
        durable: bool = False,
        on_result: ResultHandler | None = None,
    ) -> None:
        if durable and client.spool is None:
            raise ValueError("durable batching needs a client with spool_dir")
        self.client = client
        self.max_batch = min(max_batch, 1000)
        self.max_delay_s = max_delay_s
        self.durable = durable
        self.on_result = on_result
        self.refused: list[tuple[str, BatchItemResult]] = []  # (key, result) the ledger refused for good
        self.failed: list[tuple[str, LedgerError]] = []  # not delivered and no spool to keep them
        self._queue: queue.Queue[tuple[str, Any, str | None] | None] = queue.Queue(maxsize=max_queue)
        self._lock = threading.Condition()
        self._queued = 0
        self._done = 0
        self._worker = threading.Thread(target=self._run, name="citeledger-batch", daemon=True)
        self._worker.start()

    def record(
        self, retrieval: Retrieval, *, idempotency_key: str | None = None, trace_id: str | None = None
    ) -> str:
        """Queue one retrieval (validated now); returns its idempotency key."""
        model = as_retrieval(retrieval)
        key = idempotency_key or new_key()
        if self.durable:
            assert self.client.spool is not None
            self.client.spool.append(SpoolRecord(key, body(model), self.client.settings.run_id, trace_id))
        with self._lock:
            self._queued += 1
        self._queue.put((key, model, trace_id))
        return key

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            deadline = time.monotonic() + self.max_delay_s
            stop = False
            while len(batch) < self.max_batch:
                left = deadline - time.monotonic()
                try:
                    item = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            self._send(batch)
            if stop:
                return

    def _send(self, batch: list[tuple[str, Any, str | None]]) -> None:
        try:
            if self.durable:
                self.client.flush_spool()  # the records are in the spool already, in order
            else:
                results = self.client.record_retrievals([(key, model) for key, model, _ in batch])
                for (key, _, _), result in zip(batch, results, strict=True):
                    if isinstance(result, BatchItemResult) and result.error is not None:
                        self.refused.append((key, result))
                    if self.on_result is not None:
                        self.on_result(key, result)
        except LedgerError as error:  # the spool keeps them when there is one; else they are reported
            if not self.durable:
                self.failed += [(key, error) for key, _, _ in batch]
        finally:
            with self._lock:
                self._done += len(batch)
                self._lock.notify_all()

    def flush(self, timeout_s: float = 60.0) -> bool:
        """Wait until everything recorded before this call was sent; False on timeout."""
        with self._lock:
            target = self._queued
            return self._lock.wait_for(lambda: self._done >= target, timeout=timeout_s)

    def close(self, timeout_s: float = 60.0) -> None:
        self.flush(timeout_s)
        self._queue.put(None)
        self._worker.join(timeout=timeout_s)

    def __enter__(self) -> BatchRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
