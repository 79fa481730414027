"""Was the log rewritten since an auditor's own copy of a checkpoint? (the console's Proofs
page). The answer costs what changed since that copy, not the whole log:

1. the kept note is signed by a key of this log (the key chain the ledger learned from the
   root key) and the ledger's newest checkpoint is too;
2. the stored tree has the kept root at the kept size, and its consistency proof from there
   leads to the newest signed root (RFC 9162; the proof cannot be forged whatever the store
   holds);
3. the entries since the kept size are read back and hashed onto the tree's frontier at that
   size, which must fold to the kept root: the stored bytes of those entries are the ones
   the newest checkpoint signed. At most `MAX_ENTRIES` or `BUDGET_S` per request; beyond
   that the answer says how many were re-read and checks them against the stored tree
   (step 2 covers them all; `citeledger verify` re-reads the whole log).

The work is bounded (those two, and `MAX_CONCURRENT` checks per process) and stops at the
request's deadline: nothing runs on after the answer.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ledger.deadline import Deadline, DeadlineExceeded
from ledger.evidence.checkpoint_check import CheckFailed, open_kept, read_kept
from ledger.storage.store import LEDGER_STREAM_ID
from ledger.tlog.checkpoints import open_record
from ledger.tlog.merkle import ProofError, leaf_hash, node_hash, verify_consistency
from ledger.tlog.note import NoteError
from ledger.usecases.context import UseCaseContext

MAX_ENTRIES = 10_000  # re-read per request at most (docs/security.md has the figures)
BUDGET_S = 0.3  # and for at most this long
MAX_CONCURRENT = 1  # checks at once per process; more wait their turn (until their deadline)
_PAGE = 500
_slots = threading.BoundedSemaphore(MAX_CONCURRENT)


def _verdict(
    ok: bool, problem: str | None = None, position: int | None = None, **facts: Any
) -> dict[str, Any]:
    return {"ok": ok, "problem": problem, "position": position, **facts}


def check_held_checkpoint(ctx: UseCaseContext, note: str, deadline: Deadline | None = None) -> dict[str, Any]:
    """The verdict on `note` (never entries: only sizes, positions and what failed)."""
    wait = max(0.0, deadline.remaining()) if deadline is not None else None
    if not _slots.acquire(timeout=wait):
        raise DeadlineExceeded(deadline.seconds if deadline is not None else 0.0)
    try:
        if deadline is not None:
            deadline.check()  # waited for a slot past it: the caller was answered already
        return _check(ctx, note, deadline)
    finally:
        _slots.release()


def _check(ctx: UseCaseContext, note: str, deadline: Deadline | None) -> dict[str, Any]:
    ledger = ctx.ledger
    try:
        kept = read_kept(note)
        held = open_kept(kept, ledger.origin, dict(ledger.public_keys))
    except CheckFailed as exc:
        return _verdict(False, str(exc))
    size = held.size
    head = ledger.sync()
    if size > head:
        return _verdict(
            False,
            f"the log has {head} entries, fewer than the {size} your checkpoint covers: it was cut back",
            head + 1,
        )
    latest = ledger.latest_checkpoint()
    if latest is None or latest.tree_size < size:
        newest = latest.tree_size if latest is not None else 0
        return _verdict(
            False,
            f"the ledger's newest signed checkpoint covers {newest} entries, fewer than your {size}: "
            "checkpoints were removed",
            newest + 1,
        )
    try:
        signed = open_record(latest, ledger.origin, dict(ledger.public_keys))
    except NoteError as exc:
        return _verdict(False, f"the ledger's newest checkpoint does not verify: {exc}", latest.tree_size)
    if ledger.tree.root(size) != held.root:
        return _verdict(False, "the log differs from your checkpoint at its size (history rewritten)", size)
    try:
        verify_consistency(
            size, signed.size, held.root, signed.root, ledger.tree.consistency_proof(size, signed.size)
        )
    except ProofError as exc:
        return _verdict(
            False, f"the newest signed checkpoint does not extend yours ({exc}): history rewritten", size
        )
    since = signed.size - size
    reread, bad = _reread(
        ledger, size, min(signed.size, size + MAX_ENTRIES), signed.root, signed.size, deadline
    )
    if bad is not None:
        return _verdict(False, bad[1], bad[0])
    return _verdict(
        True,
        entries=head,
        kept_size=size,
        signed_size=signed.size,
        since=since,
        reread=reread,
        pending=head - signed.size,
    )


def _reread(
    ledger: Any, start: int, stop: int, signed_root: bytes, signed_size: int, deadline: Deadline | None
) -> tuple[int, tuple[int, str] | None]:
    """Hash the stored entries start+1.. onto the tree's frontier at `start`, up to `stop` or
    until `BUDGET_S` is spent; the result must be the signed root (all of them) or the tree's
    root where it stopped. Returns (entries re-read, (position, problem) or None)."""
    if stop == start:
        return 0, None
    stack = ledger.tree.frontier(start)
    cursor = start
    ends = time.monotonic() + BUDGET_S
    while cursor < stop and time.monotonic() < ends:
        if deadline is not None:
            deadline.check()  # past it: stop here, the caller has been answered 408
        rows = ledger.recorder.select_events(LEDGER_STREAM_ID, gt=cursor, lte=stop, limit=_PAGE)
        if not rows:
            return cursor - start, (cursor + 1, "entry missing from the store")
        for row in rows:
            if row.originator_version != cursor + 1:
                return cursor - start, (cursor + 1, "entry missing from the store")
            _push(stack, leaf_hash(bytes(row.state)))
            cursor += 1
    expected = signed_root if cursor == signed_size else ledger.tree.root(cursor)
    if _fold(stack) != expected:
        return cursor - start, (
            start + 1,
            f"the stored entries {start + 1}..{cursor} are not the ones the checkpoint signed "
            "(run `citeledger verify` to name the first bad one)",
        )
    return cursor - start, None


def _push(stack: list[tuple[int, bytes]], leaf: bytes) -> None:
    height, node = 0, leaf
    while stack and stack[-1][0] == height:
        node = node_hash(stack.pop()[1], node)
        height += 1
    stack.append((height, node))


def _fold(stack: list[tuple[int, bytes]]) -> bytes:
    node = stack[-1][1]
    for _, left in reversed(stack[:-1]):
        node = node_hash(left, node)
    return node
