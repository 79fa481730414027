"""The garbage collector kept off batch-scoped objects.

A 500-item batch allocates hundreds of thousands of short-lived objects (request models, sealed
values, entries, rows), nearly all freed by reference counting. With the collector running,
they trigger young collections by the hundred and, with `gc.freeze()` at start-up leaving the
old generation small, full collections of every live object every few batches (issue 28
measured ~60 µs per event). A read-model batch (`projections.runner`) is the same: every entry
parsed for it lives until it ends, and young collections walked them all again (a 10k-entry
rebuild's parsing: 0.39 s of CPU, 0.09 s paused). So the collector pauses while any batch runs; young objects
that piled up meanwhile are collected as soon as none runs, and at most every
`_YOUNG_LIMIT` allocations even while batches overlap without pause.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_YOUNG_LIMIT = 200_000  # young objects after which a young collection runs anyway
_lock = threading.Lock()
_running = 0
_resume = False  # whether the collector was on when the first batch paused it


@contextmanager
def collector_paused() -> Iterator[None]:
    """No automatic collection while the block runs (nestable, across threads)."""
    global _running, _resume
    with _lock:
        if _running == 0:
            _resume = gc.isenabled()
            gc.disable()
        _running += 1
    try:
        yield
    finally:
        with _lock:
            _running -= 1
            if _running == 0 and _resume:
                gc.enable()
            elif gc.get_count()[0] > _YOUNG_LIMIT:
                gc.collect(0)
