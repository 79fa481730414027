"""The Merkle tree persisted as tiles beside the log (ledger/storage/tree_store.py), on
real SQLite files and the real PostgreSQL server: equal to the in-memory tree,
identical after restart, correct from any crash state, built once for an
older store, consistent when several processes append."""

from __future__ import annotations

import base64
import hashlib
import os
import random
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import orjson
import pytest

from ledger.config import LedgerConfig
from ledger.storage.store import LEDGER_STREAM_ID, Store
from ledger.storage.tree_store import TiledMerkleTree, TileStore
from ledger.tlog.merkle import MerkleTree
from ledger.writing.application import Ledger, LedgerIntegrityError
from ledger.writing.integrity import IntegrityHold
from tests.conftest import RawStore, fresh_config
from tests.factories import TENANT, retrieval_draft
from tests.test_processes import _acks, _spawn


def _leaves(count: int) -> list[bytes]:
    return [hashlib.sha256(f"leaf {i}".encode()).digest() for i in range(count)]


def _interesting_sizes(size: int) -> list[int]:
    around = {s + d for s in (1, 2, 4, 8, 64, 128, 256, 512, size) for d in (-1, 0, 1)}
    return sorted({*range(0, min(size, 40) + 1), *(s for s in around if 0 <= s <= size)})


def _assert_same_tree(tree: TiledMerkleTree, ref: MerkleTree, seed: int = 0) -> None:
    """Roots at many sizes, and sampled inclusion and consistency proofs, byte for byte."""
    assert tree.size == ref.size
    assert tree.root() == ref.root()
    rng = random.Random(seed)
    for size in _interesting_sizes(ref.size):
        assert tree.root(size) == ref.root(size), size
        if size == 0:
            continue
        for index in {0, size - 1, rng.randrange(size), rng.randrange(size)}:
            assert tree.inclusion_proof(index, size) == ref.inclusion_proof(index, size), (index, size)
            assert tree.leaf_hash_at(index) == ref.leaf_hash_at(index)
        for old in {1, size - 1, rng.randrange(size + 1), rng.randrange(size + 1)}:
            if 0 <= old <= size:
                assert tree.consistency_proof(old, size) == ref.consistency_proof(old, size), (old, size)


def _log_tree(ledger: Ledger) -> MerkleTree:
    """The reference: the in-memory tree over every entry, read from the store."""
    return MerkleTree(event.leaf_hash for event in ledger.read())


def _reopen(config: LedgerConfig) -> Ledger:
    return Ledger(LedgerConfig(**{**config.__dict__, "run_checkpointer": False}))


def _fill(ledger: Ledger, count: int, batch: int = 100) -> None:
    while count > 0:
        size = min(batch, count)
        ledger.append_batch([retrieval_draft(ledger) for _ in range(size)], tenant_id=TENANT)
        count -= size


def _expected_tiles(ref: MerkleTree, height: int = 8) -> dict[tuple[int, int], bytes]:
    """Every tile the log determines: level L holds the nodes of height height*L."""
    tiles: dict[tuple[int, int], bytes] = {}
    level = 0
    while ref.size >> (height * level):
        count = ref.size >> (height * level)
        nodes = [ref._node(height * level, i) for i in range(count)]
        for start in range(0, count, 1 << height):
            tiles[(level, start >> height)] = b"".join(nodes[start : start + (1 << height)])
        level += 1
    return tiles


def _stored_tiles(raw: RawStore) -> dict[tuple[int, int], bytes]:
    rows = raw.execute("SELECT level, idx, hashes FROM citeledger_merkle_tiles")
    return {(int(level), int(idx)): bytes(hashes) for level, idx, hashes in rows}


# -- the tree alone ------------------------------------------------------------------------
def test_tiled_tree_equals_the_memory_tree(backend: str, tmp_path: Path) -> None:
    leaves = _leaves(700)
    with fresh_config(backend, tmp_path) as config:
        store = Store(config)
        try:
            for tile_height in (1, 3, 8):
                tiles = TileStore(store, name=f"merkle_h{tile_height}")
                tree, ref = TiledMerkleTree(tiles, tile_height=tile_height), MerkleTree()
                rng = random.Random(tile_height)
                for n, leaf in enumerate(leaves):
                    if n % 97 == 0:
                        assert tree.root() == ref.root()
                    tree.append(leaf)
                    ref.append(leaf)
                    if rng.random() < 0.03:
                        tree.flush()
                _assert_same_tree(tree, ref, tile_height)
                tree.flush()
                reopened = TiledMerkleTree(tiles, tile_height=tile_height, cache_tiles=1)
                assert reopened.open() == len(leaves)
                _assert_same_tree(reopened, ref, tile_height)
                assert tiles.state() == (len(leaves), tile_height)
        finally:
            store.close()


# -- the ledger ----------------------------------------------------------------------------
def test_restart_gives_identical_roots_proofs_head_and_keys(open_ledger: Callable[..., Ledger]) -> None:
    ledger = open_ledger()
    _fill(ledger, 300)
    ledger.rotate_signing_key()
    _fill(ledger, 300)
    ref = _log_tree(ledger)
    _assert_same_tree(ledger.tree, ref)
    head, keys, introduced = ledger.head_hash, dict(ledger.public_keys), dict(ledger.key_introduced_at)
    ledger.close()

    again = open_ledger()
    assert again.tree.stored_size == again.size == ref.size == 602  # nothing read after the tiles
    assert again.head_hash == head
    assert again.public_keys == keys and again.key_introduced_at == introduced
    assert again.signing_key().kid == max(introduced, key=introduced.__getitem__)
    _assert_same_tree(again.tree, ref)
    appended = again.append(retrieval_draft(again), tenant_id=TENANT)  # the chain continues
    assert appended.position == 603 and appended.envelope["prev_hash"] == head
    assert again.tree.root() == _log_tree(again).root()


def _tiles_at(config: LedgerConfig, leaf_hashes: Sequence[bytes], size: int) -> None:
    """Leave exactly the tiles a process that stopped after `size` entries had stored."""
    store = Store(config)
    try:
        tiles = TileStore(store)
        tiles.clear()
        tree = TiledMerkleTree(tiles)
        tree.extend(leaf_hashes[:size])
        tree.flush()
        assert tiles.state() == ((size, 8) if size else None)
    finally:
        store.close()


@pytest.mark.parametrize("stored", [0, 1, 255, 256, 300, 512, 599])
def test_tiles_behind_the_log_are_caught_up(ledger_config: LedgerConfig, stored: int) -> None:
    """The state of a crash after the entries committed and before their tiles
    were stored, at every kind of boundary: opening reads the tail and is exact."""
    ledger = _reopen(ledger_config)
    _fill(ledger, 600)
    ref = _log_tree(ledger)
    ledger.close()
    _tiles_at(ledger_config, [ref.leaf_hash_at(i) for i in range(ref.size)], stored)
    again = _reopen(ledger_config)
    try:
        assert again.size == 601
        _assert_same_tree(again.tree, ref, stored)
        assert again.head_hash == ref.leaf_hash_at(600).hex()
        assert again.tree.stored_size >= 512  # a tail that filled a tile stored it
    finally:
        again.close()
    assert _reopen(ledger_config).tree.stored_size == 601


@pytest.mark.slow
def test_sigkilled_writer_leaves_tiles_that_open_exactly(ledger_config: LedgerConfig, tmp_path: Path) -> None:
    """A real crash at an arbitrary point of appending (and of storing tiles)."""
    for round_ in range(2):
        ack = tmp_path / f"ack{round_}.txt"
        worker = _spawn(ledger_config, 1_000_000, 5, ack)
        deadline = time.monotonic() + 120
        while len(_acks(ack)) < 300 + 137 * round_ and time.monotonic() < deadline:
            assert worker.poll() is None, worker.stderr.read().decode() if worker.stderr else ""
            time.sleep(0.01)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)
        ledger = _reopen(ledger_config)
        try:
            ref = _log_tree(ledger)
            assert ledger.size == ref.size >= 300
            _assert_same_tree(ledger.tree, ref, round_)
            stored = _reopen_tree(ledger.store)  # exactly what the tiles alone say
            assert 0 < stored.size <= ref.size
            _assert_same_tree(stored, MerkleTree(ref.leaf_hash_at(i) for i in range(stored.size)), round_)
            ledger.append(retrieval_draft(ledger), tenant_id=TENANT)
            assert ledger.tree.root() == _log_tree(ledger).root()
        finally:
            ledger.close()


def _reopen_tree(store: Store) -> TiledMerkleTree:
    tree = TiledMerkleTree(TileStore(store), cache_tiles=1)
    tree.open()
    return tree


def _assert_held(ledger: Ledger, kind: str) -> None:
    """Writes and checkpoints refused, naming the finding; reads still answer."""
    assert [finding.kind for finding in ledger.findings] == [kind]
    with pytest.raises(IntegrityHold, match="citeledger repair"):
        ledger.append(retrieval_draft(ledger), tenant_id=TENANT)
    with pytest.raises(IntegrityHold):
        ledger.issue_checkpoint()
    assert ledger.get(1) is not None


def test_tiles_that_do_not_match_the_log_hold_writes_until_repaired(
    ledger_config: LedgerConfig, raw_store: RawStore
) -> None:
    """Partial or foreign tiles (a missing or short row, a wrong leaf) are evidence:
    opening keeps them as they are, serves the tree built from the log, and refuses
    writes until `repair`, which records a signed IntegrityRepaired entry and only
    then rebuilds them. Tiles of another layout are a setting and are rebuilt."""
    ledger = _reopen(ledger_config)
    _fill(ledger, 700)
    ref = _log_tree(ledger)
    ledger.close()
    expected = _expected_tiles(ref)
    raw_store.execute("UPDATE citeledger_merkle_state SET tile_height = 4")
    again = _reopen(ledger_config)
    try:
        assert again.findings == []
        _assert_same_tree(again.tree, ref)
    finally:
        again.close()
    assert _stored_tiles(raw_store) == expected
    damages = [
        ("DELETE FROM citeledger_merkle_tiles WHERE level = 0 AND idx = 2", (), "tiles_damaged"),
        (
            "UPDATE citeledger_merkle_tiles SET hashes = substr(hashes, 1, 32) WHERE level = 1",
            (),
            "tiles_damaged",
        ),
        ("UPDATE citeledger_merkle_tiles SET hashes = ? WHERE level = 0 AND idx = 2", None, "tiles_disagree"),
    ]
    size = 701
    for damage, params, kind in damages:
        zeros = b"\x00" * len(_stored_tiles(raw_store)[(0, 2)])  # a wrong last leaf, the right length
        raw_store.execute(damage, params if params is not None else (zeros,))
        damaged = _stored_tiles(raw_store)
        held = _reopen(ledger_config)
        try:
            _assert_held(held, kind)
            _assert_same_tree(held.tree, _log_tree(held))
        finally:
            held.close()
        assert _stored_tiles(raw_store) == damaged, damage  # the evidence is still there
        held = _reopen(ledger_config)
        try:
            repaired = held.repair(actor="test")
            size += 1
            assert repaired.type == "IntegrityRepaired" and repaired.position == size
            assert repaired.payload["findings"][0]["kind"] == kind
            assert held.findings == []
            held.append(retrieval_draft(held), tenant_id=TENANT)
            size += 1
        finally:
            held.close()
        final = _reopen(ledger_config)
        try:
            assert final.findings == []
            assert _stored_tiles(raw_store) == _expected_tiles(_log_tree(final))
        finally:
            final.close()


def test_a_log_cut_back_under_its_tiles_and_checkpoints_is_held(
    ledger_config: LedgerConfig, raw_store: RawStore
) -> None:
    """Entries deleted from under the tiles: the log does NOT win. The shorter log is
    served for reading and verification, writes wait for the operator; with the
    tiles gone too, the newest signed checkpoint is still evidence."""
    ledger = _reopen(ledger_config)
    _fill(ledger, 700)
    record = ledger.issue_checkpoint()
    assert record is not None and record.tree_size == 701
    ledger.close()
    tiles_before = _stored_tiles(raw_store)
    for position in range(650, 702):
        raw_store.execute(
            "DELETE FROM stored_events WHERE originator_id = ? AND originator_version = ?",
            (raw_store.stream_value(LEDGER_STREAM_ID), position),
        )
    held = _reopen(ledger_config)
    try:
        assert held.size == 649
        kinds = sorted(finding.kind for finding in held.findings)
        assert kinds == ["log_shorter_than_checkpoint", "log_shorter_than_tiles"]
        with pytest.raises(IntegrityHold):
            held.append(retrieval_draft(held), tenant_id=TENANT)
        assert held.tree.root() == _log_tree(held).root()
    finally:
        held.close()
    assert _stored_tiles(raw_store) == tiles_before  # nothing healed at start-up
    raw_store.execute("DELETE FROM citeledger_merkle_tiles")
    raw_store.execute("DELETE FROM citeledger_merkle_state")
    held = _reopen(ledger_config)
    try:
        # Deleting the tiles afterwards does not erase what they showed: stored when first seen.
        kinds = sorted(finding.kind for finding in held.findings)
        assert kinds == ["log_shorter_than_checkpoint", "log_shorter_than_tiles"]
        event = held.repair(actor="test")
        assert event.payload["log_size"] == 649
        assert held.findings == []
        held.append(retrieval_draft(held), tenant_id=TENANT)
        assert held.issue_checkpoint() is not None
    finally:
        held.close()
    after = _reopen(ledger_config)
    try:
        assert after.findings == []  # answered evidence does not hold again
    finally:
        after.close()


def test_store_without_tiles_is_upgraded_on_first_open(
    ledger_config: LedgerConfig, raw_store: RawStore
) -> None:
    ledger = _reopen(ledger_config)
    _fill(ledger, 250)
    ledger.rotate_signing_key()
    _fill(ledger, 400)
    ref = _log_tree(ledger)
    keys, introduced = dict(ledger.public_keys), dict(ledger.key_introduced_at)
    ledger.close()
    # What a store written by the previous version looks like.
    raw_store.execute("DROP TABLE citeledger_merkle_tiles")
    raw_store.execute("DROP TABLE citeledger_merkle_state")
    raw_store.execute("DROP INDEX citeledger_key_entries")

    upgraded = _reopen(ledger_config)
    try:
        assert upgraded.size == ref.size == 652
        assert upgraded.tree.stored_size == 652  # tiles built while reading the log once
        assert upgraded.public_keys == keys and upgraded.key_introduced_at == introduced
        _assert_same_tree(upgraded.tree, ref)
    finally:
        upgraded.close()
    assert _stored_tiles(raw_store) == _expected_tiles(ref)
    after = _reopen(ledger_config)
    try:
        assert after.tree.stored_size == after.size == 652
        assert after.public_keys == keys and after.key_introduced_at == introduced
        _assert_same_tree(after.tree, ref)
    finally:
        after.close()


def test_key_chain_checks_still_apply_without_a_full_read(
    ledger_config: LedgerConfig, raw_store: RawStore
) -> None:
    ledger = _reopen(ledger_config)
    ledger.rotate_signing_key()
    _fill(ledger, 20)
    ledger.close()
    raw_store_value = raw_store.stream_value(LEDGER_STREAM_ID)
    state = bytes(
        raw_store.execute(
            "SELECT state FROM stored_events WHERE originator_id = ? AND originator_version = 2",
            (raw_store_value,),
        )[0][0]
    )
    envelope = orjson.loads(state)
    signature = bytearray(base64.b64decode(envelope["payload"]["possession_signature"]))
    signature[5] ^= 1
    envelope["payload"]["possession_signature"] = base64.b64encode(bytes(signature)).decode()
    raw_store.execute(
        "UPDATE stored_events SET state = ? WHERE originator_id = ? AND originator_version = 2",
        (orjson.dumps(envelope, option=orjson.OPT_SORT_KEYS), raw_store_value),
    )
    with pytest.raises(LedgerIntegrityError, match="position 2: key rotation without a valid proof"):
        _reopen(ledger_config).close()


@pytest.mark.slow
def test_two_processes_append_while_a_third_follows(ledger_config: LedgerConfig, tmp_path: Path) -> None:
    """Writers on both sides of many tile boundaries store the same tiles; a
    ledger opened before them catches up through `sync`."""
    watcher = _reopen(ledger_config)
    try:
        acks = [tmp_path / "a.txt", tmp_path / "b.txt"]
        workers = [_spawn(ledger_config, 350, 1, acks[0]), _spawn(ledger_config, 350, 9, acks[1])]
        midway = False
        while any(worker.poll() is None for worker in workers):
            midway = midway or watcher.sync() > 1
            time.sleep(0.05)
        for worker in workers:
            _, stderr = worker.communicate(timeout=300)
            assert worker.returncode == 0, stderr.decode()[-2000:]
        assert watcher.sync() == 701
        ref = _log_tree(watcher)
        _assert_same_tree(watcher.tree, ref)
        watcher.tree.flush()
        fresh = _reopen(ledger_config)
        try:
            assert fresh.tree.stored_size == fresh.size == 701
            _assert_same_tree(fresh.tree, ref)
            assert fresh.head_hash == watcher.head_hash
        finally:
            fresh.close()
        assert _stored_tiles(RawStore(ledger_config)) == _expected_tiles(ref)
    finally:
        watcher.close()
