"""The log's Merkle tree, persisted as tiles beside the log so opening a ledger
costs O(log n), not O(n).

Layout (Tessera / C2SP `tlog-tiles` style). Level L of the tile space holds
the hashes of the complete subtrees of height 8*L (level 0: the leaf hashes);
tile (L, i) is the run of up to 256 of them starting at number 256*i, stored
back to back (32 bytes each) in one row of `citeledger_merkle_tiles`. The
heights between two tile levels are not stored: they are recomputed from the
tile (at most 255 hashes) when it is read, and kept in a small LRU cache.

Why tiles and not one row per node: a node row costs ~60 bytes of row and
index overhead for 32 bytes of hash, and a tree of n leaves has 2n nodes;
tiles store n * 32 * (1 + 1/256 + ...) bytes in n/256 rows, a proof touches
about one tile per level (three rows at a million leaves), and a tile row is
a deterministic function of the log, so writers never disagree about it.

Crash safety. Tiles are written after the entries commit (the entries'
transaction belongs to the append path), in one transaction with the
`citeledger_merkle_state` row, whose `tree_size` says which prefix of the log
the stored tiles describe completely. A crash before that commit leaves the
previous state; a crash after it leaves tiles that are correct and merely
behind the log. Opening reads the tiles for `tree_size` and then only the
entries after it. Nothing here ever shrinks or rewrites a stored hash:

- a tile row only grows (`ON CONFLICT ... WHERE length(new) > length(old)`):
  the hashes of a prefix of the log never change, so a longer row written
  by any process extends every shorter one;
- `tree_size` only grows (a process that flushes an older state cannot
  move it back).

Two processes therefore write identical bytes or prefixes of them, in the
same (level, index) order, which also rules out deadlocks on PostgreSQL.

In memory, `TiledMerkleTree` keeps the compact frontier (one hash per set bit
of the size: what appending and the current root need), the rightmost partial
tile of each level, and full tiles completed since the last flush. Every
other node is read on demand from the store.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

from ledger.storage.log_repeats import log_failure
from ledger.storage.store import Store
from ledger.tlog.merkle import EMPTY_ROOT, HASH_SIZE, MerkleProofs, check_hash_arg, fold_right, node_hash

log = logging.getLogger("citeledger.tree")

DEFAULT_TILE_HEIGHT = 8  # 256 hashes a tile, as in C2SP tlog-tiles
DEFAULT_NAME = "citeledger_merkle"
_CACHE_TILES = 64  # expanded tiles kept (~16 KiB each)
_NAME_RE = re.compile(r"^[a-z_][a-z0-9_]{0,40}$")


class TileStateError(RuntimeError):
    """The stored tiles cannot describe the size they claim (a missing or short
    row: evidence, see `ledger.writing.integrity`), or were written with another tile
    height (`layout_changed`: a setting, not evidence; rebuilt from the log)."""

    def __init__(self, message: str, *, layout_changed: bool = False) -> None:
        super().__init__(message)
        self.layout_changed = layout_changed


class TileStore:
    """The two side tables, in the ledger's own database (same datastore, same
    transactions machinery as every other side table)."""

    def __init__(self, store: Store, *, name: str = DEFAULT_NAME) -> None:
        if not _NAME_RE.match(name):
            raise ValueError(f"bad tile table name {name!r}")
        self.store = store
        self.tiles_table = store.table(f"{name}_tiles")
        self.state_table = store.table(f"{name}_state")
        blob = store.adapter.blob
        store.create_tables(
            f"CREATE TABLE IF NOT EXISTS {self.tiles_table} ("
            f"level INTEGER NOT NULL, idx BIGINT NOT NULL, hashes {blob} NOT NULL, "
            "PRIMARY KEY (level, idx))",
            f"CREATE TABLE IF NOT EXISTS {self.state_table} ("
            "id INTEGER PRIMARY KEY, tree_size BIGINT NOT NULL, tile_height INTEGER NOT NULL)",
        )

    def state(self) -> tuple[int, int] | None:
        """(tree_size, tile_height) the stored tiles describe, or None when there are none."""
        with self.store.transaction(commit=False) as cursor:
            cursor.execute(f"SELECT tree_size, tile_height FROM {self.state_table} WHERE id = 1")
            row = cursor.fetchone()
        return None if row is None else (int(row["tree_size"]), int(row["tile_height"]))

    def read_tiles(self, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
        """The stored rows among `keys` (absent ones are left out)."""
        found: dict[tuple[int, int], bytes] = {}
        if not keys:
            return found
        sql = self.store.sql
        with self.store.transaction(commit=False) as cursor:
            for level, index in keys:
                cursor.execute(
                    sql(f"SELECT hashes FROM {self.tiles_table} WHERE level = ? AND idx = ?"),
                    (level, index),
                )
                row = cursor.fetchone()
                if row is not None:
                    found[(level, index)] = bytes(row["hashes"])
        return found

    def write(self, tiles: Iterable[tuple[tuple[int, int], bytes]], tree_size: int, tile_height: int) -> None:
        """Store tiles and then the size they describe, in one transaction.

        Rows go in (level, index) order and only ever grow, so concurrent
        writers of the same deterministic tiles neither conflict nor deadlock.
        """
        sql, tiles_table, state_table = self.store.sql, self.tiles_table, self.state_table
        with self.store.transaction(commit=True) as cursor:
            for (level, index), hashes in sorted(tiles):
                cursor.execute(
                    sql(
                        f"INSERT INTO {tiles_table} AS t (level, idx, hashes) VALUES (?, ?, ?) "
                        "ON CONFLICT (level, idx) DO UPDATE SET hashes = excluded.hashes "
                        "WHERE length(excluded.hashes) > length(t.hashes)"
                    ),
                    (level, index, hashes),
                )
            cursor.execute(
                sql(
                    f"INSERT INTO {state_table} AS s (id, tree_size, tile_height) VALUES (1, ?, ?) "
                    "ON CONFLICT (id) DO UPDATE SET tree_size = excluded.tree_size "
                    "WHERE s.tree_size < excluded.tree_size AND s.tile_height = excluded.tile_height"
                ),
                (tree_size, tile_height),
            )

    def clear(self) -> None:
        """Forget every tile (they no longer match the log, or use another tile height)."""
        with self.store.transaction(commit=True) as cursor:
            cursor.execute(f"DELETE FROM {self.state_table}")
            cursor.execute(f"DELETE FROM {self.tiles_table}")


def _split(hashes: bytes | bytearray) -> list[bytes]:
    return [bytes(hashes[i : i + HASH_SIZE]) for i in range(0, len(hashes), HASH_SIZE)]


def _expand(hashes: bytes | bytearray, tile_height: int) -> list[list[bytes]]:
    """Every complete node inside one tile: [r][k] is the node of height
    r above the tile's base level, k-th in the tile."""
    levels = [_split(hashes)]
    for _ in range(tile_height - 1):
        below = levels[-1]
        if len(below) < 2:
            break
        levels.append([node_hash(below[k], below[k + 1]) for k in range(0, len(below) - 1, 2)])
    return levels


class TiledMerkleTree(MerkleProofs):
    """RFC 9162 tree served from persisted tiles; the same API as `MerkleTree`.

    `append` touches memory only; a flush (automatic whenever a leaf tile
    fills, and on `flush()`) stores what changed. With `tiles=None` nothing
    is ever stored (the tree is then memory-only, for tests and tools).
    Thread-safe: readers (proof routes) may run beside the appending thread.
    """

    def __init__(
        self,
        tiles: TileStore | None,
        *,
        tile_height: int = DEFAULT_TILE_HEIGHT,
        cache_tiles: int = _CACHE_TILES,
    ) -> None:
        if not 1 <= tile_height <= 16:
            raise ValueError("tile height must be between 1 and 16")
        self.tiles = tiles
        self.tile_height = tile_height
        self._width = 1 << tile_height
        self._tile_bytes = self._width * HASH_SIZE
        self._cache_max = max(1, cache_tiles)
        self._lock = threading.RLock()
        self._defer = 0
        self._reset()

    def _reset(self) -> None:
        self._size = 0
        self._stored_size = 0
        # _frontier[h]: the complete subtree of height h at the right edge (bit h of size set).
        self._frontier: list[bytes | None] = []
        # _edges[L] = (i, hashes): tile (L, i), the rightmost, not yet full.
        self._edges: list[tuple[int, bytearray]] = []
        self._dirty: dict[tuple[int, int], bytes] = {}  # full tiles not yet stored
        self._cache: OrderedDict[tuple[int, int], list[list[bytes]]] = OrderedDict()  # full tiles
        self._edge_cache: dict[int, tuple[int, int, list[list[bytes]]]] = {}  # level -> (i, width, tile)

    # -- size and opening -------------------------------------------------------
    @property
    def size(self) -> int:
        return self._size

    @property
    def stored_size(self) -> int:
        """The size the stored tiles describe (what a restart starts from)."""
        return self._stored_size

    def open(self) -> int:
        """Load the stored state; returns its size (0 when nothing is stored).

        Reads one partial tile per level, O(log n). Raises TileStateError
        when the rows cannot describe the stored size or were written with
        another tile height.
        """
        with self._lock:
            self._reset()
            if self.tiles is None:
                return 0
            state = self.tiles.state()
            if state is None:
                return 0
            size, tile_height = state
            if tile_height != self.tile_height or size < 0:
                raise TileStateError(
                    f"tiles of height {tile_height} stored, {self.tile_height} wanted", layout_changed=True
                )
            wanted: list[tuple[int, int, int]] = []  # (level, tile index, width)
            level = 0
            while size >> (self.tile_height * level):
                count = size >> (self.tile_height * level)
                wanted.append((level, count >> self.tile_height, count & (self._width - 1)))
                level += 1
            rows = self.tiles.read_tiles([(lv, i) for lv, i, width in wanted if width])
            for lv, i, width in wanted:
                data = rows.get((lv, i), b"")[: width * HASH_SIZE]
                if len(data) != width * HASH_SIZE:
                    raise TileStateError(f"tile {lv}/{i} holds fewer than {width} hashes")
                self._edges.append((i, bytearray(data)))
            self._size = self._stored_size = size
            self._frontier = [None] * size.bit_length()
            for height in range(size.bit_length()):
                if size >> height & 1:
                    self._frontier[height] = self._edge_node(height, (size >> height) - 1)
            return size

    def clear(self) -> None:
        """Drop the stored tiles and start empty (another tile height, or an
        operator's `citeledger repair` of tiles that did not match the log)."""
        with self._lock:
            if self.tiles is not None:
                self.tiles.clear()
            self._reset()

    # -- appending ----------------------------------------------------------------
    def append(self, leaf_hash: bytes) -> int:
        """Add one leaf hash; return the new tree size. O(log n), memory only,
        except that filling a leaf tile stores the tiles (unless deferred)."""
        check_hash_arg(leaf_hash, "leaf hash")
        with self._lock:
            index = self._size
            node = bytes(leaf_hash)
            frontier = self._frontier
            self._push(0, node)
            height = 0
            while index & 1:  # a right child completes its parent
                left = frontier[height]
                assert left is not None
                frontier[height] = None
                node = node_hash(left, node)
                height += 1
                if height % self.tile_height == 0:
                    self._push(height // self.tile_height, node)
                index >>= 1
            if height == len(frontier):
                frontier.append(None)
            frontier[height] = node
            self._size += 1
            if self._dirty and not self._defer:
                self._flush_quietly()
            return self._size

    def extend(self, hashes: Iterable[bytes]) -> int:
        """Append each leaf hash in order; return the new tree size."""
        with self.deferred_flush():
            for h in hashes:
                self.append(h)
        return self._size

    def _push(self, level: int, node: bytes) -> None:
        if level == len(self._edges):
            self._edges.append((0, bytearray()))
        index, data = self._edges[level]
        data += node
        if len(data) == self._tile_bytes:
            self._dirty[(level, index)] = bytes(data)
            self._edges[level] = (index + 1, bytearray())

    # -- storing ------------------------------------------------------------------
    @contextmanager
    def deferred_flush(self) -> Iterator[None]:
        """Append many leaves with one store write at the end instead of one per tile."""
        with self._lock:
            self._defer += 1
        try:
            yield
        finally:
            with self._lock:
                self._defer -= 1
                if not self._defer and self._dirty:
                    self._flush_quietly()

    def flush(self) -> None:
        """Store every changed tile and the size they describe (one transaction)."""
        with self._lock:
            if self.tiles is None or self._size <= self._stored_size:
                return
            rows = list(self._dirty.items())
            rows += [((level, i), bytes(data)) for level, (i, data) in enumerate(self._edges) if data]
            self.tiles.write(rows, self._size, self.tile_height)
            self._dirty.clear()
            self._stored_size = self._size

    def _flush_quietly(self) -> None:
        """Called from the append path, after the entries committed: a failure
        only leaves the tiles behind the log (the next open reads the tail),
        so it is logged, never raised into the committing caller."""
        if self.tiles is None:
            return  # memory-only: full tiles stay in `_dirty` for good
        try:
            self.flush()
        except Exception as exc:  # noqa: BLE001 - see docstring; retried at the next flush
            log_failure(log, "could not store Merkle tiles; they stay behind the log", exc)

    # -- reading ------------------------------------------------------------------
    def root(self, size: int | None = None) -> bytes:
        """MTH of the first `size` leaves; the current root comes from the frontier."""
        with self._lock:
            if size is None or size == self._size:
                nodes = [n for n in reversed(self._frontier) if n is not None]
                return fold_right(nodes) if nodes else EMPTY_ROOT
            return super().root(size)

    def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        with self._lock:
            return super().inclusion_proof(index, size)

    def consistency_proof(self, old_size: int, new_size: int) -> list[bytes]:
        with self._lock:
            return super().consistency_proof(old_size, new_size)

    def leaf_hash_at(self, index: int) -> bytes:
        with self._lock:
            return super().leaf_hash_at(index)

    def frontier(self, size: int) -> list[tuple[int, bytes]]:
        with self._lock:
            return super().frontier(size)

    def tile(self, level: int, index: int, width: int) -> bytes:
        """The first `width` hashes of tile (level, index) as C2SP tlog-tiles serves it:
        nodes of height tile_height*level, each complete in the current tree. Raises
        LookupError when the tree does not have that many yet."""
        with self._lock:
            available = (self._size >> (self.tile_height * level)) - (index << self.tile_height)
            if not 1 <= width <= min(available, self._width) or index < 0 or level < 0:
                raise LookupError(f"tile {level}/{index} has no {width} hashes in a tree of {self._size}")
            return b"".join(self._expanded(level, index)[0][:width])

    def _node(self, height: int, index: int) -> bytes:
        level, r = divmod(height, self.tile_height)
        first = index << r  # the first base-level node under this one
        tile = self._expanded(level, first >> self.tile_height)
        return tile[r][(first & (self._width - 1)) >> r]

    def _edge_node(self, height: int, index: int) -> bytes:
        """A node inside the rightmost partial tile of its level, folded directly
        (used while opening, before anything is cached)."""
        level, r = divmod(height, self.tile_height)
        tile_index, data = self._edges[level]
        offset = (index << r) - (tile_index << self.tile_height)
        hashes = _split(data[offset * HASH_SIZE : (offset + (1 << r)) * HASH_SIZE])
        while len(hashes) > 1:
            hashes = [node_hash(hashes[k], hashes[k + 1]) for k in range(0, len(hashes), 2)]
        return hashes[0]

    def _expanded(self, level: int, index: int) -> list[list[bytes]]:
        """Tile (level, index) with its inner levels: the growing edge tile from
        memory (one cached expansion per level, redone when it has grown), full
        tiles from the LRU cache, the unflushed ones, or the store."""
        if level < len(self._edges):
            edge_index, data = self._edges[level]
            if edge_index == index:
                width = len(data) // HASH_SIZE
                cached_edge = self._edge_cache.get(level)
                if cached_edge is not None and cached_edge[:2] == (index, width):
                    return cached_edge[2]
                expanded = _expand(data, self.tile_height)
                self._edge_cache[level] = (index, width, expanded)
                return expanded
        key = (level, index)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        full = self._dirty.get(key)
        if full is None:
            if self.tiles is None:
                raise TileStateError(f"tile {level}/{index} is not in memory and there is no store")
            full = self.tiles.read_tiles([key]).get(key, b"")[: self._tile_bytes]
            if len(full) != self._tile_bytes:
                raise TileStateError(f"tile {level}/{index} is missing from the store")
        expanded = _expand(full, self.tile_height)
        self._cache[key] = expanded
        while len(self._cache) > self._cache_max:
            self._cache.popitem(last=False)
        return expanded
