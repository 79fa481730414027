"""Lists that answer when, who and how many, over a real server on loopback (both stores):
`since`/`until` to the second or as whole days, `order` both ways with cursors that page
correctly in each, totals, the kind/actor/engine columns, status and kind as choices (a wrong
value is a 400 listing the allowed ones), and the export of a filter as CSV and JSONL."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from typing import Any

import httpx
import pytest

from api.routes.receipt_export import COLUMNS, export_body
from ledger.config import LedgerConfig
from ledger.domain.timestamps import parse_timestamp
from ledger.usecases.context import Caller
from ledger.usecases.errors import Invalid
from ledger.usecases.ports import ReceiptFilter
from ledger.usecases.receipt_reads import receipts_export
from tests.api_support import DOC, Api, api, bearer, http_to_served, make_api  # noqa: F401


def _post(http: httpx.Client, token: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = http.post(path, json=body, headers=bearer(token))
    assert answer.status_code in (200, 201), answer.text
    result: dict[str, Any] = answer.json()
    return result


def _seed(http: httpx.Client, admin: str) -> dict[str, Any]:
    """Four external retrievals (two tasks), a search and its replay, oldest first."""
    doc = _post(http, admin, "/v1/documents", {"path": "handbook/retention.md", "text": DOC})
    chunk = doc["chunks"][0]
    external = [
        _post(
            http,
            admin,
            "/v1/retrievals",
            {
                "query": f"question {n}",
                "engine": "external:rag",
                "task": {"task_id": f"task-{n % 2}"},
                "selected_entries": [
                    {
                        "document_id": doc["document_id"],
                        "chunk_id": chunk["chunk_id"],
                        "score": "2.5",
                        "snippet": "Audit logs are kept for 180 days.",
                    }
                ],
            },
        )
        for n in range(4)
    ]
    searched = _post(http, admin, "/v1/search", {"task_id": "task-s", "input": {"query": "audit logs kept"}})
    replayed = _post(http, admin, f"/v1/receipts/{searched['receipt_id']}/replay", {})
    return {"external": external, "search": searched, "replay": replayed, "doc": doc}


def _all(http: httpx.Client, token: str, path: str, rows: str, **params: Any) -> list[dict[str, Any]]:
    """Every row of a list, page by page (limit 2), checking each page's total."""
    seen: list[dict[str, Any]] = []
    cursor: str | None = None
    total = None
    while True:
        answer = http.get(
            path,
            params={**params, "limit": 2, **({"cursor": cursor} if cursor else {})},
            headers=bearer(token),
        )
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["total_exact"] is True
        total = body["total"] if total is None else total
        assert body["total"] == total  # the same on every page: it counts the filter, not the page
        seen += body[rows]
        cursor = body["next_cursor"]
        if cursor is None:
            assert len(seen) == total
            return seen


def _receipt_ids(http: httpx.Client, token: str, **params: Any) -> list[str]:
    return [r["receipt_id"] for r in _all(http, token, "/v1/receipts", "receipts", **params)]


def test_receipts_order_totals_kinds_and_time_ranges(ledger_config: LedgerConfig) -> None:
    with http_to_served(ledger_config) as (http, tokens):
        admin, reader = tokens["admin"], tokens["reader"]
        seeded = _seed(http, admin)
        made = [r["receipt_id"] for r in seeded["external"]]
        made += [seeded["search"]["receipt_id"], seeded["replay"]["replay_receipt_id"]]

        # Newest first by default; asc the other way; the cursors page each order to the end.
        newest = _receipt_ids(http, reader)
        assert newest == made[::-1]
        assert _receipt_ids(http, reader, order="asc") == made
        first = http.get("/v1/receipts", params={"limit": 2}, headers=bearer(reader)).json()
        assert first["total"] == 6 and len(first["receipts"]) == 2

        # Who recorded it, and what made it.
        rows = {r["receipt_id"]: r for r in _all(http, reader, "/v1/receipts", "receipts")}
        assert {r["actor"] for r in rows.values()} == {rows[made[0]]["actor"]}
        assert rows[made[0]]["actor"].startswith("token:")
        assert [rows[i]["kind"] for i in made] == ["external"] * 4 + ["search", "replay"]
        assert rows[made[5]]["engine"] == rows[made[4]]["engine"] and rows[made[4]]["engine"].startswith(
            "citeledger-bm25@"
        )
        assert _receipt_ids(http, reader, kind="external", order="asc") == made[:4]
        assert _receipt_ids(http, reader, kind="search") == [made[4]]
        assert _receipt_ids(http, reader, kind="replay") == [made[5]]
        assert _receipt_ids(http, reader, task_id="task-1", order="asc") == [made[1], made[3]]

        # A wrong choice is a 400 naming the field and the allowed values, never an empty list.
        for name, value, allowed in (
            ("status", "nohit", "ok, no_hit, denied, timeout, error"),
            ("kind", "replays", "search, external, replay"),
            ("order", "newest", "desc, asc"),
        ):
            refused = http.get("/v1/receipts", params={name: value}, headers=bearer(reader))
            assert refused.status_code == 400, refused.text
            assert refused.json()["error"]["message"] == f"{name} must be one of: {allowed}"

        # To the second: since is inclusive, until exclusive, at the exact moment of a receipt.
        moment = rows[made[2]]["recorded_at"]
        assert _receipt_ids(http, reader, since=moment, order="asc") == made[2:]
        assert _receipt_ids(http, reader, until=moment, order="asc") == made[:2]
        # A bare day is the whole UTC day, as since and as until.
        day = moment[:10]
        assert _receipt_ids(http, reader, since=day, until=day) == made[::-1]
        before = f"{parse_timestamp(moment).year - 1}-01-01"
        assert _receipt_ids(http, reader, until=before) == []
        # An offset is taken as the moment it names.
        later = parse_timestamp(moment).astimezone(dt.timezone(dt.timedelta(hours=2))).isoformat()
        assert _receipt_ids(http, reader, since=later, order="asc") == made[2:]

        # Not the shape: 400; the shape of a moment that does not exist: 422 (a rule).
        for name, value, status in (
            ("since", "2026-02-30", 422),
            ("until", "yesterday", 400),
            ("since", "2026-05-23T09:30Z", 400),
        ):
            bad = http.get("/v1/receipts", params={name: value}, headers=bearer(reader))
            assert bad.status_code == status, bad.text
            message = bad.json()["error"]["message"]
            assert message.startswith(f"{name} must be an RFC 3339 time") and "\\d" not in message

        # The history: the same order, totals and ranges.
        events = _all(http, reader, "/v1/events", "events", type="RetrievalRecorded")
        assert [e["payload"]["receipt_id"] for e in events] == made[::-1]
        ascending = _all(http, reader, "/v1/events", "events", type="RetrievalRecorded", order="asc")
        assert [e["position"] for e in ascending] == sorted(e["position"] for e in events)
        since = _all(http, reader, "/v1/events", "events", type="RetrievalRecorded", since=moment)
        assert [e["payload"]["receipt_id"] for e in since] == made[:1:-1]
        # Another tenant sees none of it, not even a count.
        foreign = http.get("/v1/receipts", headers=bearer(tokens["other-reader"])).json()
        assert foreign["receipts"] == [] and foreign["total"] == 0


def test_export_of_a_filter_as_csv_and_jsonl(ledger_config: LedgerConfig) -> None:
    with http_to_served(ledger_config) as (http, tokens):
        seeded = _seed(http, tokens["admin"])
        reader = bearer(tokens["reader"])
        wanted = [r["receipt_id"] for r in seeded["external"]]
        listed = http.get("/v1/receipts", params={"kind": "external", "order": "asc"}, headers=reader).json()

        answer = http.get(
            "/v1/receipts/export.csv", params={"kind": "external", "order": "asc"}, headers=reader
        )
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"].startswith("text/csv")
        assert "attachment" in answer.headers["content-disposition"]
        table = list(csv.DictReader(io.StringIO(answer.text)))
        assert [row["receipt_id"] for row in table] == wanted
        assert [int(row["position"]) for row in table] == [r["position"] for r in listed["receipts"]]
        assert {row["kind"] for row in table} == {"external"} and table[0]["actor"].startswith("token:")

        lines = http.get(
            "/v1/receipts/export.jsonl",
            params={"task_id": "task-s", "kind": "search"},
            headers=reader,
        )
        assert lines.status_code == 200 and lines.headers["content-type"].startswith("application/x-ndjson")
        [row] = [json.loads(line) for line in lines.text.splitlines()]
        assert row["receipt_id"] == seeded["search"]["receipt_id"] and row["position"] >= 1
        assert list(row) == list(COLUMNS)

        refused = http.get("/v1/receipts/export.csv", params={"status": "nohit"}, headers=reader)
        assert refused.status_code == 400 and refused.json()["error"]["message"].startswith("status")
        assert http.get("/v1/receipts/export.csv").status_code == 401
        empty = http.get("/v1/receipts/export.csv", headers=bearer(tokens["other-reader"]))
        assert empty.status_code == 200 and empty.text.splitlines() == [",".join(COLUMNS)]


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_csv_cells_never_start_a_formula(start: str) -> None:
    row = {"receipt_id": "r1", "position": 7, "task_id": f'{start}HYPERLINK("http://x")', "citation_ids": []}
    [header, line] = list(csv.reader(io.StringIO(export_body([row], "csv").decode())))
    cell = dict(zip(header, line, strict=True))["task_id"]
    assert cell.startswith("'" + start) and cell[1:] == row["task_id"]


def test_an_export_past_its_cap_is_refused_whole(api: Api) -> None:
    doc = api.document()
    made = [api.retrieval(doc)["receipt_id"] for _ in range(3)]
    caller = Caller(tenant_id="acme", actor="test", scopes=frozenset({"audit.read"}))
    models = api.services.read_models
    rows = receipts_export(models, caller, ReceiptFilter(), order="asc", max_rows=3)
    assert [row["receipt_id"] for row in rows] == made
    with pytest.raises(Invalid) as refused:
        receipts_export(models, caller, ReceiptFilter(), order="asc", max_rows=2)
    assert refused.value.code == "export_too_large" and "more than 2 receipts match" in refused.value.message
