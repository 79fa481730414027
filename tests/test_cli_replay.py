"""`citeledger replay` in a real subprocess on a real SQLite ledger: the table, the JSON,
refusals (exit 2) and the replay receipt it appends."""

from __future__ import annotations

import json
from pathlib import Path

from ledger.application import Ledger
from ledger.config import LedgerConfig
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
