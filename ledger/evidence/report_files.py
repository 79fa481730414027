"""The files of a report's output directory and how its evidence is laid out.

Shared by the writer (`ledger.usecases.report`) and the offline checker
(`ledger.evidence.report_check`). Proven lines are those of tenant exports: the entry's
exact bytes last, `{"proof":{...},"entry":<bytes>}`, since those bytes are the Merkle leaf.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import Any

import orjson

from ledger.tlog.merkle import EMPTY_ROOT, HASH_SIZE, fold_right, node_hash

MANIFEST = "manifest.json"
HTML = "report.html"
PDF = "report.pdf"
EVIDENCE = "evidence"
START_CHECKPOINT = "evidence/checkpoint-start.json"
END_CHECKPOINT = "evidence/checkpoint-end.json"
PERIOD_CHECKPOINTS = "evidence/checkpoints.ndjson"  # every checkpoint from start to end, cosigned
CONSISTENCY = "evidence/consistency.json"
KEY_CHAIN = "evidence/key-chain.ndjson"  # proven against the end checkpoint
FRONTIER = "evidence/frontier.json"  # the perfect subtrees of the start tree
LEAVES = "evidence/leaves.bin"  # every leaf hash from the start size to the end size, 32 bytes each
ENTRIES = "evidence/entries.ndjson"  # the entries counted, verbatim, one a line
CITED = "evidence/cited.ndjson"  # every entry a table names, proven against the end checkpoint
ISSUED = "evidence/issued.json"  # the ReportIssued entry's bundle (written after the manifest)
# What the manifest lists with their SHA-256 (the issued bundle comes after it).
LISTED = (
    START_CHECKPOINT,
    END_CHECKPOINT,
    PERIOD_CHECKPOINTS,
    CONSISTENCY,
    KEY_CHAIN,
    FRONTIER,
    LEAVES,
    ENTRIES,
    CITED,
)
MANIFEST_META = "citeledger-manifest-sha256"

_ENTRY_MEMBER = b',"entry":'


class ReportInvalid(Exception):
    """A report that does not check: `where` names the file, `problem` what is wrong there."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where, self.problem = where, problem


def proven_line(proof: dict[str, Any], entry: bytes) -> bytes:
    return orjson.dumps({"proof": proof})[:-1] + _ENTRY_MEMBER + entry + b"}\n"


def split_proven(line: bytes) -> tuple[dict[str, Any], bytes]:
    """(proof, the entry's exact bytes) of a proven line; ValueError when it is not one."""
    at = line.find(_ENTRY_MEMBER)
    value = orjson.loads(line)
    if at < 0 or not isinstance(value, dict) or not isinstance(value.get("proof"), dict):
        raise ValueError("not a proven entry line")
    return value["proof"], line[at + len(_ENTRY_MEMBER) : -1]


class CompactRange:
    """The right edge of an RFC 9162 tree, as perfect subtrees of falling height: enough to go
    on appending leaf hashes and to compute the root at every size (RFC 9162's hashing)."""

    def __init__(self, frontier: Sequence[tuple[int, bytes]] = ()) -> None:
        heights = [height for height, _ in frontier]
        if any(a <= b for a, b in pairwise(heights)):
            raise ValueError("frontier heights must fall strictly")
        if any(len(node) != HASH_SIZE for _, node in frontier):
            raise ValueError("frontier hashes must be 32 bytes")
        self.nodes: list[tuple[int, bytes]] = list(frontier)
        self.size = sum(1 << height for height in heights)

    def extend(self, leaf_hashes: Iterable[bytes]) -> None:
        nodes = self.nodes
        for leaf in leaf_hashes:
            height, node = 0, leaf
            while nodes and nodes[-1][0] == height:
                node = node_hash(nodes.pop()[1], node)
                height += 1
            nodes.append((height, node))
            self.size += 1

    def root(self) -> bytes:
        if not self.nodes:
            return EMPTY_ROOT
        return fold_right([node for _, node in self.nodes])


def frontier_json(frontier: Sequence[tuple[int, bytes]]) -> list[list[Any]]:
    return [[height, node.hex()] for height, node in frontier]


def frontier_of(value: Any) -> list[tuple[int, bytes]]:
    return [(int(height), bytes.fromhex(str(node))) for height, node in value]


def display(value: Any) -> str:
    """How the HTML shows a figure's value (or a table cell): what the checker compares."""
    if value is None:
        return "\u2014"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)
