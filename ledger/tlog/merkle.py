"""RFC 9162 (section 2.1) Merkle tree hashes, proofs and proof verification.

Independent of storage. `MerkleProofs` answers roots, inclusion proofs and
consistency proofs of any historical tree size from at most O(log n) perfect
subtree hashes plus one O(log n) fold, never from rehashing leaves; where the
subtree hashes come from is the subclass's business. `MerkleTree` keeps every
one in memory (one `bytearray` per level, 32 bytes a node);
`ledger.storage.tree_store.TiledMerkleTree` reads them from tiles persisted with the
log.

The verifiers follow RFC 9162 sections 2.1.3.2 and 2.1.4.2 step by step.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

HASH_SIZE = 32

# MTH({}) = SHA-256() (RFC 9162 section 2.1.1).
EMPTY_ROOT = hashlib.sha256(b"").digest()

_sha256 = hashlib.sha256


class ProofError(Exception):
    """A Merkle proof does not verify; the message names the reason."""


def leaf_hash(leaf: bytes) -> bytes:
    """MTH({d}) = SHA-256(0x00 || d)."""
    return _sha256(b"\x00" + leaf).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right)."""
    return _sha256(b"\x01" + left + right).digest()


def _largest_power_of_two_below(n: int) -> int:
    """The k of RFC 9162: the largest power of two smaller than n (n > 1)."""
    return 1 << ((n - 1).bit_length() - 1)


def check_hash_arg(value: bytes, what: str) -> None:
    if not isinstance(value, bytes | bytearray) or len(value) != HASH_SIZE:
        raise ValueError(f"{what} must be {HASH_SIZE} bytes")


def root_from_leaf_hashes(hashes: Sequence[bytes]) -> bytes:
    """MTH over already-hashed leaves.

    Pairing neighbours level by level and carrying an odd last node up
    unchanged builds exactly the RFC's left-balanced tree (split at the largest
    power of two), without recursion.
    """
    if not hashes:
        return EMPTY_ROOT
    if any(len(h) != HASH_SIZE for h in hashes):
        raise ValueError(f"every leaf hash must be {HASH_SIZE} bytes")
    level = list(hashes)
    # Copying a hasher already fed 0x01 avoids building a 65-byte string per node.
    interior = _sha256(b"\x01")
    while len(level) > 1:
        paired: list[bytes] = []
        pairs = iter(level)
        for left, right in zip(pairs, pairs, strict=False):
            h = interior.copy()
            h.update(left)
            h.update(right)
            paired.append(h.digest())
        if len(level) & 1:
            paired.append(level[-1])
        level = paired
    return bytes(level[0])


class MerkleProofs:
    """RFC 9162 roots and proofs over any source of perfect-subtree hashes.

    Subclasses say how big the tree is (`size`) and where the hash of the
    complete subtree of 2**height leaves starting at leaf index * 2**height
    comes from (`_node`): memory for `MerkleTree`, persisted tiles for
    `ledger.storage.tree_store.TiledMerkleTree`. The proof algorithms live here once,
    so both answer byte for byte the same.
    """

    __slots__ = ()

    @property
    def size(self) -> int:
        raise NotImplementedError

    def _node(self, height: int, index: int) -> bytes:
        """Hash of the complete subtree of 2**height leaves numbered `index` at that height."""
        raise NotImplementedError

    def leaf_hash_at(self, index: int) -> bytes:
        if not 0 <= index < self.size:
            raise ValueError(f"leaf index {index} out of range for tree size {self.size}")
        return self._node(0, index)

    def root(self, size: int | None = None) -> bytes:
        """MTH of the first `size` leaves (default: all of them)."""
        if size is None:
            size = self.size
        self._check_size(size, "size")
        return self._range_hash(0, size) if size else EMPTY_ROOT

    def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        """PATH(index, D[size]) of RFC 9162 section 2.1.3.1, leaf side first."""
        self._check_size(size, "size")
        if not 0 <= index < size:
            raise ValueError(f"leaf index {index} out of range for tree size {size}")
        # Walk the RFC recursion top-down, then reverse: PATH lists the
        # sibling deepest in the tree first.
        path: list[bytes] = []
        lo, hi = 0, size
        while hi - lo > 1:
            k = _largest_power_of_two_below(hi - lo)
            if index < lo + k:
                path.append(self._range_hash(lo + k, hi))
                hi = lo + k
            else:
                path.append(self._range_hash(lo, lo + k))
                lo += k
        path.reverse()
        return path

    def consistency_proof(self, old_size: int, new_size: int) -> list[bytes]:
        """PROOF(old_size, D[new_size]) of RFC 9162 section 2.1.4.1.

        Empty when old_size is 0 or equal to new_size: the RFC defines proofs
        only for 0 < m < n, and in those cases there is nothing to prove.
        """
        self._check_size(new_size, "new size")
        if not 0 <= old_size <= new_size:
            raise ValueError(f"old size {old_size} must be between 0 and new size {new_size}")
        if old_size in (0, new_size):
            return []
        # SUBPROOF(m, D[lo:hi], complete), unrolled top-down then reversed.
        proof: list[bytes] = []
        lo, hi, m, complete = 0, new_size, old_size, True
        while m != hi - lo:
            k = _largest_power_of_two_below(hi - lo)
            if m <= k:
                proof.append(self._range_hash(lo + k, hi))
                hi = lo + k
            else:
                proof.append(self._range_hash(lo, lo + k))
                lo += k
                m -= k
                complete = False
        if not complete:
            proof.append(self._range_hash(lo, hi))
        proof.reverse()
        return proof

    def frontier(self, size: int) -> list[tuple[int, bytes]]:
        """The perfect subtrees covering the first `size` leaves, left to right, as
        (height, hash): what a verifier needs to go on hashing leaves from `size`."""
        self._check_size(size, "size")
        nodes: list[tuple[int, bytes]] = []
        lo = 0
        while lo < size:
            height = (size - lo).bit_length() - 1
            nodes.append((height, self._node(height, lo >> height)))
            lo += 1 << height
        return nodes

    # -- internals ---------------------------------------------------------------
    def _check_size(self, size: int, what: str) -> None:
        if not 0 <= size <= self.size:
            raise ValueError(f"{what} {size} out of range: tree has {self.size} leaves")

    def _range_hash(self, lo: int, hi: int) -> bytes:
        """MTH(D[lo:hi]) for a subtree the RFC recursion can produce.

        Such a range starts at a multiple of its largest power-of-two part, so
        it splits into stored perfect subtrees of strictly falling height,
        which fold right to left into the RFC's hash.
        """
        nodes: list[bytes] = []
        while lo < hi:
            height = (hi - lo).bit_length() - 1
            nodes.append(self._node(height, lo >> height))
            lo += 1 << height
        return fold_right(nodes)


def fold_right(nodes: Sequence[bytes]) -> bytes:
    """Combine perfect subtrees of strictly falling height, left to right in the
    tree, into the RFC hash of their union: the smallest (rightmost) first."""
    acc = nodes[-1]
    for node in reversed(nodes[:-1]):
        acc = _sha256(b"\x01" + node + acc).digest()
    return bytes(acc)


class MerkleTree(MerkleProofs):
    """Append-only RFC 9162 tree over leaf hashes, answering for any past size.

    `_levels[h]` holds, back to back, the hash of every complete subtree of
    2**h leaves: node i covers leaves [i * 2**h, (i + 1) * 2**h). Level 0 is
    the leaf hashes themselves. Not thread-safe; the caller serialises writes.
    Everything lives in memory (64 bytes a leaf); the ledger uses the
    store-backed `ledger.storage.tree_store.TiledMerkleTree` instead, which answers the
    same calls from persisted tiles.
    """

    __slots__ = ("_levels", "_size")

    def __init__(self, leaf_hashes: Iterable[bytes] = ()) -> None:
        self._levels: list[bytearray] = [bytearray()]
        self._size = 0
        self.extend(leaf_hashes)

    @property
    def size(self) -> int:
        return self._size

    def append(self, leaf_hash: bytes) -> int:
        """Add one leaf hash; return the new tree size. O(log n)."""
        check_hash_arg(leaf_hash, "leaf hash")
        levels = self._levels
        levels[0] += leaf_hash
        node = bytes(leaf_hash)
        index = self._size
        self._size += 1
        height = 0
        # An odd index is a right child: its parent subtree just became complete.
        while index & 1:
            left = levels[height][-2 * HASH_SIZE : -HASH_SIZE]
            node = _sha256(b"\x01" + left + node).digest()
            height += 1
            if height == len(levels):
                levels.append(bytearray())
            levels[height] += node
            index >>= 1
        return self._size

    def extend(self, hashes: Iterable[bytes]) -> int:
        """Append each leaf hash in order; return the new tree size."""
        for h in hashes:
            self.append(h)
        return self._size

    def _node(self, height: int, index: int) -> bytes:
        start = index * HASH_SIZE
        return bytes(self._levels[height][start : start + HASH_SIZE])


def _check_proof_hashes(proof: Sequence[bytes], **named: bytes) -> None:
    for what, value in named.items():
        if not isinstance(value, bytes | bytearray) or len(value) != HASH_SIZE:
            raise ProofError(f"{what.replace('_', ' ')} must be {HASH_SIZE} bytes")
    for i, element in enumerate(proof):
        if not isinstance(element, bytes | bytearray) or len(element) != HASH_SIZE:
            raise ProofError(f"proof element {i} must be {HASH_SIZE} bytes")


def verify_inclusion(leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes) -> None:
    """RFC 9162 section 2.1.3.2; raises ProofError unless the proof holds."""
    _check_proof_hashes(proof, root=root)
    if root_from_inclusion(leaf_hash, index, size, proof) != root:
        raise ProofError("inclusion proof does not lead to the given root")


def root_from_inclusion(leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes]) -> bytes:
    """The root an RFC 9162 inclusion proof leads to (steps 1-5 of section 2.1.3.2 but the
    final comparison): what a detached-payload COSE receipt signs. Raises ProofError."""
    _check_proof_hashes(proof, leaf_hash=leaf_hash)
    if index < 0 or size < 0:
        raise ProofError("leaf index and tree size must not be negative")
    # 1. leaf_index must be below tree_size.
    if index >= size:
        raise ProofError(f"leaf index {index} is not below tree size {size}")
    # 2-3.
    fn, sn = index, size - 1
    r = bytes(leaf_hash)
    # 4.
    for p in proof:
        if sn == 0:
            raise ProofError("inclusion proof is longer than the tree size allows")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while not (fn & 1 or fn == 0):
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    # 5.
    if sn != 0:
        raise ProofError("inclusion proof is shorter than the tree size requires")
    return r


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> None:
    """RFC 9162 section 2.1.4.2; raises ProofError unless the proof holds.

    Every element is consumed and both roots are compared (the class of bug
    behind immudb CVE-2022-36111 was a check that let part of a proof go
    unverified).
    """
    _check_proof_hashes(proof, old_root=old_root, new_root=new_root)
    if old_size < 0 or new_size < 0:
        raise ProofError("tree sizes must not be negative")
    if old_size > new_size:
        raise ProofError(f"old size {old_size} is larger than new size {new_size}")
    if old_size == new_size:
        # The RFC's algorithm needs first < second; equal trees prove themselves.
        if proof:
            raise ProofError("consistency proof between equal sizes must be empty")
        if old_root != new_root:
            raise ProofError("roots differ for equal tree sizes")
        return
    if old_size == 0:
        # MTH of no leaves is SHA-256(); the empty tree is a prefix of every tree.
        if proof:
            raise ProofError("consistency proof from the empty tree must be empty")
        if old_root != EMPTY_ROOT:
            raise ProofError("old root is not the empty tree's root")
        return
    # 1.
    if not proof:
        raise ProofError("consistency proof is empty")
    path = list(proof)
    # 2.
    if old_size & (old_size - 1) == 0:
        path.insert(0, bytes(old_root))
    # 3.
    fn, sn = old_size - 1, new_size - 1
    # 4.
    while fn & 1:
        fn >>= 1
        sn >>= 1
    # 5.
    fr = sr = bytes(path[0])
    # 6.
    for c in path[1:]:
        if sn == 0:
            raise ProofError("consistency proof is longer than the tree sizes allow")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while not (fn & 1 or fn == 0):
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    # 7.
    if sn != 0:
        raise ProofError("consistency proof is shorter than the tree sizes require")
    if fr != old_root:
        raise ProofError("consistency proof does not lead to the old root")
    if sr != new_root:
        raise ProofError("consistency proof does not lead to the new root")
