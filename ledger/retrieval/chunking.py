"""Markdown to chunks: one chunk per heading section, with honest locators
(1-based, inclusive line ranges of the text as given, and the heading path).

A section runs from its heading line to the line before the next heading
(headings inside fenced code blocks do not count). A section longer than
`MAX_CHUNK_CHARS` is split at paragraph boundaries (blank lines outside
fences), a paragraph longer than that at line boundaries, and one huge line
is cut in pieces that keep its line number. A section that is only its
heading carries no text of its own and makes no chunk (unless the document
has nothing else).

Chunk ids are derived from content (`stable_chunk_ids`), so a section that
did not change keeps its id in the next version of its document.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

MAX_CHUNK_CHARS = 8_000
MAX_HEADING_CHARS = 200
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")

Line = tuple[int, str]  # (1-based line number, text)


@dataclass(frozen=True)
class TextChunk:
    ordinal: int
    start_line: int
    end_line: int
    heading_path: tuple[str, ...]
    text: str


@dataclass
class _Section:
    heading_path: tuple[str, ...]
    lines: list[Line]
    has_heading: bool


def _sections(lines: list[str]) -> list[_Section]:
    sections = [_Section((), [], has_heading=False)]
    headings: list[tuple[int, str]] = []
    in_fence = False
    for number, line in enumerate(lines, start=1):
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (heading := _HEADING.match(line)):
            level = len(heading.group(1))
            headings = [(lvl, title) for lvl, title in headings if lvl < level]
            headings.append((level, heading.group(2)[:MAX_HEADING_CHARS]))
            sections.append(_Section(tuple(title for _, title in headings), [], has_heading=True))
        sections[-1].lines.append((number, line))
    return sections


def _trimmed(lines: list[Line]) -> list[Line]:
    start, end = 0, len(lines)
    while start < end and not lines[start][1].strip():
        start += 1
    while end > start and not lines[end - 1][1].strip():
        end -= 1
    return lines[start:end]


def _paragraph_ranges(lines: list[Line]) -> list[tuple[int, int]]:
    """[first, last] indexes of runs of lines separated by blank lines outside fences."""
    ranges: list[tuple[int, int]] = []
    first: int | None = None
    in_fence = False
    for index, (_, line) in enumerate(lines):
        if _FENCE.match(line):
            in_fence = not in_fence
        if not in_fence and not line.strip():
            if first is not None:
                ranges.append((first, index - 1))
                first = None
        elif first is None:
            first = index
    if first is not None:
        ranges.append((first, len(lines) - 1))
    return ranges


def _size(lines: list[Line]) -> int:
    return sum(len(text) + 1 for _, text in lines) - 1 if lines else 0


def _split(lines: list[Line]) -> list[list[Line]]:
    """Parts of at most MAX_CHUNK_CHARS. Paragraphs are packed whole while they fit (a
    part is always a contiguous run of the section's lines, so its text is exactly the
    lines its locator names); a paragraph too long on its own goes line by line, and a
    line too long on its own is cut."""
    if _size(lines) <= MAX_CHUNK_CHARS:
        return [lines]
    # Running totals, so the size of any run of lines is one subtraction: summing each
    # candidate run again made chunking quadratic in a section's line count.
    ends = [0]
    for _, text in lines:
        ends.append(ends[-1] + len(text) + 1)

    def size(first: int, last: int) -> int:
        return ends[last + 1] - ends[first] - 1

    pieces: list[tuple[int, int]] = []  # line-index ranges that fit on their own
    cuts: dict[int, list[str]] = {}  # index of a huge line -> its pieces
    for first, last in _paragraph_ranges(lines):
        if size(first, last) <= MAX_CHUNK_CHARS:
            pieces.append((first, last))
            continue
        for index in range(first, last + 1):
            text = lines[index][1]
            if len(text) > MAX_CHUNK_CHARS:
                cuts[index] = [text[o : o + MAX_CHUNK_CHARS] for o in range(0, len(text), MAX_CHUNK_CHARS)]
            pieces.append((index, index))
    parts: list[list[Line]] = []
    current: tuple[int, int] | None = None
    for first, last in pieces:
        if first in cuts:
            if current is not None:
                parts.append(lines[current[0] : current[1] + 1])
                current = None
            number = lines[first][0]
            parts.extend([(number, piece)] for piece in cuts[first])
        elif current is not None and size(current[0], last) <= MAX_CHUNK_CHARS:
            current = (current[0], last)
        else:
            if current is not None:
                parts.append(lines[current[0] : current[1] + 1])
            current = (first, last)
    if current is not None:
        parts.append(lines[current[0] : current[1] + 1])
    return parts


def chunk_markdown(text: str) -> list[TextChunk]:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    chunks: list[TextChunk] = []
    heading_only: list[_Section] = []
    for section in _sections(lines):
        body = _trimmed(section.lines)
        if not body:
            continue
        if section.has_heading and len(body) == 1:
            heading_only.append(section)
            continue
        for part in _split(body):
            chunks.append(
                TextChunk(
                    ordinal=len(chunks),
                    start_line=part[0][0],
                    end_line=part[-1][0],
                    heading_path=section.heading_path,
                    text="\n".join(line for _, line in part),
                )
            )
    if not chunks and heading_only:  # a document of headings only: they are its text
        first = heading_only[0]
        (number, line) = _trimmed(first.lines)[0]
        chunks.append(TextChunk(0, number, number, first.heading_path, line[:MAX_CHUNK_CHARS]))
    return chunks


def packed(text: str, chunks: list[TextChunk], max_chunks: int) -> list[TextChunk]:
    """A document with more chunks than one version may hold (a large file of short sections,
    release notes): neighbouring chunks merged while their line range fits MAX_CHUNK_CHARS,
    under the heading path they share. A merged chunk's text is exactly the lines its locator
    names; a piece of a cut line stays as it was. Only above `max_chunks`: every other
    document chunks as before."""
    if len(chunks) <= max_chunks:
        return chunks
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    ends = [0]
    for line in lines:
        ends.append(ends[-1] + len(line) + 1)

    def size(start_line: int, end_line: int) -> int:
        return ends[end_line] - ends[start_line - 1] - 1

    out: list[TextChunk] = []
    run: list[TextChunk] = []

    def flush() -> None:
        if len(run) == 1:
            out.append(replace(run[0], ordinal=len(out)))
        elif run:
            first, last = run[0].start_line, run[-1].end_line
            shared = run[0].heading_path
            for chunk in run[1:]:
                common = 0
                while common < min(len(shared), len(chunk.heading_path)) and (
                    shared[common] == chunk.heading_path[common]
                ):
                    common += 1
                shared = shared[:common]
            out.append(TextChunk(len(out), first, last, shared, "\n".join(lines[first - 1 : last])))
        run.clear()

    for chunk in chunks:
        if size(chunk.start_line, chunk.end_line) > MAX_CHUNK_CHARS:  # a piece of a cut line
            flush()
            out.append(replace(chunk, ordinal=len(out)))
        elif run and size(run[0].start_line, chunk.end_line) > MAX_CHUNK_CHARS:
            flush()
            run.append(chunk)
        else:
            run.append(chunk)
    flush()
    return out


def stable_chunk_ids(document_id: str, chunks: Sequence[TextChunk]) -> list[str]:
    """One id per chunk from what it is, not from the version it is in: sha256 over the
    document, the heading path, the text and how many identical chunks came before it."""
    seen: dict[tuple[tuple[str, ...], str], int] = {}
    ids = []
    for chunk in chunks:
        occurrence = seen.get((chunk.heading_path, chunk.text), 0)
        seen[(chunk.heading_path, chunk.text)] = occurrence + 1
        material = "\0".join([document_id, "\x1f".join(chunk.heading_path), chunk.text, str(occurrence)])
        ids.append(hashlib.sha256(material.encode("utf-8")).hexdigest()[:32])
    return ids
