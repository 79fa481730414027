"""MCP `find_documents`, the twin of `GET /v1/documents?path=&source=`, over each transport
(the SDK's own client; stdio-url forwards to the `/v1` twin) on both stores: the same answer
as the route, and the route's refusals (a path that names nothing, a restricted document
without the scope and another tenant's document are one not-found; a bad path or source the
same 4xx naming it; a token without audit.read a 403)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from tests.mcp_support import TRANSPORTS, Ledger, answer, mcp_ledger, refusal  # noqa: F401

LEAVE = "policies/leave.md"


def _seed(ledger: Ledger) -> dict[str, Any]:
    made = {}
    for source, text in (("hr", "Sixteen weeks."), ("hr", "Eighteen weeks."), ("wiki", "A copy.")):
        body = {"path": LEAVE, "text": f"# Leave\n\n{text}\n", "source": source}
        made[source] = ledger.v1("POST", "/v1/documents", json=body).json()
    restricted = {
        "path": "security/budget.md",
        "text": "# Budget\n\nNine million.\n",
        "sensitivity": "restricted",
    }
    assert ledger.v1("POST", "/v1/documents", json=restricted).status_code == 201
    doc = made["hr"]
    entry = {
        "document_id": doc["document_id"],
        "chunk_id": doc["chunks"][0]["chunk_id"],
        "score": "1.5",
        "snippet": "Eighteen weeks.",
    }
    retrieval = {"query": "how long is leave", "engine": "external:rag", "selected_entries": [entry]}
    assert ledger.v1("POST", "/v1/retrievals", json=retrieval).status_code == 201
    return made


# (arguments, token): refused by the route and the tool alike.
REFUSED = (
    ({"path": "policies/nowhere.md"}, "reader"),
    ({"path": "security/budget.md"}, "reader"),
    ({"path": LEAVE}, "other-reader"),
    ({"path": "../etc/passwd"}, "reader"),
    ({"path": "/abs.md"}, "reader"),
    ({"path": LEAVE, "source": "bad source"}, "reader"),
    ({"path": "x" * 2000}, "reader"),
    ({"path": LEAVE}, "writer"),
)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_find_documents_answers_and_refuses_as_the_route_does(mcp_ledger: Ledger, transport: str) -> None:
    ledger = mcp_ledger
    made = _seed(ledger)

    async def scenario() -> dict[str, Any]:
        # One session per token (a stdio session is a subprocess): the reader's calls and
        # refusals in one, the other tenant's, the writer's and the admin's in one each.
        out: dict[str, Any] = {"refused": {}}
        for who in ("reader", "other-reader", "writer", "admin"):
            async with ledger.client(transport, who) as client:
                for n, (arguments, token) in enumerate(REFUSED):
                    if token == who:
                        out["refused"][n] = refusal(await client.call_tool("find_documents", arguments))
                if who == "reader":
                    [tool] = [t for t in (await client.list_tools()).tools if t.name == "find_documents"]
                    out["tool"] = tool
                    out["hr"] = answer(
                        await client.call_tool("find_documents", {"path": LEAVE, "source": "hr"})
                    )
                    out["any"] = answer(await client.call_tool("find_documents", {"path": LEAVE}))
                    out["missing"] = refusal(await client.call_tool("find_documents", {}))
                if who == "admin":
                    budget = {"path": "security/budget.md"}
                    out["restricted"] = answer(await client.call_tool("find_documents", budget))
        return out

    out = anyio.run(scenario)
    annotations = out["tool"].annotations
    assert annotations.read_only_hint is True and annotations.idempotent_hint is True
    assert annotations.destructive_hint is False

    # The route's answer, field for field (metadata only, never text).
    route = ledger.v1("GET", "/v1/documents", who="reader", params={"path": LEAVE, "source": "hr"}).json()
    assert out["hr"]["documents"] == route["documents"]
    [doc] = out["hr"]["documents"]
    assert doc["document_id"] == made["hr"]["document_id"] and doc["source"] == "hr"
    assert [v["version"] for v in doc["versions"]] == [1, 2]
    assert doc["receipts_citing"] == 1 and doc["erased"] is None and doc["held_by"] == []
    assert "weeks" not in str(out["hr"])
    assert sorted(d["source"] for d in out["any"]["documents"]) == ["hr", "wiki"]
    assert out["restricted"]["documents"][0]["path"] == "security/budget.md"

    # A missing path names the argument.
    assert out["missing"]["http_status"] == 400 and "path" in out["missing"]["error"]["message"]
    # Each refusal is the route's: status and code; the not-founds with the route's message.
    assert sorted(out["refused"]) == list(range(len(REFUSED)))
    for n, (arguments, who) in enumerate(REFUSED):
        refused = out["refused"][n]
        http = ledger.v1("GET", "/v1/documents", who=who, params=arguments)
        assert 400 <= http.status_code < 500, (arguments, http.text)
        assert refused["http_status"] == http.status_code, (arguments, refused, http.text)
        assert refused["error"]["code"] == http.json()["error"]["code"], (arguments, refused, http.text)
        if http.status_code == 404:
            assert refused["error"]["message"] == http.json()["error"]["message"]
            assert refused["error"]["message"] == f"document at path {arguments['path']!r} not found"
