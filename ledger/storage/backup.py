"""A backup of a ledger's data directory, safe while servers write to it.

The SQLite store is copied with SQLite's online backup API in one step: one read
transaction, so the copy is the database as of one commit (in WAL mode writers carry
on meanwhile) — never a file copy, which can catch the database and its WAL at
different moments. The other files of the data directory (keys, tokens, sources) are
copied after it, so the keys copied include every key the copied log introduced. A
PostgreSQL store is not copied here: `pg_dump` takes it (docs/operations.md).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ledger.config import LedgerConfig

SQLITE_NAME = "ledger.sqlite"
# Not copied: the SQLite files (the online backup takes the database), lock files, and
# console sessions (a session id is a live credential; a restored ledger signs in anew).
_SKIPPED = {SQLITE_NAME, f"{SQLITE_NAME}-wal", f"{SQLITE_NAME}-shm", f"{SQLITE_NAME}-journal"}
_SKIPPED_DIRS = {"console-sessions"}


class BackupTargetError(ValueError):
    """The backup's destination cannot be used (exists and is not empty, or no parent)."""


@dataclass
class BackupResult:
    out: Path
    store_bytes: int | None = None  # None: a PostgreSQL store, not copied here
    files: list[str] = field(default_factory=list)  # relative paths copied besides the store


def _prepare_target(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BackupTargetError(f"{out}: exists and is not an empty directory; name a new one")
    if not out.parent.is_dir():
        raise BackupTargetError(f"{out.parent}: no such directory")
    out.mkdir(mode=0o700, exist_ok=True)
    out.chmod(0o700)


def _backup_sqlite(source: Path, target: Path) -> int:
    # The copy is created 0600 before SQLite writes a byte of it.
    os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    src = sqlite3.connect(f"{source.absolute().as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        dst = sqlite3.connect(target, timeout=30)
        try:
            src.backup(dst)  # pages=-1: the whole database in one step, one snapshot
            problem = dst.execute("PRAGMA quick_check").fetchone()[0]
            if problem != "ok":
                raise sqlite3.DatabaseError(f"the copy fails SQLite's quick_check: {problem}")
        finally:
            dst.close()
    finally:
        src.close()
    return target.stat().st_size


def _copy_files(data_dir: Path, out: Path) -> list[str]:
    copied: list[str] = []
    for folder, dirs, files in os.walk(data_dir):
        here = Path(folder)
        relative = here.relative_to(data_dir)
        dirs[:] = sorted(d for d in dirs if not (relative == Path(".") and d in _SKIPPED_DIRS))
        for name in dirs:
            (out / relative / name).mkdir(mode=0o700, exist_ok=True)
        for name in sorted(files):
            if name.startswith(".") or (relative == Path(".") and name in _SKIPPED):
                continue  # lock files and temporary files
            if not stat.S_ISREG(os.lstat(here / name).st_mode):
                continue  # a link, FIFO or socket is no ledger file (and a FIFO would block)
            target = out / relative / name
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with open(here / name, "rb") as source, os.fdopen(fd, "wb") as copy:
                shutil.copyfileobj(source, copy)
                copy.flush()
                os.fsync(copy.fileno())
            copied.append(str(relative / name))
    return copied


def backup(config: LedgerConfig, out: Path) -> BackupResult:
    """Copy the ledger at `config` into the new directory `out`, which is then a data
    directory itself: `citeledger verify --deep --data-dir OUT` checks it."""
    if out.resolve().is_relative_to(config.data_dir.resolve()):
        raise BackupTargetError(f"{out}: inside the data directory; name a place outside it")
    _prepare_target(out)
    result = BackupResult(out)
    if not config.is_postgres:
        result.store_bytes = _backup_sqlite(config.sqlite_path, out / SQLITE_NAME)
    result.files = _copy_files(config.data_dir, out)
    return result


__all__ = ["BackupResult", "BackupTargetError", "backup"]
