"""The files of a report's output directory and how its evidence is laid out.

Shared by the writer (`ledger.usecases.report`) and the offline checker
(`ledger.evidence.report_check`). Proven lines are those of tenant exports: the entry's
exact bytes last, `{"proof":{...},"entry":<bytes>}`, since those bytes are the Merkle leaf.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import orjson
import zstandard

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
# The entries counted, verbatim, one a line, as one Zstandard frame: the bytes each leaf hash
# is of, ~1.6 KB each, a million in a month; level 1 packs them in a fraction of a second per
# 100 MB, on a worker thread while the log is read.
ENTRIES = "evidence/entries.ndjson.zst"
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


# What one decompressed line of ENTRIES may hold, and the window a decoder accepts (a report's
# frames are written with level 1's small window; anything asking more is refused, not allocated).
T = TypeVar("T")
MAX_ENTRY_LINE = 4 * 1024 * 1024
_MAX_WINDOW = 1 << 25
_CHUNK = 1 << 22


def entries_writer(handle: BinaryIO) -> Any:
    """A stream that compresses what is written to it into `handle` (close it to end the frame)."""
    compressor = zstandard.ZstdCompressor(level=1, threads=1, write_checksum=True)
    return compressor.stream_writer(handle, closefd=False)


def read_ahead(items: Iterator[T], depth: int = 4) -> Iterator[T]:
    """`items`, produced on a worker thread up to `depth` ahead of the caller: the store's
    reads and zstd release the GIL, so they run while the caller parses. What the producer
    raises is raised here; a caller that stops early stops the producer."""
    box: queue.Queue[tuple[T | None, BaseException | None, bool]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                box.put((item, None, False))
                if stop.is_set():
                    return
        except Exception as exc:  # noqa: BLE001 - handed to the caller's thread, which raises it
            box.put((None, exc, True))
            return
        box.put((None, None, True))

    worker = threading.Thread(target=produce, name="read-ahead", daemon=True)
    worker.start()
    try:
        while True:
            item, error, done = box.get()
            if error is not None:
                raise error
            if done:
                return
            yield item  # type: ignore[misc]
    finally:
        stop.set()
        while worker.is_alive():  # unblock a producer waiting on a full queue
            try:
                box.get_nowait()
            except queue.Empty:
                worker.join(0.05)


def _decompressed(path: Path, size: int = _CHUNK) -> Iterator[bytes]:
    try:
        decompressor = zstandard.ZstdDecompressor(max_window_size=_MAX_WINDOW)
        with path.open("rb") as handle, decompressor.stream_reader(handle) as reader:
            while chunk := reader.read(size):
                yield chunk
    except (OSError, zstandard.ZstdError) as exc:
        raise ReportInvalid(ENTRIES, f"not a readable Zstandard stream of entries ({exc})") from None


def entry_lines(path: Path) -> Iterator[bytes]:
    """The lines of an ENTRIES file, decompressed ahead on a worker thread while the caller
    parses; ReportInvalid when it is not a Zstandard stream or a line is longer than
    MAX_ENTRY_LINE."""
    for block in entry_blocks(path):
        yield from block.split(b"\n")


def entry_blocks(path: Path, size: int = _CHUNK) -> Iterator[bytes]:
    """The lines of an ENTRIES file as blocks of whole lines, newline-separated, each from one
    read of about `size` bytes (decompressed ahead on a worker thread): `block.split(b"\n")`
    of each are the lines `entry_lines` yields, with the same problems raised at the same
    point (a line is too long when the block after the lines before it is read)."""
    if not path.exists():
        raise ReportInvalid(ENTRIES, "missing")
    carry = b""
    for chunk in read_ahead(_decompressed(path, size)):
        data = carry + chunk
        cut = data.rfind(b"\n")
        carry = data[cut + 1 :]
        if len(carry) > MAX_ENTRY_LINE:
            raise ReportInvalid(ENTRIES, "a line is longer than the checker reads")
        if cut >= 0:
            yield data[:cut]
    if carry:
        yield carry


class ReportInvalid(Exception):
    """A report that does not check: `where` names the file, `problem` what is wrong there."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where, self.problem = where, problem

    def __reduce__(self) -> tuple[type[ReportInvalid], tuple[str, str]]:
        return ReportInvalid, (self.where, self.problem)  # (found in a worker process, raised here)


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
