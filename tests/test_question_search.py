"""Question text search (`q`): receipts whose question holds every word, on both stores.

The read model (`projections/question_index.py`) through the use cases; the HTTP route with
its scope, its recorded reads and its refusals through a real server on loopback; the CLI as
a subprocess; MCP through the SDK's client over both transports. What erasure and the
retention sweep leave of the index: tests/test_erasure_residue.py."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from ledger.config import LedgerConfig
from ledger.usecases.context import Caller
from ledger.usecases.ports import ReceiptFilter
from ledger.usecases.receipt_reads import receipts_page
from ledger.usecases.replay import replay
from ledger.usecases.scopes import SCOPES
from ledger.writing.application import Ledger
from ledger.writing.group_commit import GroupCommitter
from ledger.writing.question_handover import handed_over, handed_over_hashes
from projections.queries import ReadModels
from projections.question_index import QUESTION_KEYS_TABLE, QUESTION_WORDS_TABLE, QuestionIndexProjection
from tests.api_support import serving
from tests.factories import TENANT, UseCases
from tests.mcp_support import Ledger as McpLedger
from tests.mcp_support import answer, refusal
from tests.server_process import run_cli, server_env
from tests.test_content_reads import Http
from tests.test_search import _ingest, _search

QUESTIONS = (
    "how many days of parental leave do I get?",
    "parental leave for adoptive parents",
    "how long are audit logs kept?",
    "who approves parental leave requests?",
)
AUDITOR = Caller(TENANT, "auditor", frozenset(SCOPES))


def _found(cases: UseCases, q: str, **page: Any) -> list[str]:
    """The questions `q` finds, in the page's order."""
    return [_question(cases, r["position"]) for r in _listed(cases, ReceiptFilter(q=q), **page)]


def _listed(cases: UseCases, flt: ReceiptFilter, **page: Any) -> list[dict[str, Any]]:
    """The auditor's first page of receipts (50 unless `page` says otherwise)."""
    page = {"cursor": None, "limit": 50, **page}
    receipts: list[dict[str, Any]] = receipts_page(
        cases.ctx, ReadModels(cases.ledger.store), AUDITOR, flt, **page
    )["receipts"]
    return receipts


def _question(cases: UseCases, position: int) -> str:
    event = cases.ledger.get(position)
    assert event is not None
    return cases.ledger.sealer.unseal(event.payload["query"], tenant_id=event.tenant_id)


def _index_rows(ledger: Ledger, position: int) -> int:
    store = ledger.store
    words = store.rows(
        f"SELECT COUNT(*) AS n FROM {store.table(QUESTION_WORDS_TABLE)} WHERE receipt_position=?", (position,)
    )
    keys = store.rows(
        f"SELECT COUNT(*) AS n FROM {store.table(QUESTION_KEYS_TABLE)} WHERE position=?", (position,)
    )
    return int(words[0]["n"]) + int(keys[0]["n"])


def test_every_word_must_be_in_the_question_newest_first_paged(ledger: Ledger) -> None:
    cases = UseCases(ledger)
    doc = cases.ingest("Parental leave is twelve weeks. Audit logs are kept for 180 days.")
    for question in QUESTIONS:
        cases.retrieve(doc, question)
    cases.retrieve(cases.ingest("Other tenant text.", tenant="globex"), "parental leave", tenant="globex")

    limit = {"cursor": None, "limit": 50}
    assert _found(cases, "parental leave", order="desc", **limit) == [
        QUESTIONS[3],
        QUESTIONS[1],
        QUESTIONS[0],
    ]
    assert _found(cases, "Leaves PARENTAL", order="asc", **limit) == [
        QUESTIONS[0],
        QUESTIONS[1],
        QUESTIONS[3],
    ]
    assert _found(cases, "adoptive leave", order="desc", **limit) == [QUESTIONS[1]]
    assert _found(cases, "adoptive audit", order="desc", **limit) == []  # AND, not OR
    assert _found(cases, "vacation", order="desc", **limit) == []

    # a page at a time, with the list's cursor
    pages, cursor = [], None
    while True:
        body = receipts_page(
            cases.ctx,
            ReadModels(ledger.store),
            AUDITOR,
            ReceiptFilter(q="parental"),
            cursor=cursor,
            limit=1,
            order="desc",
        )
        pages += [_question(cases, r["position"]) for r in body["receipts"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert pages == [QUESTIONS[3], QUESTIONS[1], QUESTIONS[0]]

    # with the other filters of the list
    narrowed = ReceiptFilter(q="parental", to_position=doc.position + 2)
    body = receipts_page(
        cases.ctx, ReadModels(ledger.store), AUDITOR, narrowed, cursor=None, limit=50, order="asc"
    )
    assert [_question(cases, r["position"]) for r in body["receipts"]] == [QUESTIONS[0], QUESTIONS[1]]

    # the index holds keyed hashes only: no word of a question in any of its rows
    for table in (QUESTION_WORDS_TABLE, QUESTION_KEYS_TABLE):
        dumped = json.dumps(
            [list(r) for r in ledger.store.rows(f"SELECT * FROM {ledger.store.table(table)}")]
        )
        assert "parental" not in dumped and "leave" not in dumped


def test_q_is_the_question_and_the_cited_document_narrows_it(ledger: Ledger) -> None:
    """`q` matches the question's words, never the cited text or path (the receipt's
    citations are found by their document: a path's documents, then `document_id`); the two
    together answer "asked about X and cited Y"."""
    cases = UseCases(ledger)
    leave = cases.ingest("Parental leave is twelve weeks.", path="handbook/benefits.md")
    logs = cases.ingest("Audit logs are kept for 180 days.", path="ops/audit-logs.md")
    cases.retrieve(leave, QUESTIONS[0])
    cases.retrieve(logs, QUESTIONS[3])  # asks about parental leave, cites the logs' page
    cases.retrieve(leave, "how long is it?")  # cites "parental leave", asks about neither word
    limit = {"cursor": None, "limit": 50}
    assert _found(cases, "parental leave", order="asc", **limit) == [QUESTIONS[0], QUESTIONS[3]]
    assert _found(cases, "twelve weeks", order="asc", **limit) == []  # the snippet's words
    assert _found(cases, "handbook benefits", order="asc", **limit) == []  # the cited path's words
    cited = ReceiptFilter(q="parental leave", document_id=leave.payload["document_id"])
    assert [_question(cases, r["position"]) for r in _listed(cases, cited)] == [QUESTIONS[0]]


def test_a_rebuild_indexes_what_the_incremental_model_did(ledger: Ledger) -> None:
    cases = UseCases(ledger)
    doc = cases.ingest("Parental leave is twelve weeks.")
    for question in QUESTIONS:
        cases.retrieve(doc, question)
    store = ledger.store

    def snapshot() -> list[tuple[Any, ...]]:
        return sorted(tuple(r) for r in store.rows(f"SELECT * FROM {store.table(QUESTION_WORDS_TABLE)}"))

    before = snapshot()
    cases.runner.rebuild(["question_index"])
    assert snapshot() == before and len(before) > 10


def test_http_q_needs_audit_content_and_every_search_is_a_recorded_read(ledger_config: LedgerConfig) -> None:
    with serving(ledger_config) as (server, config, tokens):
        from tests.test_content_reads import _tokens

        http = Http(server.base_url, {**tokens, **_tokens(config)})
        doc = http.document("handbook/retention.md")
        receipts = [http.retrieval(doc, query=q) for q in QUESTIONS]

        # Without audit.content: the same 403 whether or not anything matches, nothing read.
        refused = [http.get("reader", "/v1/receipts", q=q) for q in ("parental leave", "nothing-matches")]
        assert {r.status_code for r in refused} == {403}
        assert refused[0].json()["error"] == refused[1].json()["error"]
        assert "audit.content" in refused[0].json()["error"]["message"]
        assert "receipts" not in refused[0].text and "next_cursor" not in refused[0].text
        assert http.content_reads() == []

        found = http.get("auditor", "/v1/receipts", q="parental leave", order="desc")
        assert found.status_code == 200, found.text
        ids = [r["receipt_id"] for r in found.json()["receipts"]]
        assert ids == [receipts[i]["receipt_id"] for i in (3, 1, 0)]
        [read] = http.content_reads()
        assert read["payload"] == {
            "positions": [receipts[i]["position"] for i in (3, 1, 0)],
            "receipt_ids": ids,
            "citation_ids": [],
            "searched_words": 2,
        }
        assert "parental" not in json.dumps(read)

        # A search that finds nothing is recorded too.
        none = http.get("auditor", "/v1/receipts", q="vacation")
        assert none.status_code == 200 and none.json()["receipts"] == []
        assert http.content_reads()[-1]["payload"]["positions"] == []

        # Bad q: 400 where the schema refuses it, 422 where the question index's rule does (the
        # contract's split), each naming the rule, nothing recorded; another tenant finds nothing.
        reads = len(http.content_reads())
        for bad, rule, status in (
            ("x" * 201, "q", 400),
            ("the and of", "no searchable word", 422),
            (" ".join(f"w{i}x" for i in range(9)), "at most 8", 422),
        ):
            refused_q = http.get("auditor", "/v1/receipts", q=bad)
            assert refused_q.status_code == status and rule in refused_q.text, refused_q.text
        assert len(http.content_reads()) == reads
        theirs = http.get("other", "/v1/receipts", q="parental leave")
        assert theirs.status_code == 200 and theirs.json()["receipts"] == []


def test_cli_query_text_local_and_over_http(ledger_config: LedgerConfig) -> None:
    with serving(ledger_config) as (server, _, tokens):
        http = Http(server.base_url, tokens)
        doc = http.document("handbook/retention.md")
        for question in QUESTIONS:
            http.retrieval(doc, query=question)
        env = server_env(ledger_config, "unused-bootstrap-token-0000000000")
        local = run_cli(
            [
                "receipts",
                "list",
                "--query-text",
                "parental leave",
                "--json",
                "--data-dir",
                str(ledger_config.data_dir),
                "--tenant",
                "acme",
            ],
            env,
        )
        assert local.returncode == 0, local.stderr
        assert len(local.stdout.splitlines()) == 3
        remote = run_cli(
            [
                "receipts",
                "list",
                "--query-text",
                "adoptive",
                "--json",
                "--queries",
                "--url",
                server.base_url,
                "--token",
                tokens["admin"],
            ],
            env,
        )
        assert remote.returncode == 0, remote.stderr
        [line] = remote.stdout.splitlines()
        assert json.loads(line)["content"]["query"]["text"] == QUESTIONS[1]
        refused = run_cli(
            [
                "receipts",
                "list",
                "--query-text",
                "parental",
                "--url",
                server.base_url,
                "--token",
                tokens["reader"],
            ],
            env,
        )
        assert refused.returncode != 0 and "audit.content" in refused.stdout + refused.stderr
        bad = run_cli(
            ["receipts", "list", "--query-text", "the", "--data-dir", str(ledger_config.data_dir)], env
        )
        assert bad.returncode != 0 and "no searchable word" in bad.stdout + bad.stderr


@pytest.mark.parametrize("transport", ("http", "stdio"))
def test_mcp_list_receipts_q(ledger_config: LedgerConfig, transport: str) -> None:
    with serving(ledger_config) as (server, config, tokens):
        ledger = McpLedger(config, tokens, server)
        http = Http(server.base_url, tokens)
        doc = http.document("handbook/retention.md")
        recorded = [http.retrieval(doc, query=q) for q in QUESTIONS]

        async def scenario() -> dict[str, Any]:
            async with ledger.client(transport) as client:
                found = answer(await client.call_tool("list_receipts", {"q": "adoptive parents"}))
            async with ledger.client(transport, "reader") as reader:
                denied = refusal(await reader.call_tool("list_receipts", {"q": "parental"}))
            return {"found": found, "denied": denied}

        out = anyio.run(scenario)
        assert [r["receipt_id"] for r in out["found"]["receipts"]] == [recorded[1]["receipt_id"]]
        assert out["denied"]["http_status"] == 403 and "receipts" not in json.dumps(out["denied"])


@pytest.mark.parametrize("width", (1280, 390))
def test_console_search_box_in_chromium(ledger_config: LedgerConfig, width: int) -> None:
    """The receipts page's search box (audit.content only), at a desktop and a phone width:
    it finds by the question's words, keeps the words in the box, and a reader has no box."""
    with serving(ledger_config) as (server, config, tokens):
        from tests.test_console_browser import _browser, _sign_in
        from tests.test_content_reads import _tokens

        tokens = {**tokens, **_tokens(config)}
        http = Http(server.base_url, tokens)
        doc = http.document("handbook/retention.md")
        for question in QUESTIONS:
            http.retrieval(doc, query=question)
        with _browser() as browser:
            page = browser.new_page(viewport={"width": width, "height": 800})
            _sign_in(page, server.base_url, tokens["auditor"], "/console/receipts")
            box = page.get_by_label("Question has the words")
            box.scroll_into_view_if_needed()
            where = box.bounding_box()
            assert box.is_visible() and where is not None and where["x"] + 40 < width
            box.fill("adoptive parents")
            page.get_by_role("button", name="Filter").click()
            page.wait_for_load_state()
            rows = page.locator("table.receipts tbody tr")
            assert rows.count() == 1 and QUESTIONS[1] in rows.first.inner_text()
            assert page.get_by_label("Question has the words").input_value() == "adoptive parents"
            reader = browser.new_page(viewport={"width": width, "height": 800})
            _sign_in(reader, server.base_url, tokens["reader"], "/console/receipts")
            assert reader.get_by_label("Question has the words").count() == 0
            reader.goto(server.base_url + "/console/receipts?q=parental")
            assert "audit.content" in reader.content() and QUESTIONS[0] not in reader.content()


def test_a_batch_hands_its_question_hashes_over_and_a_rebuild_agrees(ledger: Ledger) -> None:
    """Receipts a batch signs are indexed from the hashes the writer handed over (their
    questions neither unsealed nor tokenized again); a rebuild, which unseals every one, ends
    with the same rows, and nothing of the hand-over outlives the batch."""
    cases = UseCases(ledger)
    doc = cases.ingest("Parental leave is twelve weeks.")
    index = cases.runner.projection("question_index")
    assert isinstance(index, QuestionIndexProjection)
    handed = index.handed_over
    receipts = cases.retrieve_batch(doc, list(QUESTIONS))
    assert index.handed_over - handed == len(QUESTIONS)
    nonces = [r.payload["query"]["nonce"] for r in receipts]
    assert [handed_over_hashes(TENANT, nonce) for nonce in nonces] == [None] * len(QUESTIONS)
    limit = {"cursor": None, "limit": 50}
    assert _found(cases, "parental leave", order="asc", **limit) == [QUESTIONS[0], QUESTIONS[1], QUESTIONS[3]]
    assert _found(cases, "audit logs", order="asc", **limit) == [QUESTIONS[2]]
    store = ledger.store

    def snapshot() -> list[list[tuple[Any, ...]]]:
        return [
            sorted(tuple(r) for r in store.rows(f"SELECT * FROM {store.table(table)}"))
            for table in (QUESTION_WORDS_TABLE, QUESTION_KEYS_TABLE)
        ]

    live = snapshot()
    handed = index.handed_over
    cases.runner.rebuild(["question_index"])
    assert index.handed_over == handed  # the rebuild unsealed each question
    assert snapshot() == live and len(live[0]) > 10 and live[1]


@pytest.mark.parametrize("writer", ["direct", "group_commit"])
def test_every_path_that_records_a_receipt_hands_its_question_over(ledger: Ledger, writer: str) -> None:
    """One retrieval, a batch, a ledger-run search and its replay, through the command line's
    writer and the server's group committer (`write` per request, `write_all` per batch):
    every receipt is indexed from the words hashed before sealing, none unsealed here."""
    cases = UseCases(ledger)
    committer = GroupCommitter(ledger) if writer == "group_commit" else None
    if committer is not None:
        cases.ctx.write, cases.ctx.write_all = committer.write, committer.write_all
    try:
        index = cases.runner.projection("question_index")
        assert isinstance(index, QuestionIndexProjection)
        doc = cases.ingest("Parental leave is twelve weeks.")
        searcher = Caller(TENANT, "svc-search", frozenset({"retrieval.write", "replay.run"}))
        _ingest(
            cases.ctx, searcher, "hr/salary.md", "# Salary\n\nSalary bands are published every January.\n"
        )
        handed = index.handed_over
        cases.retrieve(doc, QUESTIONS[0])
        cases.retrieve_batch(doc, [QUESTIONS[1], QUESTIONS[2]])
        searched = _search(cases.ctx, searcher, "when are salary bands published")
        replayed = replay(cases.ctx, searcher, searched["receipt_id"]).body
        assert replayed["replay_receipt_id"] is not None
        assert index.handed_over - handed == 5  # 1 + 2 + the search's + the replay's
        limit = {"cursor": None, "limit": 50}
        assert _found(cases, "parental leave", order="asc", **limit) == [QUESTIONS[0], QUESTIONS[1]]
        assert [r["mode"] for r in _listed(cases, ReceiptFilter(q="salary bands"))] == [
            "as_of_replay",
            "live",
        ]
    finally:
        if committer is not None:
            committer.close()


def test_the_hand_over_ends_with_its_batch_even_when_it_fails() -> None:
    hashes = {(TENANT, "nonce-1"): (1, 2, 3)}
    with handed_over([None, hashes]):
        assert handed_over_hashes(TENANT, "nonce-1") == (1, 2, 3)
        assert handed_over_hashes("globex", "nonce-1") is None  # another tenant's: never
    assert handed_over_hashes(TENANT, "nonce-1") is None
    with pytest.raises(RuntimeError), handed_over([hashes]):
        raise RuntimeError("the batch's transaction failed")
    assert handed_over_hashes(TENANT, "nonce-1") is None
