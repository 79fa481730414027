"""Erased text survives nowhere: after a document erasure and after a data-subject erasure,
through a real `citeledger serve` subprocess on SQLite and PostgreSQL, a unique marker is in
no row of any table (listed from the catalog), no file of the data directory (the SQLite
database, its -wal, -shm and -journal files, keys, registries), no line the server printed,
no answer to a retry with an earlier request's `Idempotency-Key`, no search answer since, no
file of a drained client spool, and no in-memory cache of the process that erased it."""

from __future__ import annotations

import datetime as dt
import gc
import hashlib
import secrets
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from api.routes.common import fingerprint
from client import Client, Spooled
from client.spool import ItemVerdict, Spool, SpoolRecord
from ledger.config import LedgerConfig
from ledger.retrieval import search_text, word_forms
from ledger.retrieval.search_text import stem_word
from ledger.schemas.requests import DocumentIn, ErasureIn, RetrievalIn, SearchIn
from ledger.tlog.signing import KeyDirectory
from ledger.usecases.context import Caller
from ledger.usecases.ports import ReceiptFilter
from ledger.usecases.receipt_reads import receipts_page
from ledger.usecases.retention import erase, sweep
from ledger.usecases.scopes import SCOPES
from ledger.usecases.search import search
from ledger.writing.application import Ledger
from projections.queries import ReadModels
from projections.question_index import (
    QUESTION_KEYS_TABLE,
    QUESTION_WORDS_TABLE,
    QuestionIndexProjection,
    tenant_word_key,
    word_hash,
)
from tests import loopback_http
from tests.client_support import retrieval
from tests.conftest import pg_connect
from tests.factories import UseCases
from tests.server_process import ServerProcess, free_port, server_env

TOKEN = "erasure-residue-" + "t" * 24
VAULT_QUERY = "vault passphrase"


def _marker() -> str:
    """A word no other test writes, that the tokenizer keeps whole (its stem is itself)."""
    marker = "qzmarker" + "".join(secrets.choice("0123456789") for _ in range(10))
    assert stem_word(marker) == marker
    return marker


def _value_bytes(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    return orjson.dumps(value, default=str)


def _table_rows(config: LedgerConfig) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """(table, row) for every row of every table the store's catalog lists."""
    if config.database_url is None:
        with sqlite3.connect(config.sqlite_path) as conn:
            tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            assert len(tables) > 10, tables
            for table in tables:
                for row in conn.execute(f'SELECT * FROM "{table}"'):
                    yield table, tuple(row)
        return
    schema = config.database_url.split("schema=")[1]
    with pg_connect() as conn:
        tables = [
            name
            for (name,) in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
            ).fetchall()
        ]
        assert len(tables) > 10, tables
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{schema}"."{table}"').fetchall():
                yield table, tuple(row)


def residue(config: LedgerConfig, needle: str, *extra_files: Path) -> list[str]:
    """Where `needle` is still found: tables (every column, bytea included), files of the data
    directory (database, WAL, -shm, -journal, keys, ...) and `extra_files` (logs, spools)."""
    raw = needle.encode()
    found = sorted({table for table, row in _table_rows(config) if any(raw in _value_bytes(v) for v in row)})
    roots = [config.data_dir, *extra_files]
    files = [
        path for root in roots for path in ([root] if root.is_file() else root.rglob("*")) if path.is_file()
    ]
    assert any(path.name == "ledger.sqlite-wal" for path in files) or config.database_url is not None
    found += [str(path) for path in files if raw in path.read_bytes()]
    return found


def question_index_residue(config: LedgerConfig, tenant_id: str, word: str, position: int) -> list[str]:
    """The question index's rows that derive from a question: its word's keyed hash (the
    tenant's key, from the data directory's master key), or its receipt's position."""
    hashed = word_hash(tenant_word_key(KeyDirectory(config.keys_dir).master_key(), tenant_id), word)
    found = []
    for table, row in _table_rows(config):
        if table == QUESTION_WORDS_TABLE and (row[1] == hashed or row[2] == position):
            found.append(f"{table}: {row}")
        if table == QUESTION_KEYS_TABLE and (row[2] == position or str(hashed) in row[4].split(",")):
            found.append(f"{table}: {row}")
    return found


class Running:
    """A `serve` subprocess logging everything (debug) to a file, and an HTTP client."""

    def __init__(self, config: LedgerConfig, tmp_path: Path) -> None:
        self.config = config
        self.log = tmp_path / "server.log"
        self.server = ServerProcess(
            config.data_dir, server_env(config, TOKEN), log_path=self.log, log_level="debug"
        ).start()
        self.http = loopback_http.client(
            base_url=self.server.base_url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
        )

    def post(self, path: str, body: dict[str, Any], key: str | None = None) -> httpx.Response:
        headers = {"Idempotency-Key": key} if key else {}
        return self.http.post(path, json=body, headers=headers)

    def document(self, text: str, path: str, **fields: Any) -> dict[str, Any]:
        response = self.post("/v1/documents", {"path": path, "text": text, **fields}, key=f"doc-{path}")
        assert response.status_code == 201, response.text
        body: dict[str, Any] = response.json()
        return body

    def questions(self, q: str) -> list[str]:
        """The receipt ids a question search (`q`) finds."""
        found = self.http.get("/v1/receipts", params={"q": q})
        assert found.status_code == 200, found.text
        return [r["receipt_id"] for r in found.json()["receipts"]]

    def search(self, query: str, key: str | None = None) -> httpx.Response:
        return self.post("/v1/search", {"input": {"query": query, "top_k": 5}}, key=key)

    def close(self) -> None:
        self.http.close()
        self.server.stop()


@pytest.fixture
def running(ledger_config: LedgerConfig, tmp_path: Path) -> Iterator[Running]:
    server = Running(ledger_config, tmp_path)
    try:
        yield server
    finally:
        server.close()


def _vault(marker: str) -> str:
    return f"# Vault {marker}\n\nThe vault passphrase is {marker} and nobody else knows it.\n"


def _retrieval(doc: dict[str, Any], snippet: str, query: str, **fields: Any) -> dict[str, Any]:
    return retrieval(doc, query=query, snippet=snippet, **fields)


def _cited_snippets(answer: dict[str, Any]) -> list[str]:
    return [citation["snippet"] for citation in answer["output"]["citations"]]


def _check_withheld_retry(running: Running, key: str, first: dict[str, Any], marker: str) -> None:
    """A retry after the erasure: the first answer as it stands now (`dedup`), the erased
    document's snippet, heading and terms withheld and named, never the old text."""
    again = running.search(VAULT_QUERY, key=key)
    assert again.status_code == 200, again.text
    assert marker not in again.text
    body = again.json()
    assert body["dedup"] is True and body["receipt_id"] == first["receipt_id"]
    assert body["output"]["query"] == VAULT_QUERY  # the query's own key lives
    [cited] = [c for c in body["output"]["citations"] if c["path"] == "secret/vault.md"]
    at = body["output"]["citations"].index(cited)
    assert cited["snippet"] == "" and cited["locator"]["heading_path"] is None
    assert cited["reason"]["terms"] == []
    withheld = {(item["field"], item["reason"]) for item in body["withheld"]}
    assert {
        (f"output.citations[{at}].snippet", "text_erased"),
        (f"output.citations[{at}].locator.heading_path", "text_erased"),
        (f"output.citations[{at}].reason.terms", "text_erased"),
    } <= withheld
    # everything that did not quote the erased document is the first answer unchanged
    assert body["context_hash"] == first["context_hash"] and body["position"] == first["position"]


def test_document_erasure_leaves_no_text_in_storage_logs_or_retried_answers(running: Running) -> None:
    marker = _marker()
    vault = running.document(_vault(marker), "secret/vault.md")
    running.document("# Lobby\n\nThe lobby vault door opens at nine.\n", "public/lobby.md")
    first = running.search(VAULT_QUERY, key="search-1")
    assert first.status_code == 200, first.text
    answer = first.json()
    assert any(marker in snippet for snippet in _cited_snippets(answer)), answer  # it quoted the text
    snippet = f"The vault passphrase is {marker} and nobody else knows it."
    single = running.post("/v1/retrievals", _retrieval(vault, snippet, "where is the vault"), key="ret-1")
    assert single.status_code == 201, single.text
    batch = running.post(
        "/v1/retrievals/batch",
        {"items": [{"idempotency_key": "ret-2", "retrieval": _retrieval(vault, snippet, "the vault")}]},
    )
    assert batch.status_code == 200 and batch.json()["recorded"] == 1, batch.text
    replay = running.post(f"/v1/receipts/{answer['receipt_id']}/replay", {}, key="replay-1")
    assert replay.status_code == 201, replay.text

    # before the erasure a retry is answered from its record, text and all
    before = running.search(VAULT_QUERY, key="search-1")
    assert before.status_code == 200 and before.json()["dedup"] is True
    assert _cited_snippets(before.json()) == _cited_snippets(answer) and "withheld" not in before.json()

    erased = running.post("/v1/erasures", {"document_id": vault["document_id"]})
    assert erased.status_code == 200, erased.text

    _check_withheld_retry(running, "search-1", answer, marker)
    # a request that quoted the erased text can no longer be matched to its record: refused,
    # never answered blindly; one that quoted none is answered from its record as before
    quoting = [
        (
            "POST /v1/documents",
            "/v1/documents",
            {"path": "secret/vault.md", "text": _vault(marker)},
            "doc-secret/vault.md",
        ),
        ("POST /v1/retrievals", "/v1/retrievals", _retrieval(vault, snippet, "where is the vault"), "ret-1"),
    ]
    for _, path, body, key in quoting:
        refused = running.post(path, body, key=key)
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"]["code"] == "idempotency_key_erased" and marker not in refused.text
    replayed = running.post(f"/v1/receipts/{answer['receipt_id']}/replay", {}, key="replay-1")
    assert replayed.status_code == 201 and replayed.json()["dedup"] is True, replayed.text
    assert residue(running.config, marker, running.log) == []
    # nor does any record keep the bare fingerprint (a hash of the request, text and all)
    searched = {"input": {"query": VAULT_QUERY, "top_k": 5}}
    requests = [*quoting, ("POST /v1/search", "", searched, "")]
    for (route, _, body, _), model in zip(requests, (DocumentIn, RetrievalIn, SearchIn), strict=True):
        value = model.model_validate_json(orjson.dumps(body)).model_dump(mode="json")
        for scopes in (frozenset(SCOPES), frozenset({"retrieval.write"})):  # either audience's form
            bare = fingerprint(route, value, Caller(tenant_id="acme", actor="t", scopes=scopes))
            assert residue(running.config, bare) == [], route
    # nor a bare hash of it, which would confirm a guess of the text: the log line of a search
    # carries the snippet's salted commitment, gone with the key
    logged = running.log.read_text()
    assert "search tenant=" in logged
    for cited in _cited_snippets(answer):
        assert hashlib.sha256(cited.encode()).hexdigest()[:16] not in logged

    # and nothing answers the old text since: not the index, not a cache
    for query in (marker, VAULT_QUERY, f"# Vault {marker}"):
        later = running.search(query)
        assert later.status_code == 200 and marker not in "".join(_cited_snippets(later.json()))
        assert all(c["path"] != "secret/vault.md" for c in later.json()["output"]["citations"])


def test_subject_erasure_leaves_no_text_in_storage_logs_or_retried_answers(running: Running) -> None:
    marker = _marker()
    subject = "subj-" + uuid.uuid4().hex[:8]
    about = running.document(_vault(marker), "secret/vault.md", subject_id=subject)
    running.document("# Lobby\n\nThe lobby vault door opens at nine.\n", "public/lobby.md")
    first = running.search(VAULT_QUERY, key="search-s")
    assert first.status_code == 200 and any(marker in s for s in _cited_snippets(first.json()))
    # the subject's own query quotes the marker too: sealed under the subject's key
    recorded = running.post(
        "/v1/retrievals",
        _retrieval(about, "nobody else knows it", f"what is {marker}", subject_id=subject),
        key="ret-s",
    )
    assert recorded.status_code == 201, recorded.text
    # the question index finds it by the marker while the subject's key lives
    assert running.questions(marker) == [recorded.json()["receipt_id"]]
    tenant = running.http.get("/v1/receipts/" + recorded.json()["receipt_id"]).json()["event"]["tenant_id"]
    at = recorded.json()["position"]
    assert question_index_residue(running.config, tenant, marker, at) != []

    erased = running.post("/v1/erasures", {"subject_id": subject})
    assert erased.status_code == 200 and erased.json()["erased"]["document_ids"] == [about["document_id"]]

    _check_withheld_retry(running, "search-s", first.json(), marker)
    retried = running.post(
        "/v1/retrievals",
        _retrieval(about, "nobody else knows it", f"what is {marker}", subject_id=subject),
        key="ret-s",
    )
    assert retried.status_code == 409 and retried.json()["error"]["code"] == "idempotency_key_erased"
    assert residue(running.config, marker, running.log) == []
    # no row of the question index derives from the erased question, and q finds nothing
    assert question_index_residue(running.config, tenant, marker, at) == []
    assert running.questions(marker) == []


def test_retention_expiry_leaves_no_question_words(ledger: Ledger) -> None:
    """The retention sweep destroys a day's query keys: the questions sealed under them leave
    the question index too (their words' hashes, their key rows), a question the writer handed
    over (indexed without being unsealed) like any other."""
    marker = _marker()
    cases = UseCases(ledger)
    doc = cases.ingest("The retention floor is 180 days.")
    index = cases.runner.projection("question_index")
    assert isinstance(index, QuestionIndexProjection)
    handed = index.handed_over
    receipt = cases.retrieve(doc, f"how long is {marker} kept?")
    assert index.handed_over == handed + 1
    caller = Caller(tenant_id=receipt.tenant_id, actor="auditor", scopes=frozenset(SCOPES))
    models = ReadModels(ledger.store)

    def found() -> list[int]:
        page = receipts_page(cases.ctx, models, caller, ReceiptFilter(q=marker), cursor=None, limit=10)
        return [r["position"] for r in page["receipts"]]

    assert found() == [receipt.position]
    assert question_index_residue(ledger.config, receipt.tenant_id, marker, receipt.position) != []
    sweep(cases.ctx, now=dt.datetime.now(dt.UTC) + dt.timedelta(days=4000))
    assert question_index_residue(ledger.config, receipt.tenant_id, marker, receipt.position) == []
    assert found() == []


def test_a_drained_spool_keeps_no_text(running: Running, tmp_path: Path) -> None:
    """Delivered records are blanked or deleted; a refused one is kept without its text (the
    ledger may erase what it quotes; the spool would outlive that)."""
    marker = _marker()
    vault = running.document(_vault(marker), "secret/vault.md")
    spool_dir = tmp_path / "spool"
    snippet = f"The vault passphrase is {marker} and nobody else knows it."
    nowhere = f"http://127.0.0.1:{free_port()}"
    fast = {"backoff_base_s": 0.01, "backoff_max_s": 0.05, "drain_interval_s": None, "max_attempts": 1}
    with Client(nowhere, TOKEN, spool_dir=str(spool_dir), **fast) as offline:
        spooled = [offline.record_retrieval(_retrieval(vault, snippet, f"q{i} {marker}")) for i in range(5)]
        bad = _retrieval(vault, f"{marker} was never in the chunk", f"bad {marker}")
        spooled.append(offline.record_retrieval(bad))
        spooled += [
            offline.record_retrieval(_retrieval(vault, snippet, f"q{i} {marker}")) for i in range(5, 9)
        ]
    assert all(isinstance(result, Spooled) for result in spooled)
    assert residue(running.config, marker, spool_dir) != []  # pending: kept, as it must be
    with Client(running.server.base_url, TOKEN, spool_dir=str(spool_dir), **fast) as online:
        report = online.flush_spool()
    assert (report.delivered, report.rejected, report.pending) == (9, 1, 0), report
    assert [p.name for p in spool_dir.glob("*") if marker.encode() in p.read_bytes()] == []
    rejected = orjson.loads((spool_dir / "rejected.jsonl").read_bytes())
    assert (
        rejected["record"]["retrieval"]["selected_entries"][0]["chunk_id"] == vault["chunks"][0]["chunk_id"]
    )
    assert "snippet_not_in_chunk" in rejected["reason"]


def _strings_reachable(roots: list[Any], needle: str) -> list[str]:
    """Strings holding `needle` reachable from `roots` (containers and objects followed)."""
    seen: set[int] = set()
    stack = list(roots)
    hits = []
    while stack:
        item = stack.pop()
        if id(item) in seen or isinstance(item, type):
            continue
        seen.add(id(item))
        if isinstance(item, str):
            if needle in item:
                hits.append(item[:80])
            continue
        if isinstance(item, bytes | bytearray):
            if needle.encode() in item:
                hits.append(repr(item[:80]))
            continue
        stack.extend(gc.get_referents(item))
    return hits


def test_no_in_memory_cache_holds_erased_words(ledger: Ledger) -> None:
    """The process that erased: its search index, term-hash and stem caches, write-path
    lookups and key caches hold no word of the erased text, and a search finds nothing."""
    marker = _marker()
    cases = UseCases(ledger)
    ctx = cases.ctx
    doc = cases.ingest(_vault(marker), path="secret/vault.md")
    caller = Caller(tenant_id=doc.tenant_id, actor="test", scopes=frozenset({"admin"}))
    found = search(ctx, caller, SearchIn.model_validate({"input": {"query": f"passphrase {marker}"}}))
    assert any(marker in c["snippet"] for c in found.body["output"]["citations"])
    roots: list[Any] = [ctx, ctx.search_index, ctx.lookups, search_text._stems, word_forms._related]
    assert _strings_reachable(roots, marker)  # cached while the key lives
    assert marker in word_forms._related  # a query word's relatives (a key: the walk sees values only)
    del found
    erase(ctx, caller, ErasureIn(document_id=doc.payload["document_id"]))
    assert _strings_reachable(roots, marker) == []
    assert marker not in word_forms._related
    again = search(ctx, caller, SearchIn.model_validate({"input": {"query": VAULT_QUERY}}))
    assert all(marker not in c["snippet"] for c in again.body["output"]["citations"])


def test_a_spool_stopped_mid_segment_blanks_what_it_delivered(tmp_path: Path) -> None:
    """Delivery stopped by the ledger after two records: their text is gone from the segment
    the cursor stays in, the two behind them are still there and delivered next, in order."""
    spool = Spool(tmp_path / "spool")
    markers = [_marker() for _ in range(4)]
    spool.append_many([SpoolRecord(f"key-{i}", {"query": m}) for i, m in enumerate(markers)])
    sent: list[str] = []

    def ledger_takes_two(records: Sequence[SpoolRecord]) -> list[ItemVerdict]:
        verdicts = []
        for record in records:
            if len(sent) < 2:
                sent.append(record.idempotency_key)
                verdicts.append(ItemVerdict(delivered=True))
            else:
                verdicts.append(ItemVerdict(delivered=False, retryable=True, reason="busy"))
        return verdicts

    first = spool.drain(ledger_takes_two)
    assert (first.delivered, first.pending) == (2, 2) and sent == ["key-0", "key-1"]
    [segment] = list((tmp_path / "spool").glob("segment-*.jsonl"))
    data = segment.read_bytes()
    assert [m.encode() in data for m in markers] == [False, False, True, True]
    rest = spool.drain(lambda records: [ItemVerdict(delivered=True) for _ in records])
    assert (rest.delivered, rest.pending) == (2, 0)
    assert list((tmp_path / "spool").glob("segment-*.jsonl")) == []


def test_a_batch_recorded_question_leaves_the_index_with_its_subject(ledger: Ledger) -> None:
    """A question the writer handed to the question index (a batch's receipt, indexed without
    being unsealed) keeps its key rows: erasing its data subject deletes every row of it."""
    marker = _marker()
    subject = "subj-" + uuid.uuid4().hex[:8]
    cases = UseCases(ledger)
    doc = cases.ingest("The retention floor is 180 days.")
    [receipt, other] = cases.retrieve_batch(
        doc, [f"what is {marker}", "how long are logs kept?"], subject_id=subject
    )
    index = cases.runner.projection("question_index")
    assert isinstance(index, QuestionIndexProjection) and index.handed_over >= 2
    assert question_index_residue(ledger.config, receipt.tenant_id, marker, receipt.position) != []
    caller = Caller(tenant_id=receipt.tenant_id, actor="auditor", scopes=frozenset(SCOPES))
    erase(cases.ctx, caller, ErasureIn(subject_id=subject))
    assert question_index_residue(ledger.config, receipt.tenant_id, marker, receipt.position) == []
    assert question_index_residue(ledger.config, other.tenant_id, "logs", other.position) == []
