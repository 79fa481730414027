"""Sources are named in citations, receipts and read-backs, and `target_roots` takes source
names: two sources holding the same relative path never collide (real server, both stores)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ledger.config import LedgerConfig
from ledger.retrieval.source_registry import SourceRegistry
from ledger.retrieval.sources import SourceLimits
from ledger.usecases.sources import add_source
from tests.api_support import admin_http


def _folder(root: Path, days: int) -> Path:
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.md").write_text(f"# Retention\n\nAudit logs are kept for {days} days.\n")
    return root.resolve()


def test_same_path_in_two_sources_and_roots_by_source_name(
    ledger_config: LedgerConfig, tmp_path: Path
) -> None:
    registry = SourceRegistry(ledger_config.data_dir)
    add_source(registry, SourceLimits(), "handbook", str(_folder(tmp_path / "hb", 180)), "acme")
    add_source(registry, SourceLimits(), "wiki", str(_folder(tmp_path / "wk", 90)), "acme")
    with admin_http(ledger_config) as http:
        for name in ("handbook", "wiki"):
            synced = http.post(f"/v1/sources/{name}/sync")
            assert synced.status_code == 200, synced.text

        def search(**extra: Any) -> dict[str, Any]:
            body = {"input": {"query": "audit logs kept days", "top_k": 5, **extra}}
            response = http.post("/v1/search", json=body)
            assert response.status_code == 200, response.text
            answer: dict[str, Any] = response.json()
            return answer

        found = search()
        cited = found["output"]["citations"]
        assert sorted((c["source"], c["path"]) for c in cited) == [
            ("handbook", "docs/a.md"),
            ("wiki", "docs/a.md"),
        ]
        assert len({c["document_id"] for c in cited}) == 2

        # The receipt and the read-back name the source too.
        receipt = http.get(f"/v1/receipts/{found['receipt_id']}").json()
        assert sorted(c["source"] for c in receipt["citations"]) == ["handbook", "wiki"]
        wiki = next(c for c in cited if c["source"] == "wiki")
        read = http.get(f"/v1/citations/{wiki['citation_id']}").json()["data"]
        assert read["source"] == "wiki" and "90 days" in read["chunk_text"]

        # target_roots: a source name, a folder within a source, a plain path prefix, nothing.
        only_wiki = search(target_roots=["wiki"])
        assert only_wiki["status"] == "ok"
        assert [c["source"] for c in only_wiki["output"]["citations"]] == ["wiki"]
        folder = search(target_roots=["handbook/docs"])
        assert [c["source"] for c in folder["output"]["citations"]] == ["handbook"]
        assert search(target_roots=["handbook/elsewhere"])["status"] == "no_hit"
        assert len(search(target_roots=["docs"])["output"]["citations"]) == 2  # a path prefix, as before
        assert search(target_roots=["nosuch"])["status"] == "no_hit"

        # Replaying the by-source search reproduces it byte for byte.
        replayed = http.post(f"/v1/receipts/{only_wiki['receipt_id']}/replay")
        assert replayed.status_code == 201, replayed.text
        assert replayed.json()["integrity"] == "ok"
