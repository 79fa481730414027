"""Large source files are held and chunked, not skipped (issue 32): the per-file limit is
16 MiB; a file above 1 MiB is checked while streamed and not kept by the scan, then read alone
when its turn to be recorded comes; a file of more short sections than a version may hold is
packed; its chunks are cited like any other, with exact line locators."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bootstrap import ledger_context
from ledger.domain.fields import MAX_CHUNKS_PER_DOCUMENT
from ledger.retrieval.chunking import MAX_CHUNK_CHARS, chunk_markdown, packed
from ledger.retrieval.source_registry import SourceRegistry
from ledger.retrieval.sources import HELD_IN_SCAN_BYTES, SourceLimits, scan
from ledger.storage.claims import DocumentClaims
from ledger.usecases.context import Caller
from ledger.usecases.sources import add_source, sync_source
from ledger.writing.application import Ledger
from tests.test_search import _search

CALLER = Caller("acme", "sync-large", frozenset({"ingest.write", "retrieval.write"}))


def _release_notes(min_bytes: int) -> str:
    """Release notes of many short sections (more than one version may hold as chunks), the
    answer in the very last one."""
    parts = ["# Release notes\n"]
    size, n = 0, 0
    while size < min_bytes:
        section = f"\n## Release {n}.0\n\nFixed parser bug {n}. Scheduler queue {n % 97} is faster.\n"
        parts.append(section)
        size += len(section)
        n += 1
    parts.append("\n## Release final\n\nThe quartermaster pelican migration landed.\n")
    return "".join(parts)


def test_the_default_limit_holds_a_16_mib_file() -> None:
    assert SourceLimits().max_file_bytes >= 16 * 1024 * 1024
    assert SourceLimits.from_env({"CITELEDGER_SOURCES_MAX_FILE_BYTES": str(32 * 1024 * 1024)}).max_file_bytes


def test_the_scan_keeps_no_text_of_a_large_file_and_checks_it_while_streaming(tmp_path: Path) -> None:
    (tmp_path / "big.md").write_text(_release_notes(HELD_IN_SCAN_BYTES + 4096))
    (tmp_path / "small.md").write_text("# Small\n\nA small file.\n")
    (tmp_path / "big-binary.md").write_bytes(b"# Bin\n" + b"x" * HELD_IN_SCAN_BYTES + b"\x00\n")
    (tmp_path / "big-latin1.md").write_bytes(
        b"# L\n" + b"y" * HELD_IN_SCAN_BYTES + "\xe9\n".encode("latin-1")
    )
    (tmp_path / "too-big.md").write_text("z\n" * 700_000)
    limits = replace(SourceLimits(), max_file_bytes=1_200_000)
    found = {f.path: f for f in scan(tmp_path, limits).files}
    big = found["big.md"]
    assert big.text is None and big.skip is None and big.deferred == str(tmp_path / "big.md")
    assert big.size == (tmp_path / "big.md").stat().st_size and big.sha256 is not None
    assert found["small.md"].text is not None and found["small.md"].deferred is None
    assert found["big-binary.md"].skip == "binary" and found["big-latin1.md"].skip == "not_utf8"
    assert found["too-big.md"].skip == "too_large"


def test_packing_keeps_locators_exact_and_only_applies_above_the_count() -> None:
    text = _release_notes(600_000)
    chunks = chunk_markdown(text)
    assert len(chunks) > MAX_CHUNKS_PER_DOCUMENT
    merged = packed(text, chunks, MAX_CHUNKS_PER_DOCUMENT)
    assert len(merged) <= MAX_CHUNKS_PER_DOCUMENT
    lines = text.split("\n")
    for ordinal, chunk in enumerate(merged):
        assert chunk.ordinal == ordinal and len(chunk.text) <= MAX_CHUNK_CHARS
        assert chunk.text == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
    assert merged[-1].text.endswith("The quartermaster pelican migration landed.")
    small = chunk_markdown("# A\n\nOne.\n\n## B\n\nTwo.\n")
    assert packed("# A\n\nOne.\n\n## B\n\nTwo.\n", small, MAX_CHUNKS_PER_DOCUMENT) == small


def test_a_large_file_is_synced_chunked_and_cited(ledger: Ledger, tmp_path: Path) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    text = _release_notes(2 * 1024 * 1024 + 1)  # above the old 1 MiB ceiling; > 5,000 sections
    (root / "release-notes.md").write_text(text)
    (root / "guide.md").write_text("# Guide\n\nInstall the pelican tool first.\n")
    ctx = ledger_context(ledger)
    registry = SourceRegistry(tmp_path / "data")
    limits = SourceLimits()
    add_source(registry, limits, "notes", str(root), "acme")
    report = sync_source(ctx, DocumentClaims(ledger.store), registry, limits, CALLER, "notes")
    rows = {row["path"]: row for row in report["files"]}
    assert rows["release-notes.md"]["status"] == "ingested", rows["release-notes.md"]
    assert rows["guide.md"]["status"] == "ingested"
    assert report["totals"]["ingested"] == 2 and report["truncated"] is None
    body = _search(ctx, CALLER, "quartermaster pelican migration", top_k=3)
    assert body["status"] == "ok"
    first = body["output"]["citations"][0]
    assert first["path"] == "release-notes.md"
    assert "quartermaster pelican migration" in str(first)
    # A second sync finds it unchanged (same SHA-256 as streamed by the scan): nothing appended.
    size = ledger.size
    again = sync_source(ctx, DocumentClaims(ledger.store), registry, limits, CALLER, "notes")
    assert {row["status"] for row in again["files"]} == {"unchanged"} and ledger.size == size
