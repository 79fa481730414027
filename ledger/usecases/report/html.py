"""The human report: one HTML file, charts as inline SVG, no script, every figure marked.

Each figure's value sits in an element carrying `data-figure` (and `data-path` for a cell
of a table or a series: the JSON list of keys to it) whose text is exactly
`report_files.display` of the manifest's value: the offline checker reads them back, so an
edited number fails. The head carries the manifest's SHA-256.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from ledger.evidence.report_files import MANIFEST_META, display

SECTION_TITLES = {
    "coverage": "Coverage: is the record complete for the period?",
    "retrievals": "Retrievals: what the AI systems looked up",
    "access": "Access control: who was refused, who read content",
    "erasures": "Erasures and legal holds",
    "retention": "Retention: how long records are kept",
    "policies": "Policies in force",
    "replays": "Replays and the drift they found",
    "integrity": "Integrity: findings, repairs, keys and witnesses",
}
SECTION_HOW = {
    "coverage": "Every entry counted is in evidence/entries.ndjson.zst (one a line, Zstandard-compressed: "
    "`zstd -d` opens it); its hash must be the leaf at its "
    "position in evidence/leaves.bin, and those leaves must rebuild both signed checkpoints' roots.",
    "retrievals": "Each count names the positions of the receipts it counts (manifest.json); the sample "
    "is drawn by the seed in the manifest, so anyone draws the same receipts.",
    "access": "Each denial and content read is an entry of evidence/cited.ndjson with its inclusion proof.",
    "erasures": "Each erasure and hold is an entry of evidence/cited.ndjson with its inclusion proof.",
    "retention": "The oldest receipt and each expiry are in evidence/cited.ndjson with inclusion proofs.",
    "policies": "Each bundle's publication is in evidence/cited.ndjson; its hash is the bundle's SHA-256.",
    "replays": "Each replay is in evidence/cited.ndjson with its inclusion proof.",
    "integrity": "Findings, repairs and key introductions are in evidence/cited.ndjson; checkpoint "
    "cosignatures are in evidence/checkpoints.ndjson, checked against the witnesses' keys.",
}
_BAR_W, _CHART_H = 640, 160

_env = Environment(
    loader=PackageLoader("ledger.usecases.report", "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)
_env.filters["show"] = display


def _day_chart(series: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    """Bars of entries per day, scaled to the busiest day."""
    days = list(series)
    totals = [sum(series[day].values()) for day in days]
    peak = max([*totals, 1])
    slot = _BAR_W / max(len(days), 1)
    bars = [
        {
            "x": round(index * slot, 1),
            "w": round(max(slot * 0.8, 1), 1),
            "h": round(_CHART_H * total / peak, 1),
            "y": round(_CHART_H - _CHART_H * total / peak, 1),
            "day": day,
            "total": total,
        }
        for index, (day, total) in enumerate(zip(days, totals, strict=True))
    ]
    return {"bars": bars, "width": _BAR_W, "height": _CHART_H, "peak": peak}


def _status_chart(figures: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    statuses = [f for f in figures if f["id"].startswith("retrievals.status.")]
    peak = max([f["value"] for f in statuses] + [1])
    return [
        {
            "id": f["id"],
            "name": f["id"].rsplit(".", 1)[1],
            "value": f["value"],
            "w": round(400 * f["value"] / peak, 1),
            "y": 24 * index,
        }
        for index, f in enumerate(statuses)
    ]


def _cells(value: Any, parts: tuple[str | int, ...] = ()) -> list[tuple[str, str, Any]]:
    """(label, path, leaf) of every scalar inside a figure's value; the path is the JSON list
    of keys and indexes to it (keys may hold any character: witness names have slashes)."""
    if isinstance(value, Mapping):
        return [cell for key, inner in value.items() for cell in _cells(inner, (*parts, str(key)))]
    if isinstance(value, list):
        return [cell for index, inner in enumerate(value) for cell in _cells(inner, (*parts, index))]
    return [(" / ".join(str(part) for part in parts), json.dumps(list(parts)), value)]


def _question(field: Any) -> str:
    if not isinstance(field, Mapping):
        return "\u2014"
    return str(field.get("text", "")) if field.get("state") == "plain" else f"({field.get('state')})"


def _shape(figure: Mapping[str, Any], questions: Mapping[str, Any]) -> dict[str, Any]:
    """How the template lays a figure out: a scalar, rows of a table, or labelled cells."""
    value = figure["value"]
    if isinstance(value, list) and all(isinstance(row, Mapping) for row in value):
        columns = list(value[0]) if value else []
        shape = {
            "kind": "rows",
            "columns": columns,
            "rows": [[(json.dumps([i, c]), row.get(c)) for c in columns] for i, row in enumerate(value)],
        }
        if figure["id"] == "retrievals.sample" and questions:
            shape["questions"] = [_question(questions.get(row["receipt_id"])) for row in value]
        return shape
    if isinstance(value, Mapping):
        return {"kind": "cells", "cells": _cells(value)}
    return {"kind": "scalar"}


def render_html(manifest: Mapping[str, Any], manifest_sha256: str) -> str:
    figures = manifest["figures"]
    by_section: dict[str, list[Mapping[str, Any]]] = {name: [] for name in SECTION_TITLES}
    for figure in figures:
        by_section[figure["section"]].append(figure)
    series = next(f["value"] for f in figures if f["id"] == "coverage.by_day")
    questions = manifest.get("questions") or {}
    return _env.get_template("report.html").render(
        m=manifest,
        digest=manifest_sha256,
        meta_name=MANIFEST_META,
        sections=[
            (
                name,
                SECTION_TITLES[name],
                SECTION_HOW[name],
                [(f, _shape(f, questions)) for f in by_section[name]],
            )
            for name in SECTION_TITLES
        ],
        day_chart=_day_chart(series),
        status_chart=_status_chart(figures),
    )
