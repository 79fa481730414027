"""The SQLite connection pool the store reads and writes through.

`eventsourcing`'s own pool keeps 5 connections and opens up to 10 more, each closed again as
soon as it is handed back; it opens every connection with a statement cache of one statement,
and it opens them while holding the pool's lock. A server runs up to 64 request threads
(`Services.request_threads`): under concurrent reads, every request past the fifth opened a new file
handle (and ran `PRAGMA journal_mode`) under that lock, and every statement of a read was
compiled again. This pool keeps what it opened, up to `KEPT_CONNECTIONS`, each with a
statement cache, and sets on each connection what must hold on every one of them
(`secure_delete`: freed pages overwritten, so shredded key bytes do not linger in the file).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from eventsourcing.persistence import InterfaceError
from eventsourcing.sqlite import SQLITE3_DEFAULT_LOCK_TIMEOUT, SQLiteConnection, SQLiteConnectionPool

KEPT_CONNECTIONS = 32  # connections kept open between uses (opened only when needed)
EXTRA_CONNECTIONS = 32  # beyond those, opened for one use: 64 = the server's request threads
STATEMENT_CACHE = 128  # compiled statements kept per connection (sqlite3's default is 128)


class StorePool(SQLiteConnectionPool):
    """`SQLiteConnectionPool` with connections kept, a statement cache and per-connection
    settings (the file is already in WAL mode: `sqlite._ensure_wal`)."""

    def _create_connection(self) -> SQLiteConnection:
        try:
            connection = sqlite3.connect(
                database=self.db_name,
                uri=True,
                check_same_thread=False,
                isolation_level=None,  # autocommit: eventsourcing issues BEGIN itself
                cached_statements=STATEMENT_CACHE,
                timeout=self.lock_timeout or SQLITE3_DEFAULT_LOCK_TIMEOUT,
            )
        except (sqlite3.Error, TypeError) as exc:
            raise InterfaceError(exc) from exc
        connection.execute("PRAGMA secure_delete=ON")
        connection.row_factory = sqlite3.Row
        return SQLiteConnection(sqlite_conn=connection, max_age=self.max_age)


def install_pool(datastore: Any) -> None:
    """Replace an `eventsourcing` SQLite datastore's pool with a `StorePool` on the same file
    (before the store is used: the old pool's idle connections are closed)."""
    old: SQLiteConnectionPool = datastore.pool
    datastore.pool = StorePool(
        db_name=old.db_name,
        lock_timeout=old.lock_timeout,
        pool_size=KEPT_CONNECTIONS,
        max_overflow=EXTRA_CONNECTIONS,
        pool_timeout=old.pool_timeout,
        max_age=old.max_age,
        pre_ping=old.pre_ping,
    )
    old.close()
