"""What the ledger's witnesses cosigned: the newest size each one vouched for and
the cosignature lines of each checkpoint, in side tables of the ledger's store.

The newest size per witness is evidence too (`ledger.writing.integrity`): a log found
shorter than a size a witness cosigned was cut back. The tables only grow.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from ledger.storage.store import Store, in_batches


class WitnessedSizes:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.sizes_table = store.table("citeledger_witnessed")
        self.lines_table = store.table("citeledger_cosignatures")
        store.create_tables(
            f"CREATE TABLE IF NOT EXISTS {self.sizes_table} ("
            "witness TEXT PRIMARY KEY, tree_size BIGINT NOT NULL, root TEXT NOT NULL, "
            "updated_at TEXT NOT NULL)",
            f"CREATE TABLE IF NOT EXISTS {self.lines_table} ("
            "seq BIGINT NOT NULL, witness TEXT NOT NULL, line TEXT NOT NULL, PRIMARY KEY (seq, witness))",
        )

    def all(self) -> list[tuple[str, int, bytes]]:
        """(witness, newest cosigned size, root at it) of every witness that cosigned."""
        rows = self.store.rows(f"SELECT witness, tree_size, root FROM {self.sizes_table} ORDER BY witness")
        return [(str(row["witness"]), int(row["tree_size"]), bytes.fromhex(str(row["root"]))) for row in rows]

    def size_of(self, witness: str) -> int:
        rows = self.store.rows(f"SELECT tree_size FROM {self.sizes_table} WHERE witness = ?", (witness,))
        return int(rows[0]["tree_size"]) if rows else 0

    def record(self, witness: str, seq: int, tree_size: int, root: bytes, line: str) -> None:
        """A cosignature `line` by `witness` on checkpoint #seq; the witness's size only grows."""
        sql = self.store.sql
        now = dt.datetime.now(dt.UTC).isoformat()
        with self.store.transaction(commit=True) as cursor:
            cursor.execute(
                sql(
                    f"INSERT INTO {self.lines_table} (seq, witness, line) VALUES (?, ?, ?) "
                    "ON CONFLICT (seq, witness) DO NOTHING"
                ),
                (seq, witness, line),
            )
            cursor.execute(
                sql(
                    f"INSERT INTO {self.sizes_table} AS w (witness, tree_size, root, updated_at) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT (witness) DO UPDATE SET tree_size = excluded.tree_size, "
                    "root = excluded.root, updated_at = excluded.updated_at "
                    "WHERE w.tree_size <= excluded.tree_size"
                ),
                (witness, tree_size, root.hex(), now),
            )

    def first_cosigned(self, min_seq: int) -> int | None:
        """The first checkpoint at or after #min_seq that a witness cosigned."""
        rows = self.store.rows(f"SELECT MIN(seq) AS seq FROM {self.lines_table} WHERE seq >= ?", (min_seq,))
        return int(rows[0]["seq"]) if rows and rows[0]["seq"] is not None else None

    def lines(self, seqs: Sequence[int]) -> dict[int, list[str]]:
        """The cosignature lines of each checkpoint in `seqs` (witness name order)."""
        found: dict[int, list[str]] = {seq: [] for seq in seqs}
        unique = sorted(found)
        for batch, marks in in_batches(unique):
            rows = self.store.rows(
                f"SELECT seq, line FROM {self.lines_table} WHERE seq IN ({marks}) ORDER BY seq, witness",
                batch,
            )
            for row in rows:
                found[int(row["seq"])].append(str(row["line"]))
        return found
