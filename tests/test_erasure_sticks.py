"""An erasure sticks: a file erased from the ledger but still in its folder is `skipped
(erased)` by the next sync (a copy of its text elsewhere too, recognised by SHA-256, no
text), until the operator re-admits it by path. Real server and CLI, both stores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ledger.config import LedgerConfig
from ledger.retrieval.source_registry import SourceRegistry
from ledger.retrieval.sources import SourceLimits
from ledger.usecases.sources import add_source
from tests.api_support import admin_http
from tests.test_cli import citeledger

SECRET = "# Salary\n\nThe salary of Ana Ruiz is 91,000.\n"


def _rows(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["path"]: row for row in body["files"]}


def test_erased_file_is_skipped_until_readmitted(ledger_config: LedgerConfig, tmp_path: Path) -> None:
    root = (tmp_path / "hr").resolve()
    root.mkdir()
    (root / "salary.md").write_text(SECRET)
    (root / "holidays.md").write_text("# Holidays\n\nTwenty-five days a year.\n")
    registry = SourceRegistry(ledger_config.data_dir)
    add_source(registry, SourceLimits(), "hr", str(root), "acme")
    with admin_http(ledger_config) as http:
        first = _rows(http.post("/v1/sources/hr/sync").json())
        assert first["salary.md"]["status"] == "ingested"
        erased = http.post("/v1/erasures", json={"document_id": first["salary.md"]["document_id"]})
        assert erased.status_code == 200, erased.text

        # The file is still there: the next sync leaves it out, and a copy under another name too.
        (root / "copy.md").write_text(SECRET)
        again = _rows(http.post("/v1/sources/hr/sync").json())
        assert (again["salary.md"]["status"], again["salary.md"]["reason"]) == ("skipped", "erased")
        assert "--readmit" in again["salary.md"]["detail"]
        assert (again["copy.md"]["status"], again["copy.md"]["reason"]) == ("skipped", "erased")
        assert again["holidays.md"]["status"] == "unchanged"
        assert "Ana Ruiz" not in json.dumps(again)
        found = http.post("/v1/search", json={"input": {"query": "salary Ana Ruiz", "top_k": 3}}).json()
        assert found["status"] == "no_hit"  # nothing of it came back

        # The operator re-admits it explicitly: a new document, searchable again, and it stays.
        env = {"CITELEDGER_DATABASE_URL": ledger_config.database_url} if ledger_config.database_url else {}
        readmitted = citeledger(
            "sources",
            "sync",
            "hr",
            "--readmit",
            "salary.md",
            "--json",
            data_dir=ledger_config.data_dir,
            **env,
        )
        assert readmitted.returncode == 0, readmitted.stderr
        rows = _rows(json.loads(readmitted.stdout))
        assert rows["salary.md"]["status"] == "ingested"
        assert rows["salary.md"]["document_id"] != first["salary.md"]["document_id"]
        assert rows["copy.md"]["reason"] == "erased"  # only the path named was re-admitted
        later = _rows(http.post("/v1/sources/hr/sync").json())
        assert later["salary.md"]["status"] == "unchanged"
        assert later["salary.md"]["document_id"] == rows["salary.md"]["document_id"]
