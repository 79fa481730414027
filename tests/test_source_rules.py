"""Per-source rules (`sources add --sensitivity --retention-days`) and front matter that may
narrow them, never widen them; read-backs say which rule set each value; a re-sync that
changes a file's rules records a new version. Real server, both stores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from ledger.config import LedgerConfig
from ledger.policy.front_matter import MAX_FRONT_MATTER_BYTES
from ledger.retrieval.source_registry import SourceRegistry
from ledger.retrieval.sources import SourceLimits
from ledger.usecases.sources import add_source, remove_source
from tests.api_support import admin_http

FILES = {
    "plain.md": "# Plain\n\nThe plain rota is kept here.\n",
    "narrow.md": (
        "---\nsensitivity: restricted\nretention_days: 30\n---\n# Narrow\n\nThe vault rota is kept here.\n"
    ),
    "wider.md": "---\nsensitivity: public\n---\n# Wider\n\nThe public rota is kept here.\n",
    "longer.md": "---\nretention_days: 5000\n---\n# Longer\n\nThe long rota is kept here.\n",
    "broken.md": "---\nsensitivity: [restricted\n---\n# Broken\n\nThe broken rota.\n",
    "huge.md": "---\n" + "k: v\n" * (MAX_FRONT_MATTER_BYTES // 4) + "---\n# Huge\n\nHuge rota.\n",
}


def _sync(http: httpx.Client, name: str) -> dict[str, dict[str, Any]]:
    response = http.post(f"/v1/sources/{name}/sync")
    assert response.status_code == 200, response.text
    return {row["path"]: row for row in response.json()["files"]}


def test_front_matter_narrows_never_widens_and_rule_changes_are_recorded(
    ledger_config: LedgerConfig, tmp_path: Path
) -> None:
    root = (tmp_path / "ops").resolve()
    root.mkdir()
    for name, text in FILES.items():
        (root / name).write_text(text)
    registry = SourceRegistry(ledger_config.data_dir)
    add_source(registry, SourceLimits(), "ops", str(root), "acme", sensitivity="internal", retention_days=400)
    with admin_http(ledger_config) as http:
        rows = _sync(http, "ops")
        plain, narrow = rows["plain.md"], rows["narrow.md"]
        assert (plain["status"], plain["sensitivity"], plain["sensitivity_origin"]) == (
            "ingested",
            "internal",
            "source",
        )
        assert (plain["retention_days"], plain["retention_origin"]) == (400, "source")
        assert (narrow["sensitivity"], narrow["sensitivity_origin"]) == ("restricted", "front_matter")
        assert (narrow["retention_days"], narrow["retention_origin"]) == (30, "front_matter")
        assert (rows["wider.md"]["status"], rows["wider.md"]["reason"]) == ("skipped", "front_matter_widens")
        assert (rows["longer.md"]["status"], rows["longer.md"]["reason"]) == (
            "skipped",
            "front_matter_widens",
        )
        assert (
            rows["broken.md"]["reason"] == "bad_front_matter"
            and rows["huge.md"]["reason"] == "bad_front_matter"
        )

        # The entry records the value and who set it; the read-back and the receipt say so.
        entry = http.get(f"/v1/events/{narrow['position']}").json()["event"]["payload"]
        assert entry["sensitivity"] == "restricted" and entry["sensitivity_origin"] == "front_matter"
        found = http.post("/v1/search", json={"input": {"query": "vault rota kept", "top_k": 3}}).json()
        cited = next(c for c in found["output"]["citations"] if c["path"] == "narrow.md")
        assert cited["sensitivity"] == "restricted"
        read = http.get(f"/v1/citations/{cited['citation_id']}").json()["data"]
        assert read["rules"] == {
            "sensitivity": {"value": "restricted", "set_by": "front_matter"},
            "retention_days": {"value": 30, "set_by": "front_matter"},
        }
        receipt = http.get(f"/v1/receipts/{found['receipt_id']}").json()
        shown = next(c for c in receipt["citations"] if c["citation_id"] == cited["citation_id"])
        assert shown["rules"] == read["rules"]

        # Unchanged files and rules: nothing new. The source made restricted: a new version.
        again = _sync(http, "ops")
        assert again["plain.md"]["status"] == "unchanged" and again["narrow.md"]["status"] == "unchanged"
        remove_source(registry, "ops")
        add_source(
            registry, SourceLimits(), "ops", str(root), "acme", sensitivity="restricted", retention_days=400
        )
        changed = _sync(http, "ops")
        assert (
            changed["plain.md"]["status"] == "ingested" and changed["plain.md"]["sensitivity"] == "restricted"
        )
        assert changed["narrow.md"]["status"] == "unchanged"  # its front matter already said restricted
        version = http.get(f"/v1/events/{changed['plain.md']['position']}").json()["event"]["payload"]
        assert version["version"] == 2 and version["sensitivity"] == "restricted"
        assert version["sensitivity_origin"] == "source"
