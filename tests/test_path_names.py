"""Paths that look like another: one NFC spelling per name, and names that hide, reorder or
imitate structure refused with a 422 naming the rule, wherever a path enters (JSON and
multipart ingest, a file's own name, search roots, policy globs, MCP) and skipped with that
rule as the reason by a source sync; real server, real SDK client, real folders, both stores."""

from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Any

import anyio
import httpx

from ledger.config import LedgerConfig
from ledger.domain.path_names import normalise, path_problem
from ledger.retrieval.source_registry import SourceRegistry
from ledger.retrieval.sources import SourceLimits
from ledger.usecases.sources import add_source
from tests.api_support import bearer, http_to_served
from tests.mcp_support import Ledger, answer, mcp_ledger, refusal  # noqa: F401 - fixture

DOC = "# Note\n\nSome text.\n"
NFC = unicodedata.normalize("NFC", "café.md")
NFD = unicodedata.normalize("NFD", "café.md")
# Each a distinct document beside `a/b.md`, `a.md` or `docs/x.md` before; the rule it breaks now.
DECEPTIVE = {
    "a\uff0fb.md": "lookalike_separator",  # fullwidth solidus
    "a\u2215b.md": "lookalike_separator",  # division slash
    "a\u2044b.md": "lookalike_separator",  # fraction slash
    "a\u0338b.md": "lookalike_separator",  # combining long solidus overlay
    "a\uff3cb.md": "lookalike_separator",  # fullwidth reverse solidus
    "a\u2024md": "lookalike_separator",  # one dot leader
    "a\u2025md": "lookalike_separator",  # two dot leader
    "a\u2026md": "lookalike_separator",  # ellipsis
    "a\uff0emd": "lookalike_separator",  # fullwidth full stop
    "docs/\u202edm.x": "bidi_control",  # right-to-left override: displays as docs/x.md
    "docs/\u2066x.md": "bidi_control",
    "docs/x\u200e.md": "bidi_control",  # left-to-right mark
    "docs/\u200bx.md": "invisible_character",  # zero-width space
    "docs/x\u200d.md": "invisible_character",  # zero-width joiner
    "docs/x\u200c.md": "invisible_character",  # zero-width non-joiner
    "docs/x\u2060.md": "invisible_character",  # word joiner
    "docs/\ufeffx.md": "invisible_character",  # byte order mark
    "docs/x\u00ad.md": "invisible_character",  # soft hyphen
    "docs/x\ufe0f.md": "invisible_character",  # variation selector
    "docs/x\u3164.md": "invisible_character",  # hangul filler
    "docs/x\U000e0041.md": "invisible_character",  # tag letter A
    "docs/x\U000e0100.md": "invisible_character",  # variation selector 17
    "docs/x\ufff0.md": "invisible_character",  # reserved default-ignorable
    "docs/x\u2028.md": "invisible_character",  # line separator
    "docs/x\u00a0y.md": "unusual_space",  # no-break space
    "docs/x\u3000y.md": "unusual_space",  # ideographic space
    "docs/x.md ": "segment_whitespace",  # trailing space
    " docs/x.md": "segment_whitespace",
    "docs /x.md": "segment_whitespace",
}
FINE = [
    "docs/x\ue000.md",
    "docs/x\U0001faf8.md",
    "docs/x.md",
    "日本語/文書.md",
    "Привет/мир.md",
    "a·b.md",
    "a b.md",
    "ﬁle.md",
    "v1.2/notes.md",
    NFC,
]


def test_the_rule_alone() -> None:
    for path, rule in DECEPTIVE.items():
        problem = path_problem(normalise(path))
        assert problem is not None and problem[0] == rule, (path, problem)
        assert path.strip() not in problem[1]  # the message names a code point, never the path
    for path in FINE:
        assert path_problem(normalise(path)) is None, path
    assert normalise(NFD) == NFC != NFD
    assert path_problem("docs/x ", whole_names=False) is None  # a prefix may end inside a name


def _size(ledger: Ledger) -> int:
    return int(ledger.server.app.state.services.ledger.sync())


def _code(response: httpx.Response) -> str:
    assert response.status_code == 422, response.text
    return str(response.json()["error"]["code"])


def test_every_entry_point_refuses_deceptive_paths_and_merges_spellings(mcp_ledger: Ledger) -> None:
    real = mcp_ledger.v1("POST", "/v1/documents", json={"path": "docs/x.md", "text": DOC})
    assert real.status_code == 201, real.text
    before = _size(mcp_ledger)
    for path, rule in DECEPTIVE.items():
        body = mcp_ledger.v1("POST", "/v1/documents", json={"path": path, "text": DOC})
        assert _code(body) == rule, path
        message = body.json()["error"]["message"]
        assert message.startswith("path: a document path must") and path.strip() not in message
        form = mcp_ledger.v1(
            "POST", "/v1/documents/upload", files={"file": ("n.md", DOC.encode())}, data={"path": path}
        )
        assert _code(form) == rule, path
        if "/" not in path:  # a file's own name is the path when the form names none
            named = mcp_ledger.v1("POST", "/v1/documents/upload", files={"file": (path, DOC.encode())})
            assert _code(named) == rule, path
    search = mcp_ledger.v1(
        "POST", "/v1/search", json={"input": {"query": "text", "target_roots": ["docs\u202e"]}}
    )
    assert _code(search) == "bidi_control"
    prefixes = {"query": "text", "filters": {"path_prefixes": ["docs\u200b/"]}}
    assert _code(mcp_ledger.v1("POST", "/v1/search", json={"input": prefixes})) == "invisible_character"
    bundle = "version: v\nrules:\n  - id: r\n    action: deny\n    match: {paths: ['hr\uff0f**']}\n"
    published = mcp_ledger.v1("POST", "/v1/policy-bundles", json={"bundle_yaml": bundle})
    assert _code(published) == "invalid_policy_bundle"
    assert "lookalike_separator" in published.json()["error"]["message"]
    assert _size(mcp_ledger) == before  # nothing written by any refusal

    # Two spellings of one name are one document: the NFD one is a new version of the NFC one.
    first = mcp_ledger.v1("POST", "/v1/documents", json={"path": NFC, "text": DOC}).json()
    second = mcp_ledger.v1("POST", "/v1/documents", json={"path": NFD, "text": DOC + "More.\n"}).json()
    assert second["document_id"] == first["document_id"] and second["version"] == 2, second
    # A deny rule written in NFD still applies to the document stored in NFC.
    nfd_rule = f"version: v\nrules:\n  - id: r\n    action: deny\n    match: {{paths: ['{NFD}']}}\n"
    assert mcp_ledger.v1("POST", "/v1/policy-bundles", json={"bundle_yaml": nfd_rule}).status_code == 201
    found = mcp_ledger.v1("POST", "/v1/search", json={"input": {"query": "more text"}}).json()
    assert NFC not in {c["path"] for c in found["output"]["citations"]}

    async def over_mcp() -> tuple[dict[str, Any], dict[str, Any]]:
        async with mcp_ledger.client("http") as client:
            bad = refusal(await client.call_tool("ingest_document", {"path": "a\u2215b.md", "text": DOC}))
            good = answer(await client.call_tool("ingest_document", {"path": "mcp/" + NFD, "text": DOC}))
        return bad, good

    bad, good = anyio.run(over_mcp)
    assert bad["error"]["code"] == "lookalike_separator" and bad["http_status"] == 422
    same = mcp_ledger.v1("POST", "/v1/documents", json={"path": "mcp/" + NFC, "text": DOC}).json()
    assert same["document_id"] == good["document_id"], (same, good)


def test_a_sync_skips_deceptive_file_names_with_the_rule_and_one_spelling_per_name(
    ledger_config: LedgerConfig, tmp_path: Path
) -> None:
    notes = (tmp_path / "notes").resolve()
    (notes / "docs").mkdir(parents=True)
    (notes / "docs" / "x.md").write_text(DOC)
    # (`x.md ` or `\u202edm.x` are no markdown names at all: ignored, as every other file is.)
    for name in ("x\uff0fy.md", "x\u2024y.md", "\u202ex.md", "x\u200b.md", " x.md", "x\u00a0.md"):
        (notes / "docs" / name).write_text(DOC)
    (notes / "rlo\u202e").mkdir()  # a folder whose name reorders what follows
    (notes / "rlo\u202e" / "inner.md").write_text(DOC)
    (notes / NFC).write_text(DOC)
    (notes / NFD).write_text(DOC + "Other spelling.\n")
    (notes / ("only-" + NFD)).write_text(DOC)  # the NFD name alone: synced under its NFC form
    add_source(SourceRegistry(ledger_config.data_dir), SourceLimits(), "notes", str(notes), "acme")
    with http_to_served(ledger_config) as (http, tokens):
        admin = bearer(tokens["admin"])
        report = http.post("/v1/sources/notes/sync", headers=admin)
        assert report.status_code == 200, report.text
        rows = {row["path"]: (row["status"], row.get("reason")) for row in report.json()["files"]}
        again = http.post("/v1/sources/notes/sync", headers=admin).json()
    assert rows == {
        "docs/x.md": ("ingested", None),
        "docs/x\\uff0fy.md": ("skipped", "lookalike_separator"),
        "docs/x\\u2024y.md": ("skipped", "lookalike_separator"),
        "docs/\\u202ex.md": ("skipped", "bidi_control"),
        "docs/x\\u200b.md": ("skipped", "invisible_character"),
        "docs/ x.md": ("skipped", "segment_whitespace"),
        "docs/x\\xa0.md": ("skipped", "unusual_space"),
        "rlo\\u202e": ("skipped", "bidi_control"),
        NFC: ("ingested", None),
        "cafe\\u0301.md": ("skipped", "duplicate_name"),
        "only-" + NFC: ("ingested", None),
    }
    # The next sync finds the same names: nothing changed, nothing removed.
    assert again["totals"]["ingested"] == 0 and again["totals"]["removed"] == 0, again["totals"]
    assert again["totals"]["unchanged"] == 3
