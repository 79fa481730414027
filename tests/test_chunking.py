"""Chunking by heading sections: honest locators, splits at paragraph boundaries past
the size cap, and chunk ids derived from content (stable across versions)."""

from __future__ import annotations

from ledger.retrieval.chunking import MAX_CHUNK_CHARS, chunk_markdown, stable_chunk_ids

DOC = """Preamble before any heading.

# Handbook

Welcome to the handbook.

## Retention

Audit logs are kept for 180 days.

Backups are kept for 30 days.

```
# not a heading: inside a fence
```

## Access
### Restricted

Restricted documents need a scope.
"""


def lines_of(text: str, start: int, end: int) -> str:
    return "\n".join(text.split("\n")[start - 1 : end])


def test_one_chunk_per_heading_section_with_honest_locators() -> None:
    chunks = chunk_markdown(DOC)
    assert [c.heading_path for c in chunks] == [
        (),
        ("Handbook",),
        ("Handbook", "Retention"),
        ("Handbook", "Access", "Restricted"),  # "## Access" alone has no text of its own
    ]
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 1), (3, 5), (7, 15), (18, 20)]
    for chunk in chunks:
        assert chunk.text == lines_of(DOC, chunk.start_line, chunk.end_line)
    assert "# not a heading" in chunks[2].text
    assert [c.ordinal for c in chunks] == [0, 1, 2, 3]


def test_a_section_past_the_cap_splits_at_paragraph_boundaries() -> None:
    paragraphs = [f"Paragraph {i} " + "lorem ipsum " * 150 for i in range(12)]  # ~1.8k chars each
    text = "# Long\n\n" + "\n\n".join(paragraphs) + "\n"
    chunks = chunk_markdown(text)
    assert len(chunks) > 1
    assert all(len(c.text) <= MAX_CHUNK_CHARS for c in chunks)
    assert all(c.heading_path == ("Long",) for c in chunks)
    for chunk in chunks:
        assert chunk.text == lines_of(text, chunk.start_line, chunk.end_line)  # whole lines, in order
        assert chunk.text.startswith(("# Long", "Paragraph"))  # never starts mid-paragraph
    joined = "\n\n".join(c.text for c in chunks)
    assert all(p in joined for p in paragraphs)


def test_a_huge_line_is_cut_and_keeps_its_line_number() -> None:
    text = "# Big\n\n" + "z" * (2 * MAX_CHUNK_CHARS + 10) + "\n\nafter\n"
    chunks = chunk_markdown(text)
    cut = [c for c in chunks if c.start_line == 3]
    assert [len(c.text) for c in cut] == [MAX_CHUNK_CHARS, MAX_CHUNK_CHARS, 10]
    assert all(c.end_line == 3 for c in cut)
    assert chunks[-1].text == "after" and chunks[-1].start_line == 5


def test_chunk_ids_come_from_content() -> None:
    v1 = chunk_markdown(DOC)
    v2 = chunk_markdown(DOC.replace("Backups are kept for 30 days.", "Backups are kept for 60 days."))
    ids1, ids2 = stable_chunk_ids("doc-1", v1), stable_chunk_ids("doc-1", v2)
    assert ids1 == stable_chunk_ids("doc-1", chunk_markdown(DOC))  # same text, same ids
    assert [a == b for a, b in zip(ids1, ids2, strict=True)] == [True, True, False, True]
    assert set(ids1).isdisjoint(stable_chunk_ids("doc-2", v1))  # another document
    # A section moved down keeps its id; identical sections get distinct ids.
    shifted = chunk_markdown("New first line.\n\n" + DOC)
    shifted_ids = stable_chunk_ids("doc-1", shifted)
    assert shifted_ids[1:] == ids1[1:] and shifted_ids[0] != ids1[0]
    assert [c.start_line for c in shifted[1:]] == [c.start_line + 2 for c in v1[1:]]
    twice = chunk_markdown("# Same\n\ntext\n\n# Same\n\ntext\n")
    first, second = stable_chunk_ids("doc-1", twice)
    assert first != second
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids1)


def test_a_document_of_headings_only_still_has_a_chunk() -> None:
    [chunk] = chunk_markdown("\n# Title only\n")
    assert (chunk.start_line, chunk.end_line, chunk.text, chunk.heading_path) == (
        2,
        2,
        "# Title only",
        ("Title only",),
    )
    assert chunk_markdown("  \n\n") == []
