"""Replay of searches the ledger ran itself (`citeledger-bm25@N` receipts made through
`POST /v1/search`), through the real route on a real loopback server, on SQLite and
PostgreSQL: integrity (ok / mismatch / unverifiable), data drift, policy drift, the frozen
snapshot, `at_position`, the refusals and the replay receipt. The `external:` receipts'
replay is covered by tests/test_api_replay.py; the as-of ranking itself by
tests/test_search.py."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from ledger.config import LedgerConfig
from ledger.usecases.ranking import ENGINE
from projections.receipt_index import RECEIPTS_TABLE
from projections.search_index import SEARCH_CHUNKS_TABLE
from tests.test_api_replay import ALLOW_ALL, Server, _refused

QUERY = "salary bands"
FILES = {
    "handbook/salary.md": "# Salary\n\nSalary bands are published every January.\n",
    "hr/salaries.md": "# Salaries\n\nSalary bands for engineers are reviewed yearly.\n",
    "finance/payroll.md": "# Payroll\n\nPayroll runs monthly; salary bands set the ranges.\n",
}
DENY_HR = "version: deny-hr\nrules:\n  - id: no-hr\n    action: deny\n    match: {paths: ['hr/**']}\n"


class SearchServer(Server):
    def corpus(self) -> dict[str, str]:
        """Ingest the three files; their document ids by path."""
        return {path: self.document(text, path=path)["document_id"] for path, text in FILES.items()}

    def search(self, query: str = QUERY) -> dict[str, Any]:
        response = self.client.post(
            "/v1/search", json={"input": {"query": query, "top_k": 5}}, headers=self.headers()
        )
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        assert body["receipt_id"]
        return body

    def receipt_view(self, receipt_id: str) -> dict[str, Any]:
        response = self.client.get(f"/v1/receipts/{receipt_id}", headers=self.headers())
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body


@pytest.fixture
def server(ledger_config: LedgerConfig) -> Iterator[SearchServer]:
    with SearchServer.running(ledger_config) as running:
        yield running


def _hashes(body: dict[str, Any]) -> dict[str, tuple[str, str, bool]]:
    return {
        run: (d["context_hash"]["original"], d["context_hash"]["replay"], d["context_hash"]["changed"])
        for run, d in body["diff"].items()
    }


def _chunk_ids(entries: list[dict[str, Any]]) -> list[str]:
    return [e["chunk_id"] for e in entries]


def _no_change(envelope: dict[str, Any]) -> bool:
    return (
        envelope["context_hash"]["changed"] is False
        and envelope["selected_entries"]["added"] == []
        and envelope["selected_entries"]["removed"] == []
        and envelope["filters_applied"] == {"added": [], "removed": []}
    )


def test_unchanged_corpus_reproduces_in_all_three_runs(server: SearchServer) -> None:
    server.corpus()
    searched = server.search()
    assert searched["status"] == "ok" and len(searched["output"]["citations"]) == 3
    receipt_id = searched["receipt_id"]
    body = server.replayed(receipt_id)
    assert body["engine"] == ENGINE
    assert body["integrity"] == "ok" and body["integrity_reason"] is None
    assert body["corpus_position"] == searched["corpus_position"]
    assert body["at_position"] == server.services.ledger.size - 2  # before its own two entries
    for run, (original, replay, changed) in _hashes(body).items():
        assert original == replay == searched["context_hash"] and changed is False, run
        assert body["diff"][run]["selected_entries"]["common"] == 3
    assert all(_no_change(envelope) for envelope in body["diff"].values())
    assert not any(c["snippet"] in str(body) for c in searched["output"]["citations"])

    # The replay receipt: signed, as_of_replay, linked; a ReplayRecorded entry joins them.
    replay_view = server.receipt_view(body["replay_receipt_id"])
    assert replay_view["mode"] == "as_of_replay" and replay_view["parent_receipt_id"] == receipt_id
    assert replay_view["engine"] == ENGINE
    assert replay_view["context_hash"] == searched["context_hash"]
    assert [c["chunk_id"] for c in replay_view["citations"]] == [
        c["chunk_id"] for c in searched["output"]["citations"]
    ]
    # Its citations are sealed like a search's: readable through the citation route.
    cited = server.client.get(
        f"/v1/citations/{replay_view['citations'][0]['citation_id']}", headers=server.headers()
    )
    assert cited.status_code == 200, cited.text
    original_view = server.receipt_view(receipt_id)
    assert [r["receipt_id"] for r in original_view["replay_chain"]["replays"]] == [body["replay_receipt_id"]]
    events = server.client.get("/v1/events?type=ReplayRecorded&order=asc", headers=server.headers()).json()[
        "events"
    ]
    link = events[-1]["payload"]
    assert (link["original_receipt_id"], link["replay_receipt_id"]) == (receipt_id, body["replay_receipt_id"])
    assert link["integrity_finding"] is None and link["summary"]["entries_common"] == 3
    # Replay of the replay is refused.
    _refused(server.replay(body["replay_receipt_id"]), 422, "unreplayable.nested_replay")


def test_document_edited_after_the_receipt_is_data_drift(server: SearchServer) -> None:
    ids = server.corpus()
    searched = server.search()
    before = {c["path"]: c["chunk_id"] for c in searched["output"]["citations"]}
    edited = server.document(
        "# Salary\n\nSalary bands are published every January and every July.\n",
        path="handbook/salary.md",
        document_id=ids["handbook/salary.md"],
    )
    body = server.replayed(searched["receipt_id"])
    assert body["integrity"] == "ok"
    assert _no_change(body["diff"]["as_of_original"])
    drift = body["diff"]["data_drift"]
    assert drift["context_hash"]["changed"] is True
    assert _chunk_ids(drift["selected_entries"]["removed"]) == [before["handbook/salary.md"]]
    assert _chunk_ids(drift["selected_entries"]["added"]) == [edited["chunks"][0]["chunk_id"]]
    assert drift["selected_entries"]["added"][0]["version_id"] == edited["version_id"]
    # The two untouched files are still cited (their scores moved with the corpus: common).
    common = {e["chunk_id"]: e for e in drift["selected_entries"]["common_entries"]}
    assert set(common) == {before["hr/salaries.md"], before["finance/payroll.md"]}
    assert any(e["old_score"] != e["new_score"] for e in common.values())
    assert _no_change(body["diff"]["policy_drift"])  # no bundle then or now


def test_policy_published_after_the_receipt_is_policy_drift_only(server: SearchServer) -> None:
    server.publish(ALLOW_ALL)
    server.corpus()
    searched = server.search()
    hr_chunk = next(c["chunk_id"] for c in searched["output"]["citations"] if c["path"] == "hr/salaries.md")
    server.publish(DENY_HR)
    body = server.replayed(searched["receipt_id"])
    assert body["integrity"] == "ok"
    assert body["live_policy_hash"] == hashlib.sha256(DENY_HR.encode()).hexdigest()
    assert _no_change(body["diff"]["as_of_original"]) and _no_change(body["diff"]["data_drift"])
    policy = body["diff"]["policy_drift"]
    assert policy["context_hash"]["changed"] is True
    assert _chunk_ids(policy["selected_entries"]["removed"]) == [hr_chunk]
    assert policy["selected_entries"]["added"] == [] and policy["selected_entries"]["common"] == 2
    assert policy["filters_applied"]["added"] == [
        {"rule_id": "no-hr", "chunk_id": hr_chunk, "action": "deny"}
    ]
    # The replay receipt records the snapshot policy's answer (the data drift run).
    replay_view = server.receipt_view(body["replay_receipt_id"])
    assert replay_view["context_hash"] == searched["context_hash"]
    assert replay_view["policy_bundle_hash"] == hashlib.sha256(ALLOW_ALL.encode()).hexdigest()


def test_bundle_overwritten_after_the_receipt_the_snapshot_still_decides(server: SearchServer) -> None:
    server.publish(DENY_HR)
    server.corpus()
    searched = server.search()
    assert {c["path"] for c in searched["output"]["citations"]} == {
        "handbook/salary.md",
        "finance/payroll.md",
    }
    server.publish(ALLOW_ALL)  # the deny bundle is no longer live anywhere
    body = server.replayed(searched["receipt_id"])
    assert body["integrity"] == "ok"
    assert _no_change(body["diff"]["as_of_original"]) and _no_change(body["diff"]["data_drift"])
    policy = body["diff"]["policy_drift"]
    assert [e["path"] for e in policy["selected_entries"]["added"]] == ["hr/salaries.md"]
    assert [f["rule_id"] for f in policy["filters_applied"]["removed"]] == ["no-hr"]


def test_tampered_bundle_yaml_of_a_search_receipt_is_refused(server: SearchServer) -> None:
    server.publish(DENY_HR)
    server.corpus()
    receipt_id = server.search()["receipt_id"]
    size = server.services.ledger.size
    forged = {
        "bundle_hash": hashlib.sha256(ALLOW_ALL.encode()).hexdigest(),
        "bundle_yaml": ALLOW_ALL,
        "captured_at": "2026-01-01T00:00:00Z",
    }
    table = server.services.ledger.store.table(RECEIPTS_TABLE)
    server.execute(
        f"UPDATE {table} SET policy_snapshot=? WHERE receipt_id=?",
        (orjson.dumps(forged, option=orjson.OPT_SORT_KEYS).decode(), receipt_id),
    )
    body = _refused(server.replay(receipt_id), 422, "unreplayable.invalid_snapshot")
    assert ALLOW_ALL not in body["error"]["message"]
    assert server.services.ledger.size == size  # nothing written


def test_an_erased_document_is_named_and_the_rest_reproduced(server: SearchServer) -> None:
    """One of three cited files is erased: the other two are reproduced in order, so the verdict
    says so and names the erased file by path, with the erasure's position, time and basis."""
    ids = server.corpus()
    searched = server.search()
    erased = server.client.post(
        "/v1/erasures", json={"document_id": ids["hr/salaries.md"]}, headers=server.headers()
    )
    assert erased.status_code == 200, erased.text
    scrubbed = server.client.get("/v1/events?type=RetentionScrubbed", headers=server.headers()).json()
    [scrub] = scrubbed["events"]
    body = server.replayed(searched["receipt_id"])
    assert body["integrity"] == "reproduced_apart_from_erased"
    assert body["integrity_reason"] == {
        "cause": "erased_after_receipt",
        "document_ids": [ids["hr/salaries.md"]],
        "erased": [
            {
                "document_id": ids["hr/salaries.md"],
                "path": "hr/salaries.md",
                "erased_at": scrub["recorded_at"],
                "erased_position": scrub["position"],
                "basis": "erasure_request",
            }
        ],
    }
    # Both runs lack the erased text now: the as-of run shows it as removed, honestly.
    for run in ("as_of_original", "data_drift"):
        envelope = body["diff"][run]
        assert envelope["context_hash"]["changed"] is True
        assert [e["path"] for e in envelope["selected_entries"]["removed"]] == ["hr/salaries.md"]
    events = server.client.get("/v1/events?type=ReplayRecorded&order=asc", headers=server.headers()).json()[
        "events"
    ]
    # Not a finding against the ledger, but recorded as what it is.
    assert events[-1]["payload"]["integrity_finding"] == "reproduced_apart_from_erased"


def test_a_receipt_that_cited_only_erased_text_is_unverifiable(server: SearchServer) -> None:
    """The erased text was the whole outcome: nothing is left to reproduce."""
    ids = server.corpus()
    searched = server.search("engineers reviewed yearly")
    assert {c["path"] for c in searched["output"]["citations"]} == {"hr/salaries.md"}
    erased = server.client.post(
        "/v1/erasures", json={"document_id": ids["hr/salaries.md"]}, headers=server.headers()
    )
    assert erased.status_code == 200, erased.text
    body = server.replayed(searched["receipt_id"])
    assert body["integrity"] == "unverifiable"
    assert body["integrity_reason"]["cause"] == "erased_after_receipt"
    assert [e["path"] for e in body["integrity_reason"]["erased"]] == ["hr/salaries.md"]
    events = server.client.get("/v1/events?type=ReplayRecorded&order=asc", headers=server.headers()).json()[
        "events"
    ]
    assert events[-1]["payload"]["integrity_finding"] == "unverifiable.erased_after_receipt"


def test_a_corrupted_search_index_is_an_integrity_mismatch(
    server: SearchServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing was erased, yet the as-of run differs: a real finding, logged with ids only."""
    server.corpus()
    searched = server.search()
    store = server.services.ledger.store
    server.execute(
        f"UPDATE {store.table(SEARCH_CHUNKS_TABLE)} SET length=length+40 WHERE path=?", ("hr/salaries.md",)
    )
    server.services.context.search_index.forget()
    with caplog.at_level(logging.WARNING, logger="citeledger.replay"):
        body = server.replayed(searched["receipt_id"])
    assert body["integrity"] == "mismatch" and body["integrity_reason"] is None
    # The same chunks with other scores (and so maybe in another order): the scores that did
    # not reproduce are listed apart; they alone make it a mismatch when the order holds.
    original = body["diff"]["as_of_original"]
    changes = original["changes"]
    assert (changes["membership"], changes["text"], changes["scores"]) == (False, False, True)
    assert original["score_changes"]
    assert original["context_hash"]["changed"] is changes["order"]
    [message] = [r.getMessage() for r in caplog.records if "integrity mismatch" in r.getMessage()]
    assert searched["receipt_id"] in message and QUERY not in message and "salary" not in message.lower()
    events = server.client.get("/v1/events?type=ReplayRecorded&order=asc", headers=server.headers()).json()[
        "events"
    ]
    assert events[-1]["payload"]["integrity_finding"] == "context_hash_mismatch"


def test_at_position_replays_against_a_later_state(server: SearchServer) -> None:
    ids = server.corpus()
    searched = server.search()
    server.document(
        "# Salary\n\nSalary bands are published every January and every July.\n",
        path="handbook/salary.md",
        document_id=ids["handbook/salary.md"],
    )
    middle = server.search()  # what the corpus answered between the two edits
    server.document(
        "# Salary\n\nSalary is paid monthly.\n",
        path="handbook/salary.md",
        document_id=ids["handbook/salary.md"],
    )
    then = server.replayed(searched["receipt_id"], at_position=middle["corpus_position"])
    assert then["integrity"] == "ok" and then["at_position"] == middle["corpus_position"]
    assert then["diff"]["data_drift"]["context_hash"]["replay"] == middle["context_hash"]
    now = server.replayed(searched["receipt_id"])
    assert now["at_position"] > middle["corpus_position"]
    assert now["diff"]["data_drift"]["context_hash"]["replay"] != middle["context_hash"]
    replay_view = server.receipt_view(then["replay_receipt_id"])
    assert replay_view["context_hash"] == middle["context_hash"]


def test_a_search_that_timed_out_is_unverifiable_not_a_mismatch(
    server: SearchServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A receipt of a search cut short by its deadline holds no ranking to reproduce."""
    from ledger.schemas.requests import SearchIn
    from ledger.usecases import search as search_module
    from ledger.usecases.context import Caller

    server.corpus()
    caller = Caller("acme", "svc-search", frozenset({"retrieval.write"}))
    with monkeypatch.context() as patch:  # a clock that moves a second per reading, no HTTP meanwhile
        ticks = iter(range(10_000))
        patch.setattr(search_module.time, "monotonic", lambda: float(next(ticks)))
        body = SearchIn.model_validate({"deadline_ms": 1000, "input": {"query": QUERY}})
        timed_out = search_module.search(server.services.context, caller, body).body
    assert timed_out["status"] == "timeout"
    replayed = server.replayed(timed_out["receipt_id"])
    assert replayed["integrity"] == "unverifiable"
    assert replayed["integrity_reason"] == {"cause": "original_timeout", "document_ids": []}
    assert replayed["diff"]["as_of_original"]["context_hash"]["changed"] is True
