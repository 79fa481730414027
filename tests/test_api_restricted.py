"""Restricted chunks reach only callers holding `knowledge.restricted.read`, on every route
that hands out chunk text, snippets, paths or ids: search, retrievals (single and batch),
replay. Through a real loopback server on SQLite and PostgreSQL, as an outside caller with
a token would see it; the rule itself is `ledger.usecases.visibility`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from api.auth import create_token
from ledger.config import LedgerConfig
from tests.api_support import LoopbackServer, api_config, make_tokens
from tests.test_api_replay import Server

RESTRICTED_PATH = "security/acquisition-budget.md"
RESTRICTED_TEXT = (
    "# Nightjar acquisition budget\n\n"
    "The Nightjar acquisition budget is 40 million; the board approves the acquisition budget.\n"
)
RESTRICTED_SNIPPET = "The Nightjar acquisition budget is 40 million"
VISIBLE = {
    "finance/budget.md": "# Budget\n\nThe acquisition budget is reviewed in March.\n",
    "finance/acquisition.md": "# Acquisition\n\nAn acquisition needs a budget owner.\n",
    "handbook/travel.md": "# Travel\n\nTravel is no acquisition; it has a budget of its own.\n",
    "handbook/hardware.md": "# Hardware\n\nA hardware acquisition comes out of the hardware budget.\n",
}
QUERY = "acquisition budget"


class RestrictedServer(Server):
    def search(self, query: str, who: str, top_k: int = 3, **envelope: Any) -> dict[str, Any]:
        response = self.client.post(
            "/v1/search",
            json={"input": {"query": query, "top_k": top_k}, **envelope},
            headers=self.headers(who),
        )
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def signed_payload(self, receipt_id: str) -> dict[str, Any]:
        response = self.client.get(f"/v1/receipts/{receipt_id}", headers=self.headers())
        assert response.status_code == 200, response.text
        payload: dict[str, Any] = response.json()["event"]["payload"]
        return payload

    def events(self, event_type: str) -> list[dict[str, Any]]:
        response = self.client.get(
            f"/v1/events?type={event_type}&limit=500&order=asc", headers=self.headers()
        )
        assert response.status_code == 200, response.text
        events: list[dict[str, Any]] = response.json()["events"]
        return events

    def restricted(self) -> dict[str, Any]:
        return self.document(RESTRICTED_TEXT, path=RESTRICTED_PATH, sensitivity="restricted")

    def visible(self) -> None:
        for path, text in VISIBLE.items():
            self.document(text, path=path)


@pytest.fixture
def server(ledger_config: LedgerConfig) -> Iterator[RestrictedServer]:
    config = api_config(ledger_config)
    tokens = make_tokens(config)
    tokens["scoped"] = create_token(
        config.token_path, "acme", ["retrieval.write", "knowledge.restricted.read"]
    )
    tokens["replayer"] = create_token(config.token_path, "acme", ["replay.run"])
    with LoopbackServer(config) as loopback:
        running = RestrictedServer(loopback, tokens)
        yield running
        running.client.close()


def _traces(doc: dict[str, Any]) -> list[str]:
    """What of the restricted document must never show: its path, ids and words."""
    return [
        RESTRICTED_PATH,
        doc["document_id"],
        *(c["chunk_id"] for c in doc["chunks"]),
        "Nightjar",
        "nightjar",
        "40 million",
    ]


def _leaks(text: str, doc: dict[str, Any]) -> list[str]:
    return [trace for trace in _traces(doc) if trace in text]


def _stable(body: dict[str, Any]) -> dict[str, Any]:
    """A search answer without what differs between any two calls (ids, times, positions)."""
    citations = [
        {k: v for k, v in c.items() if k not in ("citation_id", "expires_at", "parts")}
        | {
            "parts": [
                {k: v for k, v in p.items() if k not in ("citation_id", "expires_at")} for p in c["parts"]
            ]
        }
        for c in body["output"]["citations"]
    ]
    metrics = {k: v for k, v in body["metrics"].items() if k != "latency_ms"}
    return {
        "status": body["status"],
        "citations": citations,
        "gaps": body["output"]["gaps"],
        "metrics": metrics,
    }


# --- search ------------------------------------------------------------------------------
def test_search_without_the_scope_answers_as_if_restricted_chunks_did_not_exist(
    server: RestrictedServer,
) -> None:
    server.visible()
    before = server.search(QUERY, "writer")
    doc = server.restricted()
    # The scope holder's best match is the restricted chunk...
    scoped = server.search(QUERY, "scoped")
    assert scoped["output"]["citations"][0]["path"] == RESTRICTED_PATH
    assert server.signed_payload(scoped["receipt_id"])["withheld"] == 0
    # ...a caller without it gets a full page of what it may see, ranked exactly as before
    # the restricted document existed (no score, gap or count depends on it).
    response = server.client.post(
        "/v1/search",
        json={
            "input": {"query": QUERY, "top_k": 3},
            "auth_scope": ["retrieval.write", "knowledge.restricted.read", "admin"],
        },
        headers=server.headers("writer"),
    )
    assert response.status_code == 200, response.text
    after = response.json()
    assert after["status"] == "ok" and len(after["output"]["citations"]) == 3
    assert _leaks(response.text, doc) == []
    assert _stable(after) == _stable(before)
    payload = server.signed_payload(after["receipt_id"])
    assert payload["withheld"] == len(doc["chunks"])  # how many, never which
    assert payload["task"]["auth_scope"] == ["retrieval.write"]  # the claim, narrowed to the token
    assert payload["filters_applied"] == [] and _leaks(str(payload), doc) == []


def test_a_word_only_restricted_text_holds_is_answered_like_a_word_no_text_holds(
    server: RestrictedServer,
) -> None:
    server.visible()
    doc = server.restricted()
    # A bundle rule for restricted chunks does not bring them back into filters or gaps.
    server.publish(
        "version: p1\nrules:\n  - id: restricted-scope\n    action: deny\n"
        "    match: {sensitivity: [restricted]}\n    unless_scope: knowledge.restricted.read\n"
    )
    hidden = server.search("nightjar budget", "writer")
    absent = server.search("zebulon budget", "writer")
    assert str(_stable(hidden)) == str(_stable(absent)).replace("zebulon", "nightjar")
    assert hidden["status"] == absent["status"]
    assert [t for t in _traces(doc)[:-3] if t in str(hidden)] == []  # no path or id
    assert server.signed_payload(hidden["receipt_id"])["filters_applied"] == []


# --- retrievals ----------------------------------------------------------------------------
def _retrieval(doc: dict[str, Any], snippet: str, chunk_id: str | None = None, **task: Any) -> dict[str, Any]:
    return {
        "query": "what is the nightjar budget?",
        "engine": "external:test-rag",
        "task": task,
        "selected_entries": [
            {
                "document_id": doc["document_id"],
                "chunk_id": chunk_id or doc["chunks"][0]["chunk_id"],
                "score": "1.0",
                "snippet": snippet,
            }
        ],
    }


def _answer(response: httpx.Response) -> tuple[int, str, dict[str, str]]:
    headers = {k: v for k, v in response.headers.items() if k.startswith("x-replay") or k == "content-length"}
    return response.status_code, response.text, headers


def test_citing_a_restricted_chunk_without_the_scope_confirms_nothing(server: RestrictedServer) -> None:
    doc = server.restricted()
    chunk_id = doc["chunks"][0]["chunk_id"]
    before = len(server.events("AccessDenied"))

    def post(snippet: str, cited: str | None = None) -> httpx.Response:
        return server.client.post(
            "/v1/retrievals", json=_retrieval(doc, snippet, cited), headers=server.headers("writer")
        )

    right, wrong = post(RESTRICTED_SNIPPET), post("The Nightjar acquisition budget is 12 million")
    assert right.status_code == 422 and right.json()["error"]["code"] == "unknown_chunk"
    assert _answer(right) == _answer(wrong)
    # ...and the same answer a chunk the ledger never held gets: no way to tell it exists.
    unknown = post(RESTRICTED_SNIPPET, "f" * 32)
    assert _answer(unknown)[0] == 422
    assert unknown.text.replace("f" * 32, chunk_id) == right.text
    denials = server.events("AccessDenied")[before:]
    assert [(d["payload"]["resource_type"], d["payload"]["resource_id"]) for d in denials] == [
        ("chunk", chunk_id),
        ("chunk", chunk_id),
    ]
    assert all(d["payload"]["required_scope"] == "knowledge.restricted.read" for d in denials)
    assert server.events("RetrievalRecorded") == []
    # The batch route gives each item that same answer.
    items = [
        {"idempotency_key": f"k-{i}", "retrieval": _retrieval(doc, snippet)}
        for i, snippet in enumerate([RESTRICTED_SNIPPET, "a guess that is wrong"])
    ]
    batch = server.client.post(
        "/v1/retrievals/batch", json={"items": items}, headers=server.headers("writer")
    )
    assert batch.status_code == 200, batch.text
    first, second = ({k: v for k, v in r.items() if k != "index"} for r in batch.json()["results"])
    assert first == second and first["http_status"] == 422 and first["error"]["code"] == "unknown_chunk"
    assert len(server.events("AccessDenied")) == before + 4
    # With the scope the snippet is checked as for any chunk.
    scoped = server.client.post(
        "/v1/retrievals", json=_retrieval(doc, RESTRICTED_SNIPPET), headers=server.headers("scoped")
    )
    assert scoped.status_code == 201, scoped.text
    made_up = server.client.post(
        "/v1/retrievals", json=_retrieval(doc, "not in it"), headers=server.headers("scoped")
    )
    assert made_up.status_code == 422 and made_up.json()["error"]["code"] == "snippet_not_in_chunk"


def test_a_claimed_auth_scope_is_narrowed_to_the_tokens_scopes(server: RestrictedServer) -> None:
    doc = server.document()  # internal
    claim = ["retrieval.write", "knowledge.restricted.read", "admin", "made.up"]
    response = server.client.post(
        "/v1/retrievals",
        json=_retrieval(doc, "Audit logs are kept for 180 days.", auth_scope=claim),
        headers=server.headers("writer"),
    )
    assert response.status_code == 201, response.text
    assert server.signed_payload(response.json()["receipt_id"])["task"]["auth_scope"] == ["retrieval.write"]


# --- replay -------------------------------------------------------------------------------
def test_replay_by_a_caller_without_the_scope_leaks_nothing(server: RestrictedServer) -> None:
    server.visible()
    doc = server.restricted()
    searched = server.search(QUERY, "scoped")  # ran with the scope: the restricted chunk is in it
    assert searched["output"]["citations"][0]["path"] == RESTRICTED_PATH
    cited = server.client.post(
        "/v1/retrievals", json=_retrieval(doc, RESTRICTED_SNIPPET), headers=server.headers("scoped")
    )
    assert cited.status_code == 201, cited.text
    # Drift after the receipts: a second restricted document, and the first one edited.
    later = server.document(
        "# Nightjar\n\nNightjar acquisition budget notes for the board.\n",
        path="security/nightjar-notes.md",
        sensitivity="restricted",
    )
    server.document(RESTRICTED_TEXT + "\nRevised in May.\n", path=RESTRICTED_PATH, sensitivity="restricted")
    traces = _traces(doc) + _traces(later)
    for receipt_id in (searched["receipt_id"], cited.json()["receipt_id"]):
        full = server.replay(receipt_id, who="admin")
        assert full.status_code == 201, full.text
        assert RESTRICTED_PATH in full.text  # the scope holder sees what changed
        shown = server.replay(receipt_id, who="replayer")
        assert shown.status_code == 201, shown.text
        assert [t for t in traces if t in shown.text] == []
        assert shown.json()["integrity"] == full.json()["integrity"]
    body = server.replay(searched["receipt_id"], who="replayer").json()
    assert body["integrity"] == "ok"
    common = body["diff"]["as_of_original"]["selected_entries"]
    assert common["common"] == len(common["common_entries"]) == len(searched["output"]["citations"]) - 1


def test_an_idempotency_key_never_hands_a_stored_restricted_answer_to_a_caller_without_the_scope(
    server: RestrictedServer,
) -> None:
    server.visible()
    doc = server.restricted()
    search = {"input": {"query": QUERY, "top_k": 3}}
    cite = _retrieval(doc, RESTRICTED_SNIPPET)
    for route, body, key in (("/v1/search", search, "k-search"), ("/v1/retrievals", cite, "k-cite")):
        first = server.client.post(
            route, json=body, headers=server.headers("scoped", **{"Idempotency-Key": key})
        )
        assert first.status_code in (200, 201) and RESTRICTED_PATH in first.text
        again = server.client.post(
            route, json=body, headers=server.headers("scoped", **{"Idempotency-Key": key})
        )
        assert again.status_code == first.status_code and again.json()["dedup"] is True
        # Same tenant, same key, same body, another token without the scope: not the same request.
        other = server.client.post(
            route, json=body, headers=server.headers("writer", **{"Idempotency-Key": key})
        )
        assert other.status_code == 409 and other.json()["error"]["code"] == "idempotency_key_reused"
        assert _leaks(other.text, doc) == []


def test_replay_of_a_day_whose_restricted_text_was_erased_names_no_restricted_document(
    server: RestrictedServer,
) -> None:
    server.visible()
    doc = server.restricted()
    searched = server.search(QUERY, "scoped")
    erased = server.client.post(
        "/v1/erasures", json={"document_id": doc["document_id"]}, headers=server.headers()
    )
    assert erased.status_code == 200, erased.text
    full = server.replay(searched["receipt_id"], who="admin").json()
    # The visible documents it also cited are reproduced in order: only the erased one is not.
    assert full["integrity"] == "reproduced_apart_from_erased"
    assert full["integrity_reason"]["document_ids"] == [doc["document_id"]]
    assert [e["path"] for e in full["integrity_reason"]["erased"]] == [RESTRICTED_PATH]
    shown = server.replay(searched["receipt_id"], who="replayer")
    assert shown.status_code == 201, shown.text
    assert shown.json()["integrity_reason"] == {
        "cause": "erased_after_receipt",
        "document_ids": [],
        "erased": [],
    }
    assert _leaks(shown.text, doc) == []


def test_replay_hides_an_entry_whose_document_became_restricted(server: RestrictedServer) -> None:
    text = "# Budget\n\nThe acquisition budget is reviewed in March.\n"
    doc = server.document(text, path="finance/budget.md")  # internal when cited
    cited = server.client.post(
        "/v1/retrievals",
        json=_retrieval(doc, "The acquisition budget is reviewed in March."),
        headers=server.headers("writer"),
    )
    assert cited.status_code == 201, cited.text
    now = server.document(
        text + "The Nightjar line is 40 million.\n",
        path="finance/budget.md",
        document_id=doc["document_id"],
        sensitivity="restricted",
    )
    full = server.replay(cited.json()["receipt_id"], who="admin").json()
    [entry] = full["entries"]
    assert entry["status"] == "superseded" and entry["current_chunk_id"] == now["chunks"][0]["chunk_id"]
    shown = server.replay(cited.json()["receipt_id"], who="replayer")
    assert shown.status_code == 201, shown.text
    assert shown.json()["entries"] == [] and now["chunks"][0]["chunk_id"] not in shown.text
