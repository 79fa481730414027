"""Plain content reads for auditors (`audit.content`), through a real server on both stores:
envelopes without the scope, text with it, every read in the log; erased and expired fields
say so instead of showing ciphertext."""

from __future__ import annotations

import datetime as dt
from typing import Any

import httpx

from api.auth import create_token
from ledger.config import LedgerConfig
from tests import loopback_http
from tests.api_support import DOC, LoopbackServer, api_config, make_tokens

QUERY = "how long are audit logs kept?"
SNIPPET = "Audit logs are kept for 180 days."


class Http:
    def __init__(self, base_url: str, tokens: dict[str, str]) -> None:
        self.base_url, self.tokens = base_url, tokens

    def get(self, who: str, path: str, **params: Any) -> httpx.Response:
        return loopback_http.get(
            self.base_url + path, params=params, headers={"Authorization": f"Bearer {self.tokens[who]}"}
        )

    def post(self, who: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = loopback_http.post(
            self.base_url + path, json=body, headers={"Authorization": f"Bearer {self.tokens[who]}"}
        )
        assert response.status_code in (200, 201), response.text
        answer: dict[str, Any] = response.json()
        return answer

    def document(self, path: str, text: str = DOC, **fields: Any) -> dict[str, Any]:
        return self.post("admin", "/v1/documents", {"path": path, "text": text, **fields})

    def retrieval(self, doc: dict[str, Any], query: str = QUERY) -> dict[str, Any]:
        chunk = doc["chunks"][0]
        entry = {"document_id": doc["document_id"], "chunk_id": chunk["chunk_id"], "score": "1.5"}
        return self.post(
            "admin",
            "/v1/retrievals",
            {"query": query, "engine": "external:rag", "selected_entries": [{**entry, "snippet": SNIPPET}]},
        )

    def content_reads(self) -> list[dict[str, Any]]:
        response = self.get("auditor", "/v1/events", type="ContentRead", order="asc")
        assert response.status_code == 200, response.text
        events: list[dict[str, Any]] = response.json()["events"]
        return events


def _tokens(config: Any) -> dict[str, str]:
    tokens = make_tokens(config)
    path = config.token_path
    tokens["auditor"] = create_token(path, "acme", ["audit.read", "audit.content"])
    tokens["auditor-restricted"] = create_token(
        path, "acme", ["audit.read", "audit.content", "knowledge.restricted.read"]
    )
    return tokens


def test_content_is_sealed_without_the_scope_plain_with_it_and_every_read_is_logged(
    ledger_config: LedgerConfig,
) -> None:
    config = api_config(ledger_config)
    tokens = _tokens(config)
    with LoopbackServer(config) as server:
        http = Http(server.base_url, tokens)
        doc = http.document("handbook/retention.md")
        receipt = http.retrieval(doc)
        rid = receipt["receipt_id"]

        # Without audit.content: the envelope only, and a plain request is refused naming the scope.
        sealed = http.get("reader", f"/v1/receipts/{rid}")
        assert sealed.status_code == 200
        assert sealed.json()["event"]["payload"]["query"]["alg"] == "A256GCM"
        assert sealed.json().get("content") is None and QUERY not in sealed.text
        refused = http.get("reader", f"/v1/receipts/{rid}", content="plain")
        assert refused.status_code == 403 and "audit.content" in refused.json()["error"]["message"]
        assert QUERY not in refused.text
        assert http.get("reader", "/v1/events", content="plain").status_code == 403
        assert http.content_reads() == []  # refusals read nothing

        # With it: the query, the snippet, the heading path in plain, the signed entry untouched.
        shown = http.get("auditor", f"/v1/receipts/{rid}", content="plain")
        assert shown.status_code == 200, shown.text
        content = shown.json()["content"]
        assert content["query"] == {"state": "plain", "text": QUERY}
        [cited] = content["citations"]
        assert cited["citation_id"] == receipt["citation_ids"][0]
        assert cited["snippet"] == {"state": "plain", "text": SNIPPET}
        assert shown.json()["event"]["payload"]["query"]["alg"] == "A256GCM"

        # ... and the read is a signed entry in the history, ids only, found by the receipt id.
        [read] = http.content_reads()
        assert read["payload"] == {
            "positions": [receipt["position"]],
            "receipt_ids": [rid],
            "citation_ids": [],
        }
        assert read["actor"] != "anonymous" and read["signature"]
        assert QUERY not in str(read) and SNIPPET not in str(read)
        by_receipt = http.get("auditor", "/v1/events", receipt_id=rid).json()["events"]
        assert "ContentRead" in [e["type"] for e in by_receipt]

        # One event: the document's heading paths in plain.
        ingested = http.get("auditor", f"/v1/events/{doc['position']}", content="plain").json()
        headings = [c["heading_path"]["text"] for c in ingested["content"]["chunks"]]
        assert any("Retention" in h for h in headings), headings

        # A page of receipts is one entry, naming each of them.
        more = [http.retrieval(doc, query=f"question {n}")["receipt_id"] for n in range(3)]
        page = http.get("auditor", "/v1/receipts", content="plain", limit=100)
        assert page.status_code == 200, page.text
        queries = {r["receipt_id"]: r["content"]["query"]["text"] for r in page.json()["receipts"]}
        assert queries[more[2]] == "question 2"
        reads = http.content_reads()
        assert len(reads) == 3 and set(reads[-1]["payload"]["receipt_ids"]) == {rid, *more}

        # A page of events: content by position, one entry again.
        events = http.get("auditor", "/v1/events", content="plain", type="RetrievalRecorded").json()
        assert events["content"][str(receipt["position"])]["query"]["text"] == QUERY
        assert len(http.content_reads()) == 4

        # A citation alone: its snippet and heading path, the read naming that citation only.
        cid = receipt["citation_ids"][0]
        assert http.get("reader", f"/v1/citations/{cid}", content="plain").status_code == 403
        cited = http.get("auditor", f"/v1/citations/{cid}", content="plain")
        assert cited.status_code == 200, cited.text
        assert cited.json()["data"]["content"]["snippet"] == {"state": "plain", "text": SNIPPET}
        assert "Retention" in cited.json()["data"]["content"]["heading_path"]["text"]
        last = http.content_reads()[-1]["payload"]
        assert last == {"positions": [receipt["position"]], "receipt_ids": [], "citation_ids": [cid]}


def test_erased_restricted_and_expired_fields_say_so(ledger_config: LedgerConfig) -> None:
    config = api_config(ledger_config)
    tokens = _tokens(config)
    with LoopbackServer(config) as server:
        http = Http(server.base_url, tokens)
        secret = http.document("vault/keys.md", sensitivity="restricted")
        doc = http.document("handbook/retention.md")
        restricted_rid = http.retrieval(secret)["receipt_id"]
        rid = http.retrieval(doc)["receipt_id"]

        # A restricted chunk's snippet needs knowledge.restricted.read too; the query does not.
        content = http.get("auditor", f"/v1/receipts/{restricted_rid}", content="plain").json()["content"]
        assert content["query"]["state"] == "plain"
        assert content["citations"][0]["snippet"] == {
            "state": "restricted",
            "required_scope": "knowledge.restricted.read",
        }
        full = http.get("auditor-restricted", f"/v1/receipts/{restricted_rid}", content="plain").json()
        assert full["content"]["citations"][0]["snippet"]["text"] == SNIPPET

        # Erasing the document: its snippet reads as erased, with when; the query stays.
        http.post("admin", "/v1/erasures", {"document_id": doc["document_id"]})
        after = http.get("auditor", f"/v1/receipts/{rid}", content="plain")
        assert after.status_code == 200, after.text
        snippet = after.json()["content"]["citations"][0]["snippet"]
        assert snippet["state"] == "erased" and snippet["reason"] == "erasure_request"
        assert snippet["at"] and "text" not in snippet and SNIPPET not in after.text
        assert after.json()["content"]["query"]["state"] == "plain"

        # Past the retention window (before the sweep even ran): expired, with the moment.
        later = dt.datetime.now(dt.UTC) + dt.timedelta(days=3000)
        server.app.state.services.context.clock = lambda: later
        expired = http.get("auditor-restricted", f"/v1/receipts/{restricted_rid}", content="plain").json()
        query = expired["content"]["query"]
        assert query["state"] == "expired" and query["at"] < later.isoformat()
        assert expired["content"]["citations"][0]["snippet"]["state"] == "expired"
        assert QUERY not in str(expired["content"])
