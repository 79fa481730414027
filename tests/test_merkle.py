"""ledger.tlog.merkle against a reference written straight from RFC 9162 section 2.1.

The reference below is the RFC's recursive definitions, MTH, PATH and
PROOF/SUBPROOF, over slices D[lo:hi] of a fixed leaf list; it shares no code
with ledger.merkle. Proof functions return the ranges whose MTH they list, so
tests can also see a proof's shape (which side each element sits on).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.storage.store import Store
from ledger.storage.tree_store import TiledMerkleTree, TileStore
from ledger.tlog.merkle import (
    EMPTY_ROOT,
    MerkleTree,
    ProofError,
    leaf_hash,
    node_hash,
    root_from_leaf_hashes,
    verify_consistency,
    verify_inclusion,
)

MAX_LEAVES = 340
LEAVES: tuple[bytes, ...] = tuple(f"leaf {i}".encode() for i in range(MAX_LEAVES))
Range = tuple[int, int]


# -- reference: RFC 9162 section 2.1 ----------------------------------------------
def _k(n: int) -> int:
    """Return "the largest power of two smaller than n" (n > 1)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


@functools.cache
def ref_mth(lo: int, hi: int) -> bytes:
    """MTH(D[lo:hi]), section 2.1.1."""
    n = hi - lo
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return hashlib.sha256(b"\x00" + LEAVES[lo]).digest()
    k = _k(n)
    return hashlib.sha256(b"\x01" + ref_mth(lo, lo + k) + ref_mth(lo + k, hi)).digest()


def ref_path(m: int, lo: int, hi: int) -> list[Range]:
    """PATH(m, D[lo:hi]), section 2.1.3.1, as ranges; m is relative to lo."""
    n = hi - lo
    if n == 1:
        return []
    k = _k(n)
    if m < k:
        return [*ref_path(m, lo, lo + k), (lo + k, hi)]
    return [*ref_path(m - k, lo + k, hi), (lo, lo + k)]


def ref_subproof(m: int, lo: int, hi: int, b: bool) -> list[Range]:
    """SUBPROOF(m, D[lo:hi], b), section 2.1.4.1, as ranges."""
    n = hi - lo
    if m == n:
        return [] if b else [(lo, hi)]
    k = _k(n)
    if m <= k:
        return [*ref_subproof(m, lo, lo + k, b), (lo + k, hi)]
    return [*ref_subproof(m - k, lo + k, hi, False), (lo, lo + k)]


def ref_proof(m: int, n: int) -> list[Range]:
    """PROOF(m, D[n]) = SUBPROOF(m, D[n], true), for 0 < m < n."""
    return ref_subproof(m, 0, n, True)


def hashes_of(ranges: Sequence[Range]) -> list[bytes]:
    return [ref_mth(lo, hi) for lo, hi in ranges]


def ref_leaf_hash(i: int) -> bytes:
    return ref_mth(i, i + 1)


def inclusion_shape(index: int, size: int) -> tuple[bool, ...]:
    """For each PATH element: is the sibling to the right of the leaf?"""
    return tuple(lo > index for lo, _ in ref_path(index, 0, size))


def consistency_shape(m: int, n: int) -> tuple[bool, tuple[bool, ...]]:
    """Is m a power of two (old root implied), and which elements lie inside D[0:m]."""
    return (m & (m - 1) == 0, tuple(hi <= m for _, hi in ref_proof(m, n)))


# -- fixtures ---------------------------------------------------------------------
BIG = 66  # sizes 1..64 are checked; +-1 around them needs 65
TREE = MerkleTree(ref_leaf_hash(i) for i in range(BIG))
SIZES = range(1, 65)


Tree = MerkleTree | TiledMerkleTree
TreeFactory = Callable[..., Tree]
_names = itertools.count()


@pytest.fixture(scope="module", params=["memory", "tiles-memory", "tiles-sqlite"])
def make_tree(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TreeFactory]:
    """Each tree implementation, built from leaf hashes. Tiles are 4 hashes
    wide (height 2) so these small trees span several tile levels; the SQLite
    kind is stored, then reopened with a one-tile cache, so every node left
    of the right edge is read back from the database."""
    kind = str(request.param)
    if kind == "memory":
        yield lambda leaves=(): MerkleTree(leaves)
        return
    if kind == "tiles-memory":
        yield lambda leaves=(): _extended(TiledMerkleTree(None, tile_height=2), leaves)
        return
    from ledger.config import LedgerConfig

    store = Store(LedgerConfig(data_dir=Path(tmp_path_factory.mktemp("tiles")), run_checkpointer=False))

    def stored(leaves: Iterable[bytes] = ()) -> Tree:
        tiles = TileStore(store, name=f"merkle_{next(_names)}")
        _extended(TiledMerkleTree(tiles, tile_height=2), leaves).flush()
        reopened = TiledMerkleTree(tiles, tile_height=2, cache_tiles=1)
        reopened.open()
        return reopened

    yield stored
    store.close()


def _extended(tree: TiledMerkleTree, leaves: Iterable[bytes]) -> TiledMerkleTree:
    tree.extend(leaves)
    return tree


def _accepts(verify: Callable[..., None], *args: object) -> bool:
    try:
        verify(*args)
    except ProofError:
        return False
    return True


def _flip(data: bytes, byte: int, bit: int) -> bytes:
    mutated = bytearray(data)
    mutated[byte] ^= 1 << bit
    return bytes(mutated)


def _flipped_proofs(proof: list[bytes], every_bit: bool) -> Iterator[tuple[str, list[bytes]]]:
    """Each element with one bit changed: every bit, or one bit in every byte."""
    for j, element in enumerate(proof):
        for byte in range(32):
            for bit in range(8) if every_bit else (byte % 8,):
                yield (
                    f"proof[{j}] byte {byte} bit {bit}",
                    [
                        *proof[:j],
                        _flip(element, byte, bit),
                        *proof[j + 1 :],
                    ],
                )


def _restructured_proofs(proof: list[bytes], extras: Sequence[bytes]) -> Iterator[tuple[str, list[bytes]]]:
    if proof:
        yield "last element dropped", proof[:-1]
        yield "first element dropped", proof[1:]
    for extra in extras:
        yield f"{extra.hex()[:8]} appended", [*proof, extra]
        yield f"{extra.hex()[:8]} prepended", [extra, *proof]
    for j in range(len(proof) - 1):
        swapped = list(proof)
        swapped[j], swapped[j + 1] = swapped[j + 1], swapped[j]
        yield f"elements {j} and {j + 1} swapped", swapped


# -- hash primitives --------------------------------------------------------------
def test_hash_primitives_follow_rfc() -> None:
    assert EMPTY_ROOT == hashlib.sha256(b"").digest()
    assert leaf_hash(b"abc") == hashlib.sha256(b"\x00abc").digest()
    left, right = b"L" * 32, b"R" * 32
    assert node_hash(left, right) == hashlib.sha256(b"\x01" + left + right).digest()
    assert root_from_leaf_hashes([]) == EMPTY_ROOT
    assert MerkleTree().root() == EMPTY_ROOT
    assert all(leaf_hash(LEAVES[i]) == ref_leaf_hash(i) for i in range(BIG))


# -- independent vectors: RFC 6962 data from transparency-dev/merkle ---------------
# testonly/constants.go and proof/verify_test.go of github.com/transparency-dev/merkle.
RFC6962_LEAVES = [bytes.fromhex(h) for h in (
    "", "00", "10", "2021", "3031", "40414243", "5051525354555657",
    "606162636465666768696a6b6c6d6e6f",
)]  # fmt: skip
RFC6962_ROOTS = [bytes.fromhex(h) for h in (
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
)]  # fmt: skip
# (leaf number, 1-based as in the Go test; tree size; proof)
RFC6962_INCLUSION = [
    (1, 1, []),
    (1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (6, 8, ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (3, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (2, 5, ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
]  # fmt: skip
RFC6962_CONSISTENCY = [
    (1, 1, []),
    (1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (6, 8, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 5, ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
    (6, 7, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
]  # fmt: skip


def test_rfc6962_vectors_from_transparency_dev(make_tree: TreeFactory) -> None:
    hashes = [leaf_hash(leaf) for leaf in RFC6962_LEAVES]
    tree = make_tree()
    assert tree.root() == RFC6962_ROOTS[0]
    for size, h in enumerate(hashes, start=1):
        assert tree.append(h) == size
        assert tree.root() == RFC6962_ROOTS[size]
        assert root_from_leaf_hashes(hashes[:size]) == RFC6962_ROOTS[size]
    for size, expected_root in enumerate(RFC6962_ROOTS):
        assert tree.root(size) == expected_root
    for leaf_number, size, proof_hex in RFC6962_INCLUSION:
        proof = [bytes.fromhex(h) for h in proof_hex]
        index = leaf_number - 1
        assert tree.inclusion_proof(index, size) == proof
        verify_inclusion(hashes[index], index, size, proof, RFC6962_ROOTS[size])
    for old, new, proof_hex in RFC6962_CONSISTENCY:
        proof = [bytes.fromhex(h) for h in proof_hex]
        assert tree.consistency_proof(old, new) == proof
        verify_consistency(old, new, RFC6962_ROOTS[old], RFC6962_ROOTS[new], proof)


# -- roots ------------------------------------------------------------------------
def test_every_root_matches_reference_while_growing_and_historically(make_tree: TreeFactory) -> None:
    tree = make_tree()
    big = make_tree(ref_leaf_hash(i) for i in range(BIG))
    for n in range(BIG + 1):
        expected = ref_mth(0, n)
        assert tree.size == n
        assert tree.root() == expected
        assert root_from_leaf_hashes([ref_leaf_hash(i) for i in range(n)]) == expected
        assert big.root(n) == expected  # historical size of a bigger tree
        if n < BIG:
            assert tree.append(ref_leaf_hash(n)) == n + 1
    assert big.size == BIG and big.root() == ref_mth(0, BIG)
    assert [big.leaf_hash_at(i) for i in range(BIG)] == [ref_leaf_hash(i) for i in range(BIG)]
    grown = make_tree()
    assert grown.extend(ref_leaf_hash(i) for i in range(BIG)) == BIG
    assert grown.root() == ref_mth(0, BIG)


def test_every_proof_matches_reference(make_tree: TreeFactory) -> None:
    """Every inclusion and consistency proof of every size up to BIG, per tree kind
    (the verifier tests below then hold for all kinds: the proofs are the same bytes)."""
    tree = make_tree(ref_leaf_hash(i) for i in range(BIG))
    for size in range(1, BIG + 1):
        assert tree.root(size) == ref_mth(0, size)
        for index in range(size):
            assert tree.inclusion_proof(index, size) == hashes_of(ref_path(index, 0, size)), (index, size)
        for old in range(0, size + 1):
            expected = hashes_of(ref_proof(old, size)) if 0 < old < size else []
            assert tree.consistency_proof(old, size) == expected, (old, size)


# -- inclusion --------------------------------------------------------------------
@pytest.mark.parametrize("size", SIZES)
def test_every_inclusion_proof(size: int) -> None:
    root = ref_mth(0, size)
    every_bit = size <= 8
    for index in range(size):
        leaf = ref_leaf_hash(index)
        proof = TREE.inclusion_proof(index, size)
        assert proof == hashes_of(ref_path(index, 0, size)), (index, size)
        verify_inclusion(leaf, index, size, proof, root)

        bad: list[str] = []
        for what, altered in _flipped_proofs(proof, every_bit):
            if _accepts(verify_inclusion, leaf, index, size, altered, root):
                bad.append(what)
        for what, altered in _restructured_proofs(proof, [root, EMPTY_ROOT, leaf]):
            if _accepts(verify_inclusion, leaf, index, size, altered, root):
                bad.append(what)
        for byte in range(32):
            if _accepts(verify_inclusion, leaf, index, size, proof, _flip(root, byte, byte % 8)):
                bad.append(f"root byte {byte} flipped")
            if _accepts(verify_inclusion, _flip(leaf, byte, byte % 8), index, size, proof, root):
                bad.append(f"leaf byte {byte} flipped")
        for other in {size - 1, size + 1, 0}:
            if _accepts(verify_inclusion, leaf, index, size, proof, ref_mth(0, other)):
                bad.append(f"root of size {other}")
        for other in (index - 1, index + 1):
            if 0 <= other < size and _accepts(
                verify_inclusion, ref_leaf_hash(other), index, size, proof, root
            ):
                bad.append(f"leaf {other}'s hash")
        assert not bad, f"index {index}, size {size} accepted: {bad}"

        # Wrong index or size with the same proof and root. The RFC verifier
        # only sees sizes through the proof's shape, so it must accept exactly
        # when the reference proof for the wrong claim has the same shape.
        shape = inclusion_shape(index, size)
        for i, n in ((index - 1, size), (index + 1, size), (index, size - 1), (index, size + 1)):
            same = 0 <= i < n and inclusion_shape(i, n) == shape
            assert _accepts(verify_inclusion, leaf, i, n, proof, root) == same, (i, n)
            if 0 <= i < n and n != size:
                # ...and never against the wrong size's real root.
                assert not _accepts(verify_inclusion, leaf, i, n, proof, ref_mth(0, n))


def test_inclusion_rejects_out_of_range_and_malformed_arguments() -> None:
    size = 10
    root = ref_mth(0, size)
    leaf = ref_leaf_hash(3)
    proof = TREE.inclusion_proof(3, size)
    for index, n, message in (
        (10, 10, "not below tree size"),
        (11, 10, "not below tree size"),
        (0, 0, "not below tree size"),
        (-1, 10, "negative"),
        (3, -1, "negative"),
    ):
        with pytest.raises(ProofError, match=message):
            verify_inclusion(leaf, index, n, proof, root)
    with pytest.raises(ProofError, match="longer"):
        verify_inclusion(leaf, 3, size, [*proof, root], root)
    with pytest.raises(ProofError, match="shorter"):
        verify_inclusion(leaf, 3, size, proof[:-1], root)
    with pytest.raises(ProofError, match="root"):
        verify_inclusion(leaf, 3, size, proof, EMPTY_ROOT)
    with pytest.raises(ProofError, match="leaf hash must be 32 bytes"):
        verify_inclusion(leaf[:31], 3, size, proof, root)
    with pytest.raises(ProofError, match="root must be 32 bytes"):
        verify_inclusion(leaf, 3, size, proof, root + b"\x00")
    with pytest.raises(ProofError, match=r"proof element 1 must be 32 bytes"):
        verify_inclusion(leaf, 3, size, [proof[0], b"", *proof[1:]], root)
    # A single-leaf tree: the leaf hash is the root and the path is empty.
    verify_inclusion(ref_leaf_hash(0), 0, 1, [], ref_mth(0, 1))
    with pytest.raises(ProofError):
        verify_inclusion(ref_leaf_hash(1), 0, 1, [], ref_mth(0, 1))


# -- consistency ------------------------------------------------------------------
@pytest.mark.parametrize("new_size", SIZES)
def test_every_consistency_proof(new_size: int) -> None:
    new_root = ref_mth(0, new_size)
    every_bit = new_size <= 8
    # Trivial cases: nothing to prove, so the proof is empty and only that passes.
    for old_size, old_root in ((0, EMPTY_ROOT), (new_size, new_root)):
        assert TREE.consistency_proof(old_size, new_size) == []
        verify_consistency(old_size, new_size, old_root, new_root, [])
        assert not _accepts(verify_consistency, old_size, new_size, old_root, new_root, [new_root])
    assert not _accepts(verify_consistency, new_size, new_size, new_root, EMPTY_ROOT, [])
    assert not _accepts(verify_consistency, 0, new_size, new_root, new_root, [])

    for old_size in range(1, new_size):
        old_root = ref_mth(0, old_size)
        proof = TREE.consistency_proof(old_size, new_size)
        assert proof == hashes_of(ref_proof(old_size, new_size)), (old_size, new_size)
        verify_consistency(old_size, new_size, old_root, new_root, proof)

        def accepts(
            altered: list[bytes], r1: bytes = old_root, r2: bytes = new_root, m: int = old_size
        ) -> bool:
            return _accepts(verify_consistency, m, new_size, r1, r2, altered)

        bad = [what for what, altered in _flipped_proofs(proof, every_bit) if accepts(altered)]
        extras = [old_root, new_root, EMPTY_ROOT, proof[0], proof[-1]]
        bad += [what for what, alt in _restructured_proofs(proof, extras) if accepts(alt)]
        if accepts([]):
            bad.append("empty proof")
        if accepts(proof, new_root, old_root):
            bad.append("roots swapped")
        for byte in range(32):
            if accepts(proof, _flip(old_root, byte, byte % 8)):
                bad.append(f"old root byte {byte} flipped")
            if accepts(proof, old_root, _flip(new_root, byte, byte % 8)):
                bad.append(f"new root byte {byte} flipped")
        for other in (old_size - 1, old_size + 1):
            if accepts(proof, ref_mth(0, other)):
                bad.append(f"old root of size {other}")
        for other in (new_size - 1, new_size + 1):
            if accepts(proof, old_root, ref_mth(0, other)):
                bad.append(f"new root of size {other}")
        assert not bad, f"{old_size} -> {new_size} accepted: {bad}"

        # Wrong sizes with the same proof and roots: accepted exactly when the
        # reference proof for those sizes has the same shape (see inclusion).
        shape = consistency_shape(old_size, new_size)
        for m, n in (
            (old_size - 1, new_size),
            (old_size + 1, new_size),
            (old_size, new_size - 1),
            (old_size, new_size + 1),
        ):
            same = 0 < m < n and consistency_shape(m, n) == shape
            got = _accepts(verify_consistency, m, n, old_root, new_root, proof)
            assert got == same, (old_size, new_size, m, n)
            if 0 < m < n:
                real = (ref_mth(0, m), ref_mth(0, n))
                assert not _accepts(verify_consistency, m, n, *real, proof), (m, n)


def test_consistency_rejects_out_of_range_and_malformed_arguments() -> None:
    r3, r7 = ref_mth(0, 3), ref_mth(0, 7)
    proof = TREE.consistency_proof(3, 7)
    cases: list[tuple[int, int, bytes, bytes, list[bytes], str]] = [
        (7, 3, r7, r3, proof, "larger than new size"),
        (-1, 7, r3, r7, proof, "negative"),
        (3, -7, r3, r7, proof, "negative"),
        (3, 7, r3, r7, [], "empty"),
        (3, 7, r3, r7, [*proof, r7], "longer"),
        (3, 7, r3, r7, proof[:-1], "shorter"),
        (3, 7, r7, r7, proof, "old root"),
        (3, 7, r3, r3, proof, "new root"),
        (3, 3, r3, r3, [r3], "equal sizes must be empty"),
        (3, 3, r3, r7, [], "roots differ"),
        (0, 7, EMPTY_ROOT, r7, proof, "from the empty tree must be empty"),
        (0, 7, r3, r7, [], "empty tree's root"),
        (3, 7, r3[:31], r7, proof, "old root must be 32 bytes"),
        (3, 7, r3, r7, [*proof[:2], proof[2] + b"x"], "proof element 2 must be 32 bytes"),
    ]
    for old, new, old_root, new_root, bad_proof, message in cases:
        with pytest.raises(ProofError, match=message):
            verify_consistency(old, new, old_root, new_root, bad_proof)
    verify_consistency(0, 0, EMPTY_ROOT, EMPTY_ROOT, [])


def test_consistency_proof_must_be_consumed_entirely() -> None:
    """CVE-2022-36111 class: a valid proof with anything added must fail."""
    for old, new in ((1, 2), (2, 4), (4, 8), (3, 7), (6, 8), (5, 64)):
        proof = TREE.consistency_proof(old, new)
        r1, r2 = ref_mth(0, old), ref_mth(0, new)
        verify_consistency(old, new, r1, r2, proof)
        for extra in (r1, r2, proof[-1], EMPTY_ROOT, *proof):
            with pytest.raises(ProofError):
                verify_consistency(old, new, r1, r2, [*proof, extra])
        # The old root must be checked, whether or not the proof implies it.
        with pytest.raises(ProofError, match=r"does not lead to the (old|new) root"):
            verify_consistency(old, new, ref_mth(0, old + 1), r2, proof)


# -- MerkleTree argument checks ---------------------------------------------------
def test_tree_rejects_out_of_range_arguments(make_tree: TreeFactory) -> None:
    tree = make_tree(ref_leaf_hash(i) for i in range(5))
    calls: list[tuple[Callable[..., object], tuple[int, ...], str]] = [
        (tree.root, (6,), "size 6 out of range"),
        (tree.root, (-1,), "out of range"),
        (tree.inclusion_proof, (5, 5), "leaf index 5 out of range"),
        (tree.inclusion_proof, (-1, 5), "out of range"),
        (tree.inclusion_proof, (0, 6), "size 6 out of range"),
        (tree.inclusion_proof, (0, 0), "out of range"),
        (tree.consistency_proof, (3, 6), "new size 6 out of range"),
        (tree.consistency_proof, (4, 3), "old size 4"),
        (tree.consistency_proof, (-1, 3), "old size -1"),
        (tree.leaf_hash_at, (5,), "leaf index 5 out of range"),
        (tree.leaf_hash_at, (-1,), "out of range"),
    ]
    for call, args, message in calls:
        with pytest.raises(ValueError, match=message):
            call(*args)
    for wrong in (b"", b"x" * 31, b"x" * 33):
        with pytest.raises(ValueError, match="32 bytes"):
            tree.append(wrong)
        with pytest.raises(ValueError, match="32 bytes"):
            root_from_leaf_hashes([ref_leaf_hash(0), wrong])
    assert tree.size == 5  # failed appends changed nothing
    assert tree.root() == ref_mth(0, 5)


# -- random sizes -----------------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(data=st.data(), size=st.integers(1, 300), extra=st.integers(0, 30))
def test_random_sizes_match_reference(
    make_tree: TreeFactory, data: st.DataObject, size: int, extra: int
) -> None:
    tree = make_tree(ref_leaf_hash(i) for i in range(size + extra))
    index = data.draw(st.integers(0, size - 1), label="index")
    old = data.draw(st.integers(0, size), label="old size")
    root, old_root = ref_mth(0, size), ref_mth(0, old)
    assert tree.root(size) == root
    assert root_from_leaf_hashes([ref_leaf_hash(i) for i in range(size)]) == root

    leaf = ref_leaf_hash(index)
    path = tree.inclusion_proof(index, size)
    assert path == hashes_of(ref_path(index, 0, size))
    verify_inclusion(leaf, index, size, path, root)

    proof = tree.consistency_proof(old, size)
    assert proof == (hashes_of(ref_proof(old, size)) if 0 < old < size else [])
    verify_consistency(old, size, old_root, root, proof)

    if path:
        j = data.draw(st.integers(0, len(path) - 1), label="path element")
        bit = data.draw(st.integers(0, 255), label="bit")
        path[j] = _flip(path[j], bit // 8, bit % 8)
        with pytest.raises(ProofError):
            verify_inclusion(leaf, index, size, path, root)
    if proof:
        j = data.draw(st.integers(0, len(proof) - 1), label="proof element")
        bit = data.draw(st.integers(0, 255), label="bit")
        proof[j] = _flip(proof[j], bit // 8, bit % 8)
        with pytest.raises(ProofError):
            verify_consistency(old, size, old_root, root, proof)


def test_the_frontier_at_any_size_goes_on_to_every_later_root() -> None:
    """`frontier(n)` (what the console's Proofs check starts from) folds to root(n), and
    hashing leaves n+1..m onto it gives root(m), in memory as in the tiles."""
    from ledger.usecases.held_checkpoint import _fold, _push

    leaves = [leaf_hash(str(i).encode()) for i in range(300)]
    tree = MerkleTree(leaves)
    for size in (1, 2, 3, 7, 8, 9, 255, 256, 257, 299):
        stack = tree.frontier(size)
        assert _fold(stack) == tree.root(size)
        for leaf in leaves[size:]:
            _push(stack, leaf)
        assert _fold(stack) == tree.root(300)
