"""The human report's side of `verify-report`: `report.html` carries the manifest's SHA-256 and
shows every figure exactly as the manifest says (each marked `data-figure`, `data-path`)."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from ledger.evidence import report_files as files
from ledger.evidence.report_files import ReportInvalid

_MAX_HTML = 64 * 1024 * 1024


class _Marks(HTMLParser):
    """The text of every element carrying `data-figure`, and the manifest hash in the head."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.marks: list[tuple[str, str, str]] = []
        self.meta: str | None = None
        self._open: list[tuple[str, str, str, list[str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = {k: v or "" for k, v in attrs}
        if tag == "meta" and named.get("name") == files.MANIFEST_META:
            self.meta = named.get("content")
        if "data-figure" in named:
            self._open.append((tag, named["data-figure"], named.get("data-path", ""), []))

    def handle_data(self, data: str) -> None:
        if self._open:
            self._open[-1][3].append(data)

    def handle_endtag(self, tag: str) -> None:
        if self._open and self._open[-1][0] == tag:
            _, fid, path, text = self._open.pop()
            self.marks.append((fid, path, "".join(text)))


def _lookup(value: Any, path: str) -> Any:
    """The part of a figure's value a `data-path` (a JSON list of keys and indexes) names."""
    for part in json.loads(path) if path else []:
        value = value[int(part)] if isinstance(value, list) else value[str(part)]
    return value


def check_html(directory: Path, manifest: dict[str, Any], digest: str) -> None:
    parser = _Marks()
    html = directory / files.HTML
    if not html.is_file():
        raise ReportInvalid(files.HTML, "missing")
    if html.stat().st_size > _MAX_HTML:
        raise ReportInvalid(files.HTML, "larger than the checker reads")
    parser.feed(html.read_text(encoding="utf-8", errors="replace"))
    if parser.meta != digest:
        raise ReportInvalid(files.HTML, "does not carry this manifest's SHA-256")
    figures = {f["id"]: f["value"] for f in manifest["figures"]}
    seen = set()
    for fid, path, text in parser.marks:
        try:
            expected = files.display(_lookup(figures[fid], path))
        except (KeyError, IndexError, ValueError, TypeError):
            raise ReportInvalid(files.HTML, f"shows figure {fid} {path} that the manifest has not") from None
        if text.strip() != expected:
            raise ReportInvalid(
                files.HTML,
                f"figure {fid}{' ' + path if path else ''}: shows {text.strip()[:40]!r}, "
                f"the manifest says {expected[:40]!r}",
            )
        seen.add(fid)
    scalar = [fid for fid, value in figures.items() if not isinstance(value, dict | list)]
    missing = [fid for fid in scalar if fid not in seen]
    if missing:
        raise ReportInvalid(files.HTML, f"does not show figure {missing[0]}")
