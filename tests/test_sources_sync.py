"""`sync_source` on a real ledger (SQLite and PostgreSQL) over real folders: new files
ingested, unchanged ones deduplicated with nothing appended, edits as new versions
whose unchanged sections keep their chunk ids, vanished files removed, bad files
skipped without failing the batch, and no document text in the log lines."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bootstrap import ledger_context
from ledger.retrieval.source_registry import SourceRegistry
from ledger.retrieval.sources import SourceLimits
from ledger.storage.claims import DocumentClaims
from ledger.usecases.context import Caller, UseCaseContext
from ledger.usecases.documents import default_document_id
from ledger.usecases.errors import Invalid, NotFound
from ledger.usecases.sources import add_source, sync_source
from ledger.writing.application import Ledger
from tests.test_sources import EXPECTED_SKIPS, LIMITS, write_bad_files

TENANT = "acme"
CALLER = Caller(TENANT, "sync-test", frozenset({"ingest.write"}))
GUIDE_V1 = (
    "# Guide\n\nIntro paragraph of the guide.\n\n"
    "## Install\n\nRun the installer.\n\n"
    "## Configure\n\nSet CITELEDGER_DATA_DIR.\n"
)


class Syncer:
    def __init__(self, ledger: Ledger, data_dir: Path, root: Path, limits: SourceLimits) -> None:
        self.ledger = ledger
        self.ctx: UseCaseContext = ledger_context(ledger)
        self.claims = DocumentClaims(ledger.store)
        self.registry = SourceRegistry(data_dir)
        self.limits = limits
        add_source(self.registry, limits, "notes", str(root), TENANT)

    def sync(self, caller: Caller = CALLER, **options: Any) -> dict[str, Any]:
        return sync_source(self.ctx, self.claims, self.registry, self.limits, caller, "notes", **options)

    def entries(self, after: int = 0) -> list[Any]:
        return [self.ledger.get(p) for p in range(after + 1, self.ledger.size + 1)]


def statuses(report: dict[str, Any]) -> dict[str, str]:
    return {
        row["path"]: row["status"] + (f"({row['reason']})" if "reason" in row else "")
        for row in report["files"]
    }


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    (folder / "guides").mkdir(parents=True)
    (folder / "index.md").write_text("# Index\n\nWelcome.\n")
    (folder / "guides" / "guide.md").write_text(GUIDE_V1)
    return folder.resolve()


@pytest.fixture
def syncer(ledger: Ledger, tmp_path: Path, root: Path) -> Iterator[Syncer]:
    yield Syncer(ledger, tmp_path / "data", root, LIMITS)


def test_first_sync_ingests_and_a_second_records_nothing(syncer: Syncer) -> None:
    first = syncer.sync()
    assert statuses(first) == {"guides/guide.md": "ingested", "index.md": "ingested"}
    assert first["totals"] == {"ingested": 2, "unchanged": 0, "removed": 0, "skipped": 0, "ignored": 0}
    entries = syncer.entries()
    ingested = [e for e in entries if e.type == "DocumentIngested"]
    assert sorted(e.payload["path"] for e in ingested) == ["guides/guide.md", "index.md"]
    for event in ingested:  # the id is stable per (tenant, source, path)
        assert event.payload["document_id"] == default_document_id(TENANT, "notes", event.payload["path"])
        assert event.payload["source"] == "notes" and event.tenant_id == TENANT
    size = syncer.ledger.size
    again = syncer.sync()
    assert statuses(again) == {"guides/guide.md": "unchanged", "index.md": "unchanged"}
    assert again["totals"]["unchanged"] == 2
    assert syncer.ledger.size == size  # nothing appended


def test_an_edit_is_a_new_version_whose_unchanged_sections_keep_their_chunk_ids(
    syncer: Syncer, root: Path
) -> None:
    syncer.sync()
    [v1] = [e for e in syncer.entries() if e.payload.get("path") == "guides/guide.md"]
    before = syncer.ledger.size
    (root / "guides" / "guide.md").write_text(
        GUIDE_V1.replace("Run the installer.", "Run the installer twice.")
        + "\n## Upgrade\n\nRead the notes.\n"
    )
    report = syncer.sync()
    assert statuses(report) == {"guides/guide.md": "ingested", "index.md": "unchanged"}
    [v2] = syncer.entries(before)
    assert v2.type == "DocumentIngested" and v2.payload["version"] == 2
    assert v2.payload["supersedes_version_id"] == v1.payload["version_id"]
    ids1 = [c["chunk_id"] for c in v1.payload["chunks"]]
    ids2 = [c["chunk_id"] for c in v2.payload["chunks"]]
    assert len(ids1) == 3 and len(ids2) == 4
    assert ids2[0] == ids1[0] and ids2[2] == ids1[2]  # Guide intro and Configure unchanged
    assert ids2[1] != ids1[1]  # Install changed
    assert ids2[3] not in ids1
    # Locators are honest: each chunk's text is exactly its line range.
    lines = (root / "guides" / "guide.md").read_text().split("\n")
    for chunk in v2.payload["chunks"]:
        text = syncer.ledger.sealer.unseal(chunk["text"], tenant_id=TENANT)
        start, end = chunk["locator"]["start_line"], chunk["locator"]["end_line"]
        assert text == "\n".join(lines[start - 1 : end])


def test_a_deleted_file_is_recorded_as_removed(syncer: Syncer, root: Path) -> None:
    syncer.sync()
    before = syncer.ledger.size
    (root / "index.md").unlink()
    report = syncer.sync()
    assert statuses(report) == {"guides/guide.md": "unchanged", "index.md": "removed"}
    [removed] = syncer.entries(before)
    assert removed.type == "DocumentRemoved"
    assert removed.payload == {
        "document_id": default_document_id(TENANT, "notes", "index.md"),
        "reason": "source_deleted",
    }
    assert syncer.sync()["totals"]["removed"] == 0  # recorded once
    (root / "index.md").write_text("# Index\n\nWelcome.\n")  # back again: a new version
    assert statuses(syncer.sync())["index.md"] == "ingested"


def test_bad_files_are_skipped_with_their_reason_and_never_fail_the_batch(syncer: Syncer, root: Path) -> None:
    write_bad_files(root)
    (root / "guides" / "fine.md").write_text("# Fine\n\nAlso ingested.\n")
    report = syncer.sync()
    rows = {row["path"]: row for row in report["files"]}
    for path, reason in EXPECTED_SKIPS.items():
        assert rows[path]["status"] == "skipped" and rows[path]["reason"] == reason, path
    assert [rows[p]["status"] for p in ("index.md", "guides/guide.md", "guides/fine.md")] == ["ingested"] * 3
    assert report["totals"]["skipped"] == len(EXPECTED_SKIPS) and report["totals"]["ingested"] == 3
    recorded = {e.payload["path"] for e in syncer.entries() if e.type == "DocumentIngested"}
    assert recorded == {"index.md", "guides/guide.md", "guides/fine.md"}


def test_a_truncated_scan_removes_nothing(ledger: Ledger, tmp_path: Path, root: Path) -> None:
    syncer = Syncer(ledger, tmp_path / "data", root, SourceLimits())
    syncer.sync()
    syncer.limits = replace(syncer.limits, max_files=1)
    before = ledger.size
    report = syncer.sync()
    assert report["truncated"] == "max_files"
    assert report["totals"]["removed"] == 0 and ledger.size == before  # the unseen file is not "gone"
    assert statuses(report) == {"index.md": "unchanged"}


def test_a_subfolder_sync_removes_only_below_it(syncer: Syncer, root: Path) -> None:
    syncer.sync()
    (root / "index.md").unlink()
    (root / "guides" / "guide.md").unlink()
    (root / "guides" / "new.md").write_text("# New\n\nnew text\n")
    report = syncer.sync(under="guides")
    assert statuses(report) == {"guides/guide.md": "removed", "guides/new.md": "ingested"}
    with pytest.raises(Invalid) as caught:
        syncer.sync(under="../..")
    assert caught.value.code == "outside_allowlist"


def test_another_tenants_or_an_unknown_source_is_not_found(syncer: Syncer) -> None:
    with pytest.raises(NotFound):
        syncer.sync(Caller("globex", "intruder", frozenset({"ingest.write"})))
    with pytest.raises(NotFound):
        sync_source(syncer.ctx, syncer.claims, syncer.registry, syncer.limits, CALLER, "elsewhere")


def test_a_root_that_became_a_link_elsewhere_is_refused(syncer: Syncer, root: Path, tmp_path: Path) -> None:
    moved = tmp_path / "moved"
    root.rename(moved)
    os.symlink(tmp_path / "other", root)
    (tmp_path / "other").mkdir()
    with pytest.raises(Invalid) as caught:
        syncer.sync()
    assert caught.value.code == "symlink_escape"


def test_log_lines_carry_paths_and_hashes_never_text(
    syncer: Syncer, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="citeledger.sources"):
        report = syncer.sync()
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "guides/guide.md" in logged and report["files"][0]["sha256"] in logged
    for phrase in ("Run the installer", "Welcome", "CITELEDGER_DATA_DIR"):
        assert phrase not in logged
        assert phrase not in str(report)


def test_the_cli_syncs_with_a_report_per_file(tmp_path: Path, root: Path) -> None:
    from cli.main import app

    runner = CliRunner()
    data_dir = str(tmp_path / "cli-data")
    assert runner.invoke(app, ["init", "--data-dir", data_dir]).exit_code == 0
    added = runner.invoke(
        app, ["sources", "add", "notes", str(root), "--tenant", TENANT, "--data-dir", data_dir]
    )
    assert added.exit_code == 0, added.output
    refused = runner.invoke(app, ["sources", "add", "sys", "/sys", "--data-dir", data_dir])
    assert refused.exit_code == 1 and "denylisted" in refused.output
    listed = runner.invoke(app, ["sources", "list", "--data-dir", data_dir])
    assert f"notes\t{TENANT}\t{root}" in listed.output
    (root / "bad.md").write_bytes(b"\xff\xfe")
    synced = runner.invoke(app, ["sources", "sync", "notes", "--data-dir", data_dir])
    assert synced.exit_code == 0, synced.output
    assert "ingested\tindex.md" in synced.output and "skipped (not_utf8)\tbad.md" in synced.output
    assert "2 ingested, 0 unchanged, 0 removed, 1 skipped" in synced.output
    again = runner.invoke(app, ["sources", "sync", "notes", "--data-dir", data_dir])
    assert "0 ingested, 2 unchanged" in again.output
    removed = runner.invoke(app, ["sources", "remove", "notes", "--data-dir", data_dir])
    assert removed.exit_code == 0
    gone = runner.invoke(app, ["sources", "sync", "notes", "--data-dir", data_dir])
    assert gone.exit_code == 1


def test_batch_claims_are_all_or_nothing_across_writers(ledger: Ledger) -> None:
    from ledger.storage.claims import ClaimBusy

    mine, theirs = DocumentClaims(ledger.store), DocumentClaims(ledger.store)  # two processes' worth
    with theirs.hold(TENANT, "doc-b"):
        with pytest.raises(ClaimBusy), mine.hold_many(TENANT, ["doc-a", "doc-b", "doc-c"], wait_s=0.2):
            pass
        with mine.hold_many(TENANT, ["doc-a", "doc-c"], wait_s=0.2):  # what it took was given back
            with pytest.raises(ClaimBusy), theirs.hold(TENANT, "doc-c", wait_s=0.1):
                pass
    with mine.hold_many(TENANT, ["doc-a", "doc-b", "doc-c"], wait_s=0.2):
        pass


def test_a_new_documents_key_is_created_and_a_shredded_one_stays_shredded(syncer: Syncer, root: Path) -> None:
    from ledger.writing.sealing import KeyDestroyed, document_key_ref

    keys = syncer.ledger.sealer.keys
    index_id = default_document_id(TENANT, "notes", "index.md")
    keys.destroy(document_key_ref(TENANT, index_id), TENANT, "erasure_request")
    report = syncer.sync()
    rows = {row["path"]: row for row in report["files"]}
    assert rows["index.md"]["status"] == "skipped" and rows["index.md"]["reason"] == "document_scrubbed"
    assert rows["guides/guide.md"]["status"] == "ingested"
    guide_key = document_key_ref(TENANT, default_document_id(TENANT, "notes", "guides/guide.md"))
    assert keys.known(guide_key)
    with pytest.raises(KeyDestroyed):  # the sync did not bring the shredded key back
        keys.get(document_key_ref(TENANT, index_id))
