"""Searches the ledger runs: as-of equals live, determinism, tenant isolation, erasure,
deadlines, policy filters, the bm25s reference, and the route on a real server."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import bm25s
import numpy as np
import pytest

from bootstrap import ledger_context
from ledger.domain.events import SearchRequest
from ledger.policy.policy_rules import PolicyRules
from ledger.retrieval.search_text import terms as text_terms
from ledger.schemas.requests import DocumentIn, ErasureIn, PolicyBundleIn, SearchIn
from ledger.storage.claims import DocumentClaims
from ledger.usecases import ranking
from ledger.usecases import search as search_module
from ledger.usecases.context import Caller, UseCaseContext
from ledger.usecases.documents import ingest_document, remove_document
from ledger.usecases.policy import bundle_rules, live_rules, publish_policy
from ledger.usecases.ranking import K1, B, SearchRun, rank
from ledger.usecases.retention import erase
from ledger.usecases.search import search
from ledger.writing.application import Ledger
from ledger.writing.idempotency import IdempotencyKey
from projections.digest import projection_digest
from projections.search_index import SEARCH_CHUNKS_TABLE
from tests import loopback_http
from tests.api_support import LoopbackServer, api_config, make_tokens
from tests.fixture_ledgers import without_fields
from tests.golden_support import bm25s_tokenizer, corpus_files, ingest_corpus

ACME = Caller("acme", "svc-search", frozenset({"retrieval.write"}))
GLOBEX = Caller("globex", "svc-search", frozenset({"retrieval.write"}))
QUERIES = [
    "parental leave weeks",
    "on-call escalation",
    "年假有几天",
    "経費精算の申請期限",
    "hotel limit per night",
]


def _ingest(ctx: UseCaseContext, caller: Caller, path: str, text: str, **fields: Any) -> dict[str, Any]:
    doc = DocumentIn(path=path, text=text, source=path.split("/")[0], **fields)
    return ingest_document(ctx, DocumentClaims(ctx.ledger.store), caller, doc).body


def corpus_context(ledger: Ledger, files: dict[str, str]) -> UseCaseContext:
    """A use-case context on `ledger` with `files` (path -> text) ingested for acme, in order."""
    context = ledger_context(ledger)
    for path, text in files.items():
        _ingest(context, ACME, path, text)
    return context


def _search(ctx: UseCaseContext, caller: Caller, query: str, **task: Any) -> dict[str, Any]:
    envelope = {"input": {"query": query, "top_k": task.pop("top_k", 5), **task.pop("input", {})}, **task}
    return search(ctx, caller, SearchIn.model_validate(envelope)).body


def _rank(
    ctx: UseCaseContext,
    tenant: str,
    query: str,
    position: int,
    policy: PolicyRules | None = None,
    scopes: frozenset[str] = frozenset({"retrieval.write"}),
    top_k: int = 5,
) -> SearchRun:
    request = SearchRequest(top_k=top_k, corpus_position=position)
    return rank(ctx, tenant, query, request, policy or PolicyRules(), scopes, None)


def _receipt(ledger: Ledger, position: int) -> dict[str, Any]:
    event = ledger.get(position)
    assert event is not None and event.type == "RetrievalRecorded"
    return dict(event.payload)


def test_as_of_search_equals_the_live_search_that_ran_then(ledger: Ledger) -> None:
    ctx = ledger_context(ledger)
    files = corpus_files()
    subset = {p: t for p, t in files.items() if p.startswith(("handbook/", "zh/", "ja/", "policies/travel"))}
    ingest_corpus(ctx, ACME, dict(list(subset.items())[:10]))
    ran: list[tuple[str, dict[str, Any]]] = []
    steps = list(subset.items())[10:]
    for index, (path, text) in enumerate(steps):
        _ingest(ctx, ACME, path, text)
        if index % 3 == 0:  # an edit: a new version of an earlier document
            _ingest(
                ctx,
                ACME,
                "handbook/benefits/parental-leave.md",
                text.replace("20 weeks", f"{20 + index} weeks") + f"\nRevised {index}.\n",
            )
        if index == 4:
            _ingest(
                ctx, ACME, "handbook/tmp/parental-draft.md", "# Parental leave draft\n\nParental leave weeks."
            )
        if index == 8:
            doc_id = next(iter(_docs_at(ctx, "handbook/tmp/parental-draft.md")))
            remove_document(ctx, DocumentClaims(ledger.store), ACME, doc_id, "withdrawn")
        for query in QUERIES:
            ran.append((query, _search(ctx, ACME, query)))
    assert {body["status"] for _, body in ran} >= {"ok"}
    positions = {body["corpus_position"] for _, body in ran}
    assert len(positions) > 5
    changed = 0
    for query, body in ran:
        receipt = _receipt(ledger, body["position"])
        position = receipt["search"]["corpus_position"]
        as_of = _rank(ctx, "acme", query, position)
        assert as_of.context_hash == receipt["context_hash"] == body["context_hash"]
        assert [h.chunk_id for h in as_of.hits] == [e["chunk_id"] for e in receipt["selected_entries"]]
        assert [h.score for h in as_of.hits] == [
            p["score"] for c in body["output"]["citations"] for p in c["parts"]
        ]
        changed += as_of.context_hash != _rank(ctx, "acme", query, ledger.size).context_hash
    assert changed > 0  # the corpus moved on: as-of is not the current corpus


def _docs_at(ctx: UseCaseContext, path: str) -> set[str]:
    rows = ctx.ledger.store.rows(
        f"SELECT DISTINCT document_id FROM {ctx.ledger.store.table('citeledger_rm_corpus')} WHERE path=?",
        (path,),
    )
    return {row["document_id"] for row in rows}


# What each write makes anew.
_PER_WRITE = frozenset(
    {"receipt_id", "position", "event_id", "signature", "latency_ms", "citation_id", "corpus_position"}
)


def test_a_keyed_search_answers_as_an_unkeyed_one(ledger: Ledger) -> None:
    """Only a keyed search's answer is stored (its text sealed there, in plain in the answer);
    an unkeyed one is built in plain: the same answer, heading, snippet, terms and gaps, but
    what each write makes anew. A retry with the key gets the stored answer back."""
    ctx = corpus_context(
        ledger,
        {
            "handbook/leave.md": "# Leave\n\n## Parental\n\nParental leave is 20 weeks.",
            "handbook/travel.md": "# Travel\n\nThe hotel limit per night is 180 euros.",
        },
    )
    for number, query in enumerate(["parental leave weeks", "hotel limit per night", "submarine reactor"]):
        plain = _search(ctx, ACME, query)
        keyed_caller = replace(ACME, idempotency=IdempotencyKey("acme", f"search-{number}", query))
        keyed = _search(ctx, keyed_caller, query)
        assert without_fields(plain, _PER_WRITE) == without_fields(keyed, _PER_WRITE), query
        assert _search(ctx, keyed_caller, query) == {**keyed, "dedup": True}
        if plain["status"] == "ok":
            citation = plain["output"]["citations"][0]
            assert citation["snippet"] and citation["reason"]["terms"], citation
            assert citation["locator"]["heading_path"] in ("Leave / Parental", "Travel"), citation
        else:
            assert plain["output"]["gaps"] and plain["output"]["query"] == query


def test_two_runs_on_the_same_corpus_give_the_same_bytes(ledger: Ledger) -> None:
    """Two searches on one corpus: `rank` results are equal field by field, and the receipts
    differ only in what is minted or sealed per write: receipt_id, citation ids,
    `policy_snapshot.captured_at`, `search.corpus_position` (the first receipt is an entry
    of the log the second ranks), `expires_at` (none here: same day), and every sealed
    value's nonce and ciphertext (fresh AES-GCM nonce per seal; the query's and snippets'
    commitments are equal because the key and salt are the same)."""
    ctx = ledger_context(ledger)
    files = corpus_files()
    ingest_corpus(ctx, ACME, {p: t for p, t in files.items() if p.startswith(("handbook/", "zh/", "ja/"))})
    for query in QUERIES:
        first, second = _search(ctx, ACME, query), _search(ctx, ACME, query)
        # The first search's receipt is itself a log entry: the second ranks one position later.
        assert second["corpus_position"] == first["position"]
        a = _rank(ctx, "acme", query, first["corpus_position"])
        b = _rank(ctx, "acme", query, first["corpus_position"])
        assert a == b and a.context_hash == first["context_hash"] == second["context_hash"]
        one, two = _receipt(ledger, first["position"]), _receipt(ledger, second["position"])
        assert _without_minted(one) == _without_minted(two)
        assert one["receipt_id"] != two["receipt_id"]
        assert one["query"]["nonce"] != two["query"]["nonce"]
        assert one["query"]["commitment"] == two["query"]["commitment"]
        assert _without_minted_ids(first["output"]["citations"]) == _without_minted_ids(
            second["output"]["citations"]
        )


def _without_minted_ids(citations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Citations (and their parts) without what each write mints: citation ids, expiries."""

    def strip(citation: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in citation.items() if k not in ("citation_id", "expires_at", "parts")}

    return [strip(c) | {"parts": [strip(p) for p in c["parts"]]} for c in citations]


def _without_minted(receipt: dict[str, Any]) -> dict[str, Any]:
    def unsealed(value: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if value is None else {k: v for k, v in value.items() if k not in ("nonce", "ciphertext")}

    out = {k: v for k, v in receipt.items() if k not in ("receipt_id", "query", "policy_snapshot")}
    out["query"] = unsealed(receipt["query"])
    out["policy_snapshot"] = {k: v for k, v in receipt["policy_snapshot"].items() if k != "captured_at"}
    out["search"] = {k: v for k, v in receipt["search"].items() if k != "corpus_position"}
    out["selected_entries"] = [
        {
            **{k: v for k, v in e.items() if k not in ("citation_id", "snapshot")},
            "snapshot": unsealed(e["snapshot"]),
        }
        for e in receipt["selected_entries"]
    ]
    return out


def test_other_tenants_documents_never_change_scores(ledger: Ledger) -> None:
    ctx = corpus_context(
        ledger,
        {
            "handbook/leave.md": "# Leave\n\nParental leave is 20 weeks.\n\n"
            "## Sick\n\nSick leave needs a note.",
            "handbook/other.md": "# Other\n\nWeeks of onboarding and leave planning.",
        },
    )
    before = [_rank(ctx, "acme", q, ledger.size) for q in ("parental leave weeks", "sick note", "salary")]
    for i in range(12):  # the same words, many times over, in another tenant
        _ingest(ctx, GLOBEX, f"handbook/leave-{i}.md", "# Leave\n\nParental leave weeks leave leave weeks.")
    after = [_rank(ctx, "acme", q, ledger.size) for q in ("parental leave weeks", "sick note", "salary")]
    assert [r.hits for r in before] == [r.hits for r in after]
    assert [r.context_hash for r in before] == [r.context_hash for r in after]
    assert before[0].status == "ok" and before[2].status == "no_hit"
    theirs = _search(ctx, GLOBEX, "sick note")
    assert theirs["status"] == "no_hit"  # acme's sick-leave text is invisible to globex
    parental = _search(ctx, GLOBEX, "parental")
    assert parental["status"] == "ok" and parental["output"]["citations"]
    assert all(c["path"].startswith("handbook/leave-") for c in parental["output"]["citations"])


def test_an_erased_document_leaves_results_and_index(ledger: Ledger) -> None:
    ctx = ledger_context(ledger)
    keep = _ingest(ctx, ACME, "handbook/keep.md", "# Expenses\n\nSubmit receipts within 30 days.")
    gone = _ingest(
        ctx, ACME, "handbook/secret.md", "# Bonus plan\n\nThe confidential bonus multiplier is 1.7."
    )
    _ingest(ctx, ACME, "handbook/secret.md", "# Bonus plan\n\nThe confidential bonus multiplier is 1.9.")
    assert _search(ctx, ACME, "confidential bonus multiplier")["status"] == "ok"
    table = ledger.store.table(SEARCH_CHUNKS_TABLE)
    count = f"SELECT COUNT(*) AS n FROM {table} WHERE tenant_id=? AND document_id=?"
    assert ledger.store.rows(count, ("acme", gone["document_id"]))[0]["n"] == 2
    erase(ctx, ACME, ErasureIn(document_id=gone["document_id"]))
    body = _search(ctx, ACME, "confidential bonus multiplier")
    assert body["status"] == "no_hit" and body["output"]["gaps"]
    assert ledger.store.rows(count, ("acme", gone["document_id"]))[0]["n"] == 0
    assert ledger.store.rows(count, ("acme", keep["document_id"]))[0]["n"] == 1
    # As of a position before the erasure, the erased text is gone as well.
    assert _rank(ctx, "acme", "confidential bonus multiplier", gone["position"]).status == "no_hit"
    runner = ctx.lookups.runner  # type: ignore[attr-defined]
    projection = runner.projection("search_index")
    incremental = projection_digest(projection, ledger.store)
    runner.rebuild(["search_index"])
    assert projection_digest(projection, ledger.store) == incremental
    assert ctx.search_index is not None
    ctx.search_index.forget()  # type: ignore[attr-defined]
    assert _search(ctx, ACME, "receipts within 30 days")["status"] == "ok"


def test_past_the_deadline_the_answer_is_timeout(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = ledger_context(ledger)
    _ingest(ctx, ACME, "handbook/leave.md", "# Leave\n\nParental leave is 20 weeks.")
    request = SearchRequest(top_k=5, corpus_position=ledger.size)
    assert rank(ctx, "acme", "parental leave", request, PolicyRules(), frozenset(), 0.0).status == "timeout"
    assert rank(ctx, "acme", "parental leave", request, PolicyRules(), frozenset(), 5.0).status == "ok"
    # The use case: a clock that moves a second per reading passes any 1-second deadline.
    ticks = iter(range(10_000))
    monkeypatch.setattr(search_module.time, "monotonic", lambda: float(next(ticks)))
    body = _search(ctx, ACME, "parental leave", deadline_ms=1000, task_id="task-slow")
    assert body["status"] == "timeout" and body["errors"][0]["retryable"] is True
    receipt = _receipt(ledger, body["position"])
    assert receipt["status"] == "timeout" and receipt["selected_entries"] == []
    assert receipt["task"]["deadline_ms"] == 1000


BUNDLE = """
version: pol-search-1
limits: {max_top_k: 3}
rules:
  - id: hr-private
    action: deny
    match: {paths: ["hr/**"]}
  - id: restricted-needs-scope
    action: deny
    match: {sensitivity: [restricted]}
    unless_scope: knowledge.restricted.read
  - id: handbook-first
    action: boost
    factor: "2"
    match: {paths: ["handbook/**"]}
  - id: finance-redacted
    action: redact
    match: {paths: ["finance/**"]}
"""


def test_policy_deny_redact_boost_are_recorded(ledger: Ledger) -> None:
    ctx = ledger_context(ledger)
    _ingest(ctx, ACME, "hr/salaries.md", "# Salaries\n\nSalary bands for engineers are reviewed yearly.")
    _ingest(ctx, ACME, "handbook/salary.md", "# Salary\n\nSalary is paid on the 25th; bands are public.")
    _ingest(ctx, ACME, "finance/payroll.md", "# Payroll\n\nSalary payments run through the payroll bank.")
    _ingest(
        ctx,
        ACME,
        "handbook/restricted.md",
        "# Board salary\n\nBoard salary details.",
        sensitivity="restricted",
    )
    unfiltered = _search(ctx, ACME, "salary")
    assert {c["path"] for c in unfiltered["output"]["citations"]} >= {"hr/salaries.md", "finance/payroll.md"}
    publish_policy(ctx, ACME, PolicyBundleIn(bundle_yaml=BUNDLE))
    body = _search(ctx, ACME, "salary", top_k=10)
    paths = [c["path"] for c in body["output"]["citations"]]
    assert "hr/salaries.md" not in paths and "handbook/restricted.md" not in paths
    assert len(paths) <= 3  # limits.max_top_k
    assert paths[0] == "handbook/salary.md"
    boosted = body["output"]["citations"][0]
    assert any(c["component"] == "policy" for c in boosted["reason"]["score_breakdown"])
    assert {"rule_id": "handbook-first", "action": "boost"} in boosted["reason"]["policy"]
    redacted = next(c for c in body["output"]["citations"] if c["path"] == "finance/payroll.md")
    assert redacted["snippet"] == "" and redacted["snippet_span"] is None
    receipt = _receipt(ledger, body["position"])
    actions = {(f["rule_id"], f["action"]) for f in receipt["filters_applied"]}
    assert {("hr-private", "deny"), ("handbook-first", "boost"), ("finance-redacted", "redact")} <= actions
    # Restricted chunks are withheld before any policy rule looks at them (built in, counted,
    # never named): the bundle's own rule for them never fires for a caller without the scope.
    assert ("restricted-needs-scope", "deny") not in actions and receipt["withheld"] == 1
    assert receipt["policy_snapshot"]["bundle_yaml"] == BUNDLE
    assert receipt["search"]["top_k"] == 3
    # The scope exempts: with it, the restricted document may be cited.
    scoped = Caller("acme", "svc", frozenset({"retrieval.write", "knowledge.restricted.read"}))
    assert "handbook/restricted.md" in [
        c["path"] for c in _search(ctx, scoped, "board salary")["output"]["citations"]
    ]
    # Least privilege: the envelope's auth_scope narrows the caller's scopes.
    narrowed = _search(ctx, scoped, "board salary", auth_scope=["retrieval.write"])
    assert "handbook/restricted.md" not in [c["path"] for c in narrowed["output"]["citations"]]
    assert narrowed["status"] != "denied"
    assert _receipt(ledger, narrowed["position"])["task"]["auth_scope"] == ["retrieval.write"]
    only_hr = _search(ctx, ACME, "bands engineers reviewed yearly")
    assert only_hr["status"] == "denied" and "hr-private" in only_hr["output"]["gaps"][0]
    assert _receipt(ledger, only_hr["position"])["status"] == "denied"
    outside = _search(ctx, ACME, "salary", input={"target_roots": ["../etc"]})
    assert outside["status"] == "denied" and outside["errors"][0]["code"] == "denied.outside_allowlist"
    # Replaying under the frozen snapshot gives the same context hash.
    assert live_rules(ctx.lookups.live_policy("acme")) == bundle_rules(BUNDLE)
    again = rank(
        ctx,
        "acme",
        "salary",
        SearchRequest.model_validate(receipt["search"]),
        bundle_rules(receipt["policy_snapshot"]["bundle_yaml"]),
        frozenset(receipt["task"]["auth_scope"]),
        None,
    )
    assert again.context_hash == receipt["context_hash"]


def test_bm25_component_equals_bm25s_on_the_live_corpus(ledger: Ledger) -> None:
    ctx = ledger_context(ledger)
    files = corpus_files()
    ingest_corpus(ctx, ACME, {p: t for p, t in files.items() if p.startswith(("handbook/", "ja/", "zh/"))})
    assert ctx.search_index is not None
    position = ctx.search_index.refresh()
    rows = ledger.store.rows(
        f"SELECT * FROM {ledger.store.table('citeledger_rm_corpus')} WHERE tenant_id='acme' "
        "AND live_to_position IS NULL ORDER BY live_from_position, ordinal"
    )
    texts = [ledger.sealer.unseal(__import__("orjson").loads(r["text"]), tenant_id="acme") for r in rows]
    chunk_ids = [r["chunk_id"] for r in rows]
    tokenizer = bm25s_tokenizer()
    model = bm25s.BM25(method="lucene", k1=K1, b=B, dtype="float64")
    model.index(tokenizer.tokenize(texts, return_as="tuple", show_progress=False), show_progress=False)
    compared = 0
    for query in [
        "parental leave weeks",
        "learning budget conferences",
        "年假天数",
        "経費精算",
        "remote work",
    ]:
        run = _rank(ctx, "acme", query, position, top_k=10)
        assert run.status == "ok"
        ids = tokenizer.tokenize([query], return_as="ids", update_vocab=False, show_progress=False)[0]
        reference = np.asarray(model.get_scores(ids), dtype=np.float64)
        for hit in run.hits:
            ours = float(dict(hit.score_breakdown)["bm25"])
            assert abs(ours - reference[chunk_ids.index(hit.chunk_id)]) < 2e-6, (query, hit.path)
            compared += 1
    assert compared >= 10


def test_snippets_occur_verbatim_and_are_capped(ledger: Ledger) -> None:
    ctx = ledger_context(ledger)
    long_text = "# Guide\n\n" + " ".join(f"Sentence {i} about deployment windows." for i in range(200))
    _ingest(ctx, ACME, "engineering/guide.md", long_text)
    body = _search(ctx, ACME, "deployment windows")
    assert body["status"] == "ok" and body["output"]["citations"]
    for citation in body["output"]["citations"]:
        start, end = citation["snippet_span"]["start"], citation["snippet_span"]["end"]
        assert 0 < len(citation["snippet"]) <= ranking.SNIPPET_CHARS
        assert citation["snippet"] in long_text and end - start == len(citation["snippet"])
        assert any(t.text == "deploy" for t in text_terms(citation["snippet"]))


def test_route_on_a_loopback_server(ledger_config: Any) -> None:
    config = api_config(ledger_config)
    tokens = make_tokens(config)
    with (
        LoopbackServer(config) as server,
        loopback_http.client(base_url=server.base_url, timeout=30) as client,
    ):

        def auth(who: str) -> dict[str, str]:
            return {"Authorization": f"Bearer {tokens[who]}"}

        for path, text in [
            ("handbook/leave.md", "# Leave\n\n## Parental\n\nParental leave is 20 weeks."),
            ("zh/年假.md", "# 年假\n\n正式员工每年享有十五天带薪年假。"),
        ]:
            assert (
                client.post(
                    "/v1/documents", json={"path": path, "text": text}, headers=auth("admin")
                ).status_code
                == 201
            )
        envelope = {
            "trace_id": "trace-1",
            "task_id": "task-1",
            "deadline_ms": 5000,
            "auth_scope": ["retrieval.write"],
            "idempotency_key": "search-1",
            "input": {"query": "parental leave", "top_k": 3},
        }
        response = client.post("/v1/search", json=envelope, headers=auth("writer"))
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["status"] == "ok" and body["task_id"] == "task-1"
        citation = body["output"]["citations"][0]
        assert citation["path"] == "handbook/leave.md" and "Parental leave" in citation["snippet"]
        assert citation["locator"]["heading_path"] == "Leave / Parental"
        assert body["metrics"]["hits"] == 1 and body["metrics"]["files_scanned"] >= 1
        read = client.get(f"/v1/citations/{citation['citation_id']}", headers=auth("admin"))
        assert read.status_code == 200, read.text
        again = client.post("/v1/search", json=envelope, headers=auth("writer")).json()
        assert again["dedup"] is True and again["receipt_id"] == body["receipt_id"]
        chinese = client.post(
            "/v1/search", json={"input": {"query": "年假有几天"}}, headers=auth("writer")
        ).json()
        assert chinese["status"] == "ok" and chinese["output"]["citations"][0]["path"] == "zh/年假.md"
        absent = client.post(
            "/v1/search", json={"input": {"query": "submarine reactor"}}, headers=auth("writer")
        ).json()
        assert absent["status"] == "no_hit" and absent["output"]["gaps"] and absent["receipt_id"]
        bad = client.post("/v1/search", json={"input": {"query": "x", "top_k": 500}}, headers=auth("writer"))
        assert bad.status_code == 400 and "top_k" in bad.json()["error"]["message"]
        assert client.post("/v1/search", json=envelope, headers=auth("reader")).status_code == 403
        other = client.post(
            "/v1/search", json={"input": {"query": "parental leave"}}, headers=auth("other")
        ).json()
        assert other["status"] == "no_hit"
        started = time.monotonic()
        assert client.get("/v1/healthz").status_code == 200 and time.monotonic() - started < 10


def test_two_ledgers_rank_the_same_corpus_the_same(backend: str, tmp_path: Any) -> None:
    """Two ledgers (different master keys, so different term hashes and ciphertext) over the
    same files: the same chunk ids (derived from content), paths, locators, scores,
    breakdowns, snippets, spans and context hashes. Version ids are minted per ingest, so
    they are the one field left out (the context hash does not cover them)."""
    from tests.conftest import fresh_config

    files = {
        p: t
        for p, t in corpus_files().items()
        if p.startswith(("handbook/", "zh/", "ja/", "engineering/teams"))
    }
    results = []
    for run in range(2):
        with fresh_config(backend, tmp_path / f"run-{run}") as config:
            ledger = Ledger(config)
            try:
                ctx = ledger_context(ledger)
                ingest_corpus(ctx, ACME, files)
                assert ctx.search_index is not None
                position = ctx.search_index.refresh()
                outcome = []
                for query in [*QUERIES, "on-call rotation", "runbook restart"]:
                    ranked = _rank(ctx, "acme", query, position)
                    hits = [
                        (
                            h.chunk_id,
                            h.document_id,
                            h.path,
                            h.start_line,
                            h.end_line,
                            h.score,
                            h.score_breakdown,
                            h.term_scores,
                            h.snippet,
                            h.snippet_span,
                            h.heading_path,
                        )
                        for h in ranked.hits
                    ]
                    outcome.append((ranked.status, ranked.context_hash, hits))
                results.append(outcome)
            finally:
                ledger.close()
    assert results[0] == results[1]
    assert sum(len(hits) for _, _, hits in results[0]) >= 10


def test_replay_of_a_ledger_run_search_reproduces_its_context_hash(ledger: Ledger) -> None:
    """The replay use case (h/replay) re-runs `rank` as of the receipt's position under its
    frozen policy: integrity ok, and the data drift after an edit shows up as a change."""
    from ledger.usecases.replay import replay

    ctx = ledger_context(ledger)
    publish_policy(ctx, ACME, PolicyBundleIn(bundle_yaml=BUNDLE))
    _ingest(ctx, ACME, "handbook/salary.md", "# Salary\n\nSalary is paid on the 25th; bands are public.")
    _ingest(ctx, ACME, "hr/salaries.md", "# Salaries\n\nSalary bands for engineers are reviewed yearly.")
    body = _search(ctx, ACME, "salary bands")
    assert body["status"] == "ok"
    _ingest(ctx, ACME, "handbook/salary.md", "# Salary\n\nSalary is paid on the 28th now; bands are public.")
    answer = replay(ctx, ACME, body["receipt_id"]).body
    assert answer["integrity"] == "ok", answer
    assert answer["diff"]["as_of_original"]["context_hash"]["changed"] is False
    assert answer["diff"]["data_drift"]["context_hash"]["changed"] is True


def test_a_view_taken_before_a_load_stays_consistent_while_the_index_grows(ledger: Ledger) -> None:
    """Searches run on many threads: a view taken at one position must keep answering, the
    same, after another search loaded newer chunks into the shared in-memory index (it once
    indexed its live mask with the new rows: IndexError, a 500)."""
    ctx = ledger_context(ledger)
    _ingest(ctx, ACME, "kb/zebra.md", "# Zebra\n\nZebra crossings are painted white.")
    index = ctx.search_index
    assert index is not None
    old = index.view("acme", index.refresh())
    before = [array.tolist() for array in old.body_postings("zebra")]
    assert before[0], "the term is indexed"
    for n in range(3):
        _ingest(ctx, ACME, f"kb/more-{n}.md", f"# More {n}\n\nZebra herds number {n} hundred.")
    newer = index.view("acme", index.refresh())
    assert len(newer.body_postings("zebra")[0]) == 4
    assert [array.tolist() for array in old.body_postings("zebra")] == before
