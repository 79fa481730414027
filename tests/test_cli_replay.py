"""`citeledger replay` in a real subprocess on a real SQLite ledger: the table, the JSON,
refusals (exit 2) and the replay receipt it appends."""

from __future__ import annotations

import json
from pathlib import Path

from ledger.config import LedgerConfig
from ledger.writing.application import Ledger
from tests.factories import UseCases
from tests.test_cli import citeledger


def _receipt(data: Path) -> tuple[str, str, int]:
    with Ledger(LedgerConfig(data_dir=data, run_checkpointer=False)) as ledger:
        cases = UseCases(ledger)
        document = cases.ingest("Audit logs are kept for 180 days.", path="handbook/retention.md")
        receipt = cases.retrieve(document)
        return receipt.payload["receipt_id"], document.payload["chunks"][0]["chunk_id"], ledger.size


def test_replay_prints_a_table_and_json_and_records_a_receipt(tmp_path: Path) -> None:
    data = tmp_path / "data"
    receipt_id, chunk_id, size = _receipt(data)
    shown = citeledger("replay", receipt_id, "--tenant", "acme", data_dir=data)
    assert shown.returncode == 0, shown.stderr
    assert "integrity: not_applicable" in shown.stdout
    assert "unchanged" in shown.stdout and "handbook/retention.md" in shown.stdout
    assert "data_drift: context hash unchanged" in shown.stdout and "= common" in shown.stdout
    assert "180 days" not in shown.stdout  # document text never printed

    as_json = citeledger(
        "replay", receipt_id, "--tenant", "acme", "--json", "--at-position", str(size), data_dir=data
    )
    assert as_json.returncode == 0, as_json.stderr
    body = json.loads(as_json.stdout)
    assert body["original_receipt_id"] == receipt_id and body["at_position"] == size
    assert body["entries"][0]["chunk_id"] == chunk_id and body["entries"][0]["status"] == "unchanged"
    with Ledger(LedgerConfig(data_dir=data, run_checkpointer=False)) as ledger:
        types = [event.type for event in ledger.read(size + 1)]
        assert types == ["RetrievalRecorded", "ReplayRecorded"] * 2
        replay_entry = ledger.get(size + 3)
        assert replay_entry is not None and replay_entry.payload["receipt_id"] == body["replay_receipt_id"]
        assert replay_entry.payload["mode"] == "as_of_replay"


def test_replay_refusals_exit_2(tmp_path: Path) -> None:
    data = tmp_path / "data"
    receipt_id, _, size = _receipt(data)
    unknown = citeledger("replay", "no-such-receipt", "--tenant", "acme", data_dir=data)
    assert unknown.returncode == 2 and "refused (not_found)" in unknown.stderr
    other = citeledger("replay", receipt_id, "--tenant", "globex", data_dir=data)
    assert other.returncode == 2 and "refused (not_found)" in other.stderr
    late = citeledger("replay", receipt_id, "--tenant", "acme", "--at-position", str(size + 9), data_dir=data)
    assert late.returncode == 2 and "invalid_at_position" in late.stderr


def test_replay_of_a_search_after_an_erasure_names_the_erased_file(tmp_path: Path) -> None:
    """A `citeledger-bm25` receipt whose corpus lost one of its two cited documents since: exit 0
    (not a finding), the rest reproduced, the erased document named by id and by path."""
    from bootstrap import ledger_context
    from ledger.schemas.requests import DocumentIn, ErasureIn, SearchIn
    from ledger.storage.claims import DocumentClaims
    from ledger.usecases.context import Caller
    from ledger.usecases.documents import ingest_document
    from ledger.usecases.retention import erase
    from ledger.usecases.search import search

    data = tmp_path / "data"
    caller = Caller("acme", "svc", frozenset({"retrieval.write"}))
    with Ledger(LedgerConfig(data_dir=data, run_checkpointer=False)) as ledger:
        ctx = ledger_context(ledger)
        claims = DocumentClaims(ledger.store)
        ids = [
            ingest_document(ctx, claims, caller, DocumentIn(path=path, text=text, source="handbook")).body[
                "document_id"
            ]
            for path, text in [
                ("handbook/salary.md", "# Salary\n\nSalary bands are published every January.\n"),
                ("handbook/bands.md", "# Bands\n\nSalary bands for engineers are reviewed yearly.\n"),
            ]
        ]
        found = search(ctx, caller, SearchIn.model_validate({"input": {"query": "salary bands"}})).body
        assert found["status"] == "ok"
        erase(ctx, caller, ErasureIn(document_id=ids[1]))
    shown = citeledger("replay", found["receipt_id"], "--tenant", "acme", data_dir=data)
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())  # rich wraps lines at the terminal width
    assert "integrity: reproduced_apart_from_erased" in text
    assert f"cause: erased_after_receipt; documents erased since: {ids[1]}" in text
    assert "erased since: handbook/bands.md (erasure_request, position" in text
    assert "as_of_original: context hash changed" in text
    assert "Salary bands" not in shown.stdout


def test_piped_replay_prints_full_width_rows_and_an_edited_sections_changed_lines(tmp_path: Path) -> None:
    """Off a terminal the tables keep their full width (whole chunk ids and paths), and a
    section edited since the receipt shows as a unified diff of its text."""
    from bootstrap import ledger_context
    from ledger.schemas.requests import DocumentIn, SearchIn
    from ledger.storage.claims import DocumentClaims
    from ledger.usecases.context import Caller
    from ledger.usecases.documents import ingest_document
    from ledger.usecases.search import search

    data = tmp_path / "data"
    caller = Caller("acme", "svc", frozenset({"retrieval.write"}))
    path = "handbook/compensation/engineering-ladders/salary-bands-and-review-cycles.md"
    with Ledger(LedgerConfig(data_dir=data, run_checkpointer=False)) as ledger:
        ctx = ledger_context(ledger)
        claims = DocumentClaims(ledger.store)

        def ingest(text: str, document_id: str | None = None) -> dict[str, object]:
            doc = DocumentIn(path=path, text=text, source="handbook", document_id=document_id)
            return ingest_document(ctx, claims, caller, doc).body

        first = ingest("# Salary\n\nSalary bands are published every January.\n")
        found = search(ctx, caller, SearchIn.model_validate({"input": {"query": "salary bands"}})).body
        assert found["status"] == "ok"
        second = ingest(
            "# Salary\n\nSalary bands are published every January and July.\n", str(first["document_id"])
        )
    shown = citeledger("replay", found["receipt_id"], "--tenant", "acme", data_dir=data)
    assert shown.returncode == 0, shown.stderr
    old_chunk = first["chunks"][0]["chunk_id"]  # type: ignore[index]
    new_chunk = second["chunks"][0]["chunk_id"]  # type: ignore[index]
    rows = [line for line in shown.stdout.splitlines() if path in line and old_chunk in line]
    assert rows and max(len(line) for line in rows) > 80  # not cut to 80 columns
    assert "…" not in shown.stdout
    assert f"edited {path}: {old_chunk} (rank 1) -> {new_chunk} (rank 1)" in shown.stdout
    assert "  -Salary bands are published every January." in shown.stdout
    assert "  +Salary bands are published every January and July." in shown.stdout
