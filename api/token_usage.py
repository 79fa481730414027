"""When each token was last used, coarsely and cheaply.

Not a write per request: each process notes a token's use in memory and writes it to
`<tokens file>.usage.json` (0600) at most once a minute per token, so "last used" is
late by at most a minute per worker. The write merges under a lock with what other
processes wrote and keeps the newest time; when another process holds the lock the
note is kept for the next request instead of waiting. A separate file, so a usage note
never changes `tokens.json` (whose change makes every worker re-read its tokens).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
from pathlib import Path

from ledger.domain.timestamps import utc_now

FLUSH_EVERY_S = 60.0


def usage_path(token_path: Path) -> Path:
    return token_path.with_name(token_path.name.removesuffix(".json") + ".usage.json")


def read_usage(token_path: Path) -> dict[str, str]:
    """token id -> last used (RFC 3339, to the second); {} when nothing was noted."""
    try:
        value = json.loads(usage_path(token_path).read_text(encoding="utf-8") or "{}")
    except (FileNotFoundError, ValueError):
        return {}  # a torn or missing usage file only loses "last used", never access
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items() if isinstance(v, str)}


class UsageNotes:
    """Per process: notes uses and writes them at most once a minute per token."""

    def __init__(self, token_path: Path, every_s: float = FLUSH_EVERY_S) -> None:
        self.token_path = token_path
        self.every_s = every_s
        self._written: dict[str, float] = {}  # token id -> monotonic time of its last write
        self._lock = threading.Lock()

    def used(self, token_id: str) -> None:
        now = time.monotonic()
        last = self._written.get(token_id)
        if last is not None and now - last < self.every_s:
            return  # the common case: one dict lookup
        with self._lock:
            if self._write(token_id):
                self._written[token_id] = now

    def _write(self, token_id: str) -> bool:
        """False only when another process holds the lock (retry on a later request); a
        failure to write also waits the minute, so a read-only disk costs one try a minute."""
        path = usage_path(self.token_path)
        try:
            fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return True
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # another process is writing: try again on a later request
            notes = read_usage(self.token_path)
            now = utc_now(timespec="seconds")
            if notes.get(token_id, "") >= now:
                return True
            notes[token_id] = now
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(out, "w", encoding="utf-8") as handle:
                json.dump(notes, handle)
            os.replace(tmp, path)
            return True
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(path.with_name(f"{path.name}.{os.getpid()}.tmp"))
            return True  # a full or read-only disk costs "last used", never the request
        finally:
            os.close(fd)
