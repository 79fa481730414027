"""One document version as log entries that each fit the entry bound (`ledger.entry_limit`):
a `DocumentIngested` head and, when its chunks do not fit one entry, `DocumentContinued`
entries carrying the rest, in chunk order, all written in one commit.

Chunks are packed greedily by their exact canonical size; a version that fits one entry is
written exactly as before (no `parts`), so small documents keep their bytes."""

from __future__ import annotations

from collections.abc import Sequence

from ledger.canonical import canonical_json
from ledger.entry_limit import LIMIT_TEXT, MAX_ENTRY_BYTES, envelope_bytes
from ledger.events import (
    MAX_CHUNKS_PER_DOCUMENT,
    MAX_IDENTIFIER_CHARS,
    Chunk,
    DocumentContinued,
    DocumentIngested,
    payload_to_json,
)

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
    groups: list[list[Chunk]] = [[]]
    used = 0
    for chunk, size in zip(version.chunks, chunk_sizes, strict=True):
        room = head_room if len(groups) == 1 else continuation_room
        cost = size + (1 if groups[-1] else 0)  # the comma between chunks
        if groups[-1] and used + cost > room:
            groups.append([])
            used, cost, room = 0, size, continuation_room
        if cost > room:
            raise ChunkTooLarge(chunk.ordinal)
        groups[-1].append(chunk)
        used += cost
    head = version.model_copy(update={"chunks": groups[0], "parts": len(groups)})
    return [head, *(_continuation(version, part, chunks) for part, chunks in enumerate(groups[1:], start=2))]


def _continuation(
    version: DocumentIngested, part: int, chunks: Sequence[Chunk], *, validate: bool = True
) -> DocumentContinued:
    build = DocumentContinued if validate else DocumentContinued.model_construct
    return build(
        document_id=version.document_id,
        version_id=version.version_id,
        version=version.version,
        part=part,
        source=version.source,
        path=version.path,
        title=version.title,
        content_sha256=version.content_sha256,
        sensitivity=version.sensitivity,
        retention_days=version.retention_days,
        chunks=list(chunks),
        sensitivity_origin=version.sensitivity_origin,
        retention_origin=version.retention_origin,
    )


def all_chunks(parts: Sequence[DocumentIngested | DocumentContinued]) -> list[Chunk]:
    return [chunk for part in parts for chunk in part.chunks]
