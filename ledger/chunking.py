"""Markdown to chunks: one chunk per paragraph (a heading starts a new one),
with line locators and the heading path. Fenced code blocks stay whole.
A retrieval engine with its own chunker comes later; this keeps locators
honest (1-based, inclusive line ranges of the uploaded text).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_CHUNK_CHARS = 8_000
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class TextChunk:
    ordinal: int
    start_line: int
    end_line: int
    heading_path: tuple[str, ...]
    text: str


def chunk_markdown(text: str) -> list[TextChunk]:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    chunks: list[TextChunk] = []
    headings: list[tuple[int, str]] = []
    current: list[tuple[int, str]] = []  # (line number, line)
    in_fence = False

    def flush() -> None:
        nonlocal current
        while current and not current[-1][1].strip():
            current.pop()
        if current:
            path = tuple(title for _, title in headings)
            part: list[tuple[int, str]] = []
            size = 0
            for number, line in current:
                if part and size + len(line) + 1 > MAX_CHUNK_CHARS:
                    _emit(part, path)
                    part, size = [], 0
                if len(line) > MAX_CHUNK_CHARS:  # one huge line: cut it, keep its line number
                    for offset in range(0, len(line), MAX_CHUNK_CHARS):
                        _emit([(number, line[offset : offset + MAX_CHUNK_CHARS])], path)
                    continue
                part.append((number, line))
                size += len(line) + 1
            if part:
                _emit(part, path)
        current = []

    def _emit(part: list[tuple[int, str]], path: tuple[str, ...]) -> None:
        chunks.append(
            TextChunk(
                ordinal=len(chunks),
                start_line=part[0][0],
                end_line=part[-1][0],
                heading_path=path,
                text="\n".join(line for _, line in part),
            )
        )

    for number, line in enumerate(lines, start=1):
        if _FENCE.match(line):
            in_fence = not in_fence
            current.append((number, line))
            continue
        if in_fence:
            current.append((number, line))
            continue
        heading = _HEADING.match(line)
        if heading:
            flush()
            level = len(heading.group(1))
            headings = [(lvl, title) for lvl, title in headings if lvl < level]
            headings.append((level, heading.group(2)[:200]))
            current = [(number, line)]
            continue
        if not line.strip():
            # A heading line alone does not make a chunk: keep it for the paragraph below.
            if (
                current
                and current[0][1].lstrip().startswith("#")
                and all(not text.strip() for _, text in current[1:])
            ):
                current.append((number, line))
            elif current:
                flush()
            continue
        current.append((number, line))
    flush()
    return chunks
