"""How the runner applies one batch of entries: in a transaction of relaxed durability.
(The cyclic garbage collector is paused meanwhile by `ledger.writing.collector`, the one
pause the write path uses too.)"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from ledger.storage.store import Store


def read_model_transaction(store: Store) -> AbstractContextManager[Any]:
    """The transaction a batch of read-model rows and their tracking commit in, with
    relaxed durability (the commit does not wait for the disk).

    Safe because tracking commits with the rows and log entries never do: a commit
    lost to a power cut is re-applied from the log on restart, and a later durable
    commit (the log's appends keep their settings) makes every earlier one durable."""
    return store.adapter.relaxed_transaction()
