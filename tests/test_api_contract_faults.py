"""Regressions for the smaller contract faults an outside attacker measured on main (hardening
issue, part 5). Each test failed on the code before its fix; the routes' plumbing (media types,
the error envelope, 404s) is driven through a real server on loopback, on both stores.

- a source root holding or lying inside another source, the data directory or a system folder;
- an id in a body naming another tenant's or no object (legal holds, erasures): 404;
- a body that is not the route's media type: 415 naming the type;
- control characters in text fields and unsafe document paths: 422 naming the field and rule;
- unknown multipart form fields: 422;
- the receipt read is one indexed statement (plans checked, never timed).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.config import ApiConfig
from ledger.config import LedgerConfig
from ledger.retrieval.source_registry import Source, SourceRegistry
from ledger.retrieval.sources import SourceLimits
from ledger.usecases.errors import Invalid
from ledger.usecases.sources import add_source
from projections.receipt_index import RECEIPTS_TABLE
from tests import loopback_http
from tests.api_support import DOC, Api, LoopbackServer, api_config, make_api, make_tokens, serving  # noqa: F401
from tests.server_process import ROOT, run_cli

LIMITS = SourceLimits()


class Served:
    """A real server on loopback with the test tokens, and the ledger's size to check that a
    refused request wrote nothing."""

    def __init__(self, server: LoopbackServer, config: ApiConfig, tokens: dict[str, str]) -> None:
        self.server = server
        self.config = config
        self.tokens = tokens
        self.http = loopback_http.client(base_url=server.base_url, timeout=30)

    def headers(self, who: str = "admin", **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}", **extra}

    def size(self) -> int:
        return int(self.server.app.state.services.ledger.sync())

    def document(
        self, who: str = "admin", path: str = "handbook/retention.md", **fields: Any
    ) -> dict[str, Any]:
        response = self.http.post(
            "/v1/documents", json={"path": path, "text": DOC, **fields}, headers=self.headers(who)
        )
        assert response.status_code == 201, response.text
        body: dict[str, Any] = response.json()
        return body


@pytest.fixture
def served(ledger_config: LedgerConfig) -> Iterator[Served]:
    with serving(ledger_config) as (server, config, tokens):
        live = Served(server, config, tokens)
        yield live
        live.http.close()


def refused(response: httpx.Response, status: int, code: str) -> str:
    """The error envelope of a refusal; its message."""
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"]["code"] == code and body["error"]["retryable"] is False, body
    assert body["run_id"] == response.headers["x-run-id"]
    return str(body["error"]["message"])


# -- sources ----------------------------------------------------------------------------------
@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    """(data directory, a folder holding two markdown folders `a` and `a/b`)."""
    data_dir = tmp_path / "data"
    notes = (tmp_path / "notes").resolve()
    (notes / "a" / "b").mkdir(parents=True)
    (notes / "a" / "one.md").write_text("# One\n\nFirst.\n")
    (notes / "a" / "b" / "two.md").write_text("# Two\n\nSecond.\n")
    return data_dir, notes


def test_a_source_root_may_not_overlap_a_source_the_data_directory_or_a_system_folder(
    folders: tuple[Path, Path], tmp_path: Path
) -> None:
    data_dir, notes = folders
    registry = SourceRegistry(data_dir)
    add_source(registry, LIMITS, "acme-notes", str(notes / "a"), "acme")
    data_dir.joinpath("inbox").mkdir()
    cases = [
        ("/", "denylisted"),  # holds every system folder, the data directory and every source
        ("/var", "denylisted"),  # holds /var/lib
        (str(notes), "source_overlap"),  # holds acme's source
        (str(notes / "a" / "b"), "source_overlap"),  # lies inside it
        (str(tmp_path), "denylisted"),  # holds the data directory
        (str(data_dir / "inbox"), "denylisted"),  # lies inside it
    ]
    for root, code in cases:
        with pytest.raises(Invalid) as caught:
            add_source(registry, LIMITS, "globex-notes", root, "globex")
        assert caught.value.code == code, (root, caught.value.message)
    assert [s.name for s in registry.all()] == ["acme-notes"]
    # A sibling folder is fine.
    (notes / "c").mkdir()
    add_source(registry, LIMITS, "globex-notes", str(notes / "c"), "globex")

    # The command line says why, in one line.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    assert run_cli(["init", "--data-dir", str(data_dir)], env=env).returncode == 0
    result = run_cli(["sources", "add", "everything", "/", "--data-dir", str(data_dir)], env=env)
    assert result.returncode == 1 and "denylisted" in result.stderr, result.stdout + result.stderr


def test_a_sync_of_an_overlapping_source_recorded_before_the_rule_is_refused(
    ledger_config: LedgerConfig, folders: tuple[Path, Path]
) -> None:
    """The attack: a registry already holding a root over another tenant's source (added before
    the rule); its sync with `under` would record the other tenant's files."""
    _, notes = folders
    registry = SourceRegistry(ledger_config.data_dir)
    add_source(registry, LIMITS, "acme-notes", str(notes / "a"), "acme")
    sources = [*registry.all(), Source("globex-all", str(notes), "globex")]
    registry._write(sources)  # as an older version wrote it
    config = api_config(ledger_config)
    tokens = make_tokens(config)
    with LoopbackServer(config) as server, loopback_http.client(base_url=server.base_url, timeout=30) as http:
        before = server.app.state.services.ledger.sync()
        response = http.post(
            "/v1/sources/globex-all/sync",
            json={"under": "a"},
            headers={"Authorization": f"Bearer {tokens['other']}"},
        )
        message = refused(response, 422, "source_overlap")
        assert "acme" not in message and str(notes / "a") not in message  # names no other source
        assert server.app.state.services.ledger.sync() == before
        own = http.post("/v1/sources/acme-notes/sync", headers={"Authorization": f"Bearer {tokens['admin']}"})
        assert own.status_code == 422  # the overlap taints both until the operator removes one
        assert registry.remove("globex-all")
        own = http.post("/v1/sources/acme-notes/sync", headers={"Authorization": f"Bearer {tokens['admin']}"})
        assert own.status_code == 200 and own.json()["totals"]["ingested"] == 2, own.text


def test_a_file_whose_name_is_no_document_path_is_skipped_as_bad_path(
    ledger_config: LedgerConfig, folders: tuple[Path, Path]
) -> None:
    _, notes = folders
    (notes / "a" / "back\\slash.md").write_text("# Odd\n\nA legal POSIX name.\n")
    add_source(SourceRegistry(ledger_config.data_dir), LIMITS, "acme-notes", str(notes / "a"), "acme")
    config = api_config(ledger_config)
    tokens = make_tokens(config)
    with LoopbackServer(config) as server, loopback_http.client(base_url=server.base_url, timeout=30) as http:
        report = http.post(
            "/v1/sources/acme-notes/sync", headers={"Authorization": f"Bearer {tokens['admin']}"}
        )
    assert report.status_code == 200, report.text
    rows = {row["path"]: (row["status"], row.get("reason")) for row in report.json()["files"]}
    assert rows == {
        "b/two.md": ("ingested", None),
        "back\\slash.md": ("skipped", "bad_path"),
        "one.md": ("ingested", None),
    }


# -- ids in bodies ----------------------------------------------------------------------------
def test_holds_and_erasures_of_unknown_or_other_tenant_targets_are_404(served: Served) -> None:
    ours = served.document(subject_id="subject-1")["document_id"]
    theirs = served.document(who="other", subject_id="subject-9")["document_id"]
    before = served.size()
    for body in (
        {"document_ids": ["no-such-document"], "legal_basis": "case 1"},
        {"document_ids": [theirs], "legal_basis": "case 1"},
        {"document_ids": [ours, theirs], "legal_basis": "case 1"},  # one bad target spoils the hold
        {"subject_ids": ["no-such-subject"], "legal_basis": "case 1"},
        {"subject_ids": ["subject-9"], "legal_basis": "case 1"},  # globex's subject
        {"document_ids": [ours], "subject_ids": ["no-such-subject"], "legal_basis": "case 1"},
    ):
        response = served.http.post("/v1/legal-holds", json=body, headers=served.headers())
        refused(response, 404, "not_found")
        assert "case 1" not in response.text
    for body in ({"document_id": theirs}, {"document_id": "nope"}, {"subject_id": "subject-9"}):
        refused(served.http.post("/v1/erasures", json=body, headers=served.headers()), 404, "not_found")
    assert served.size() == before  # nothing written
    held = served.http.post(
        "/v1/legal-holds",
        json={"document_ids": [ours], "subject_ids": ["subject-1"], "legal_basis": "case 1"},
        headers=served.headers(),
    )
    assert held.status_code == 201, held.text


# -- media types ------------------------------------------------------------------------------
def json_bodies(served: Served) -> dict[str, dict[str, Any]]:
    """A body each JSON route accepts (so only its media type is wrong)."""
    doc = served.document()
    chunk = doc["chunks"][0]["chunk_id"]
    retrieval = {
        "query": "how long are audit logs kept?",
        "engine": "external:test-rag",
        "selected_entries": [
            {
                "document_id": doc["document_id"],
                "chunk_id": chunk,
                "score": "1.5",
                "snippet": "Audit logs are kept for 180 days.",
            }
        ],
    }
    return {
        "/v1/documents": {"path": "a.md", "text": "# A\n\nText.\n"},
        "/v1/retrievals": retrieval,
        "/v1/retrievals/batch": {"items": [{"idempotency_key": "k-1", "retrieval": retrieval}]},
        "/v1/search": {"input": {"query": "audit logs"}},
        "/v1/policy-bundles": {"bundle_yaml": "version: 1\nrules: []\n"},
        "/v1/erasures": {"document_id": doc["document_id"]},
        "/v1/legal-holds": {"document_ids": [doc["document_id"]], "legal_basis": "case"},
    }


@pytest.mark.parametrize(
    "content_type", ["text/plain", None, "application/x-www-form-urlencoded", "application/jsonx"]
)
def test_json_routes_refuse_other_media_types_with_415(served: Served, content_type: str | None) -> None:
    bodies = json_bodies(served)
    before = served.size()
    for route, body in bodies.items():
        headers = served.headers(**({"Content-Type": content_type} if content_type else {}))
        response = served.http.post(route, content=json.dumps(body).encode(), headers=headers)
        assert "application/json" in refused(response, 415, "unsupported_media_type"), route
    assert served.size() == before
    # The declared type (with its parameters, in any case) is accepted.
    ok = served.http.post(
        "/v1/documents",
        content=json.dumps(bodies["/v1/documents"]).encode(),
        headers=served.headers(**{"Content-Type": "Application/JSON; charset=utf-8"}),
    )
    assert ok.status_code in (200, 201), ok.text


def test_the_upload_refuses_json_and_a_sync_body_must_be_json(served: Served, tmp_path: Path) -> None:
    before = served.size()
    upload = served.http.post(
        "/v1/documents/upload", json={"file": "# A\n\nText.\n", "path": "a.md"}, headers=served.headers()
    )
    assert "multipart/form-data" in refused(upload, 415, "unsupported_media_type")
    sync = served.http.post(
        "/v1/sources/none/sync", content=b"under=a", headers=served.headers(**{"Content-Type": "text/plain"})
    )
    refused(sync, 415, "unsupported_media_type")
    assert served.size() == before


# -- text rules -------------------------------------------------------------------------------
def set_at(body: dict[str, Any], place: str, value: str) -> dict[str, Any]:
    """`body` with `value` at a dotted place (`selected_entries.0.snippet`)."""
    copy = json.loads(json.dumps(body))
    node: Any = copy
    *parents, last = place.split(".")
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    if last.isdigit():
        node[int(last)] = value
    else:
        node[last] = value
    return copy


# Each route's text fields, as dotted places in its JSON body (a number is a list index).
TEXT_FIELDS = {
    "/v1/documents": ["text", "title", "path", "document_id"],
    "/v1/retrievals": [
        "query",
        "selected_entries.0.snippet",
        "selected_entries.0.explanation",
        "selected_entries.0.chunk_id",
    ],
    "/v1/search": ["input.query", "task_id"],
    "/v1/policy-bundles": ["bundle_yaml"],
    "/v1/legal-holds": ["legal_basis", "document_ids.0"],
}


def _named(place: str) -> str:
    """How a refusal names a place: `selected_entries.0.snippet` as `selected_entries[0].snippet`."""
    return re.sub(r"\.(\d+)", r"[\1]", place)


def test_control_characters_in_text_fields_are_422_naming_the_field(served: Served) -> None:
    bodies = json_bodies(served)
    before = served.size()
    for route, place in ((route, place) for route, places in TEXT_FIELDS.items() for place in places):
        named = _named(place)
        for bad in ("a\x00b", "a\x01", "\x1b[31mred", "del\x7f"):
            prose = (
                place in ("text", "query", "input.query", "bundle_yaml", "legal_basis") or "snippet" in place
            )
            if prose and bad == "a\x01":
                bad = "line\n\x0bvertical tab"  # prose keeps lines, not other controls
            response = served.http.post(
                route, json=set_at(bodies[route], place, bad), headers=served.headers()
            )
            message = refused(response, 422, "control_character")
            assert message.startswith(f"{named}: "), (route, place, message)
            assert bad not in response.text
    assert served.size() == before
    # Prose keeps tabs and line breaks.
    text = "# Tabs\n\n\tindented\r\nand a CRLF line.\n"
    accepted = served.http.post(
        "/v1/documents", json={"path": "t.md", "text": text}, headers=served.headers()
    )
    assert accepted.status_code == 201, accepted.text


@pytest.mark.parametrize(
    "path", ["../x.md", "/etc/x.md", "a\\b.md", "a/../../x.md", "a//b.md", "./a.md", "a/.", "C:x.md"]
)
def test_document_paths_are_relative_names_422_naming_the_rule(served: Served, path: str) -> None:
    before = served.size()
    response = served.http.post("/v1/documents", json={"path": path, "text": DOC}, headers=served.headers())
    assert refused(response, 422, "unsafe_path").startswith("path: a document path must")
    form = served.http.post(
        "/v1/documents/upload",
        files={"file": ("ok.md", DOC.encode(), "text/markdown")},
        data={"path": path},
        headers=served.headers(),
    )
    refused(form, 422, "unsafe_path")
    named = served.http.post(  # the file's own name is the path when none is given
        "/v1/documents/upload",
        files={"file": (path, DOC.encode(), "text/markdown")},
        headers=served.headers(),
    )
    refused(named, 422, "unsafe_path")
    assert served.size() == before


def test_unknown_multipart_fields_are_422(served: Served) -> None:
    before = served.size()
    response = served.http.post(
        "/v1/documents/upload",
        files={"file": ("a.md", DOC.encode(), "text/markdown")},
        data={"path": "a.md", "retention_day": "30"},  # misspelt: would silently take the default
        headers=served.headers(),
    )
    assert "'retention_day'" in refused(response, 422, "unknown_field")
    assert served.size() == before
    fine = served.http.post(
        "/v1/documents/upload",
        files={"file": ("a.md", DOC.encode(), "text/markdown")},
        data={"path": "a.md", "retention_days": "30"},
        headers=served.headers(),
    )
    assert fine.status_code == 201, fine.text


# -- the receipt read -------------------------------------------------------------------------
def statements_on(table: str, api: Api, send: Callable[[], httpx.Response]) -> list[tuple[str, Any]]:
    """The statements (and their parameters) on a read-model table while `send` runs: the
    real store's own `rows`, recorded on the way through."""
    store = api.services.lookups.store
    real = store.rows
    seen: list[tuple[str, Any]] = []

    def recording(statement: str, params: Any = ()) -> Any:
        seen.append((statement, params))
        return real(statement, params)

    store.rows = recording
    try:
        assert send().status_code == 200
    finally:
        del store.rows
    return [(statement, params) for statement, params in seen if table in statement]


def plan(api: Api, statement: str, params: Any) -> str:
    """The query plan of a statement; on PostgreSQL with sequential scans off, so the plan
    shows whether an index serves it, not what suits a tiny table."""
    store = api.services.lookups.store
    if store.dialect == "sqlite":
        return "\n".join(str(row["detail"]) for row in store.rows("EXPLAIN QUERY PLAN " + statement, params))
    with store.transaction(commit=False) as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(store.sql("EXPLAIN " + statement), params)
        return "\n".join(str(row["QUERY PLAN"]) for row in cursor.fetchall())


def test_a_receipt_read_is_one_indexed_statement_cached_or_not(make_api: Callable[..., Api]) -> None:
    writer, reader = make_api(), make_api()  # the reader never saw the receipt: nothing cached
    doc = writer.document()
    receipt_id = writer.retrieval(doc)["receipt_id"]
    replayed = writer.client.post(f"/v1/receipts/{receipt_id}/replay", headers=writer.headers())
    assert replayed.status_code == 201, replayed.text

    def get() -> httpx.Response:
        return reader.client.get(f"/v1/receipts/{receipt_id}", headers=reader.headers())

    cold = statements_on(RECEIPTS_TABLE, reader, get)
    warm = statements_on(RECEIPTS_TABLE, reader, get)  # the entry is now held in memory
    assert len(cold) == 1 and len(warm) == 1, (cold, warm)
    body = get().json()
    assert body["receipt_id"] == receipt_id
    assert [r["receipt_id"] for r in body["replay_chain"]["replays"]] == [
        replayed.json()["replay_receipt_id"]
    ]
    for statement, params in (cold[0], warm[0]):
        shown = plan(reader, statement, params)
        if reader.services.lookups.store.dialect == "sqlite":
            tables_scanned = [
                line for line in shown.splitlines() if line.startswith("SCAN") and "replays" not in line
            ]
            assert tables_scanned == [] and "TEMP B-TREE" not in shown, (
                shown
            )  # `replays`: the subquery's rows
            assert f"{RECEIPTS_TABLE}_parent_position" in shown, shown
        else:
            assert "Seq Scan" not in shown and "Sort" not in shown, shown


def test_the_cited_chunks_of_a_receipt_read_come_through_the_chunk_index(
    make_api: Callable[..., Api],
) -> None:
    """A receipt read names each citation's source and rules from the cited chunks: one
    statement for all of them, served by the (tenant, document, chunk) index. An OR of
    (document, chunk) pairs made SQLite scan the tenant's corpus (20 ms a read at 1M)."""
    from projections.corpus import CORPUS_TABLE

    writer, reader = make_api(), make_api()
    doc = writer.document()  # DOC has two sections: two chunks
    assert len(doc["chunks"]) == 2
    body = writer.retrieval_body(doc)
    body["selected_entries"].append(
        {
            "document_id": doc["document_id"],
            "chunk_id": doc["chunks"][1]["chunk_id"],
            "score": "1.5",
            "snippet": "Restricted documents need a scope.",
        }
    )
    recorded = writer.client.post("/v1/retrievals", json=body, headers=writer.headers())
    assert recorded.status_code == 201, recorded.text
    receipt_id = recorded.json()["receipt_id"]
    store = reader.services.lookups.store
    answers: list[httpx.Response] = []

    def get() -> httpx.Response:
        answers.append(reader.client.get(f"/v1/receipts/{receipt_id}", headers=reader.headers()))
        return answers[-1]

    seen = statements_on(CORPUS_TABLE, reader, get)
    assert len(answers[0].json()["citations"]) == 2
    corpus = [(s, p) for s, p in seen if "chunk_id" in s]
    assert len(corpus) == 1, corpus
    shown = plan(reader, *corpus[0])
    if store.dialect == "sqlite":
        assert f"{CORPUS_TABLE}_chunk (tenant_id=? AND document_id=? AND chunk_id=?)" in shown, shown
        assert not any(line.startswith("SCAN") for line in shown.splitlines()), shown
    else:
        assert "Seq Scan" not in shown, shown
