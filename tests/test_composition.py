"""One composition root: only `bootstrap` wires the read side and the use-case context; and
the one row mapping every read-model query answers through."""

from __future__ import annotations

import ast
import sqlite3
from pathlib import Path

from ledger.usecases.ports import DocumentState, ReceiptRecord
from projections.rows import from_row

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("ledger", "projections", "bootstrap", "api", "cli")
WIRING = {"UseCaseContext", "ProjectedLookups", "SearchIndex", "ReadSide"}


def _calls(path: Path) -> set[str]:
    called = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            func = node.func
            name = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else ""
            )
            if name in WIRING:
                called.add(name)
    return called


def test_only_bootstrap_wires_the_read_side_and_the_context() -> None:
    wired = {
        str(path.relative_to(ROOT)): found
        for package in PRODUCT
        for path in sorted((ROOT / package).rglob("*.py"))
        if (found := _calls(path))
    }
    assert set(wired) == {"bootstrap/__init__.py"}, wired


def test_a_row_maps_by_column_name_with_ints_bools_and_derived_fields() -> None:
    db = sqlite3.connect(":memory:")
    db.row_factory = sqlite3.Row
    row = db.execute(
        "SELECT 'acme' AS tenant_id, 'd1' AS document_id, '3' AS version, 'v3' AS version_id, "
        "'ab' AS content_sha256, 'a.md' AS path, 'internal' AS sensitivity, 7 AS position, "
        "1 AS removed, NULL AS retention_days"
    ).fetchone()
    state = from_row(DocumentState, row)
    assert state == DocumentState("acme", "d1", 3, "v3", "ab", "a.md", "internal", 7, True, None)
    assert isinstance(state.version, int) and state.removed is True
    record = from_row(
        ReceiptRecord,
        {"tenant_id": "acme", "receipt_id": "r1", "position": 9, "engine": "e", "mode": "live"},
        has_policy_snapshot=False,
        policy_snapshot=None,
    )
    assert record.policy_snapshot is None and record.position == 9
