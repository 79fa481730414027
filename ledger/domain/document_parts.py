"""One document version as log entries that each fit the entry bound (`ledger.domain.entry_limit`):
a `DocumentIngested` head and, when its chunks do not fit one entry, `DocumentContinued`
entries carrying the rest, in chunk order, all written in one commit.

Chunks are packed greedily by their exact canonical size; a version that fits one entry is
written exactly as before (no `parts`), so small documents keep their bytes."""

from __future__ import annotations

from collections.abc import Sequence

from ledger.domain.entry_limit import LIMIT_TEXT, MAX_ENTRY_BYTES, envelope_bytes
from ledger.domain.events import Chunk, DocumentContinued, DocumentIngested, DocumentVersionFields
from ledger.domain.fields import MAX_CHUNKS_PER_DOCUMENT, MAX_IDENTIFIER_CHARS
from ledger.domain.payloads import payload_to_json
from ledger.tlog.canonical import canonical_json

_LONGEST_ID = "x" * MAX_IDENTIFIER_CHARS
# The envelope at its largest (tenant, actor, run and trace ids at their longest), so a
# packed payload fits whoever writes it.
_ENVELOPE_ROOM = envelope_bytes(
    0,
    event_id=_LONGEST_ID,
    event_type="DocumentContinued",
    tenant_id="x" * 63,
    actor=_LONGEST_ID,
    run_id=_LONGEST_ID,
    trace_id=_LONGEST_ID,
)
PAYLOAD_BUDGET = MAX_ENTRY_BYTES - _ENVELOPE_ROOM


class ItemTooLarge(ValueError):
    def __init__(self, index: int) -> None:
        super().__init__(f"item {index} does not fit one log entry; {LIMIT_TEXT}")
        self.index = index


def pack(sizes: Sequence[int], first_room: int, room: int) -> list[int]:
    """How many items (of these canonical sizes, in order) go in each entry: greedily, the
    first entry having `first_room` bytes for them, the others `room` (a comma each)."""
    counts: list[int] = [0]
    used = 0
    for index, size in enumerate(sizes):
        limit = first_room if len(counts) == 1 else room
        cost = size + (1 if counts[-1] else 0)
        # A full entry starts the next; so does a head with no room for even one item.
        if used + cost > limit and (counts[-1] or len(counts) == 1):
            counts.append(0)
            used, cost, limit = 0, size, room
        if cost > limit:
            raise ItemTooLarge(index)
        counts[-1] += 1
        used += cost
    return counts


class ChunkTooLarge(ValueError):
    """One chunk alone does not fit an entry (its limits make this unreachable today)."""

    def __init__(self, ordinal: int) -> None:
        super().__init__(f"chunk {ordinal} does not fit one log entry; {LIMIT_TEXT}")


def _size(payload: DocumentIngested | DocumentContinued) -> int:
    event_type = type(payload).__name__
    return len(canonical_json(payload_to_json(event_type, payload), checked=False))


def split_version(version: DocumentIngested) -> list[DocumentIngested | DocumentContinued]:
    """`version` (every chunk in it) as its head and continuations, each within the budget."""
    if _size(version) <= PAYLOAD_BUDGET:
        return [version]
    chunk_sizes = [
        len(canonical_json(chunk.model_dump(mode="json"), checked=False)) for chunk in version.chunks
    ]
    head_room = PAYLOAD_BUDGET - _size(
        version.model_copy(update={"chunks": [], "parts": MAX_CHUNKS_PER_DOCUMENT})
    )
    continuation_room = PAYLOAD_BUDGET - _size(
        _continuation(version, MAX_CHUNKS_PER_DOCUMENT, [], validate=False)
    )
    try:
        counts = pack(chunk_sizes, head_room, continuation_room)
    except ItemTooLarge as exc:
        raise ChunkTooLarge(version.chunks[exc.index].ordinal) from None
    groups: list[list[Chunk]] = []
    start = 0
    for count in counts:
        groups.append(list(version.chunks[start : start + count]))
        start += count
    head = version.model_copy(update={"chunks": groups[0], "parts": len(groups)})
    return [head, *(_continuation(version, part, chunks) for part, chunks in enumerate(groups[1:], start=2))]


# What a continuation repeats of its head: every field but its own part and chunks.
_REPEATED_FIELDS = tuple(DocumentVersionFields.model_fields)


def _continuation(
    version: DocumentIngested, part: int, chunks: Sequence[Chunk], *, validate: bool = True
) -> DocumentContinued:
    build = DocumentContinued if validate else DocumentContinued.model_construct
    repeated = {name: getattr(version, name) for name in _REPEATED_FIELDS}
    return build(**repeated, part=part, chunks=list(chunks))


def all_chunks(parts: Sequence[DocumentIngested | DocumentContinued]) -> list[Chunk]:
    return [chunk for part in parts for chunk in part.chunks]
