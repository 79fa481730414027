"""Regressions for the OpenAPI findings of the contract review (issue 9): the document at
`/schema/openapi.json` states what the server does, and `/schema` works offline. Each
assertion failed on the code before (blank UI offline, `{}` bodies, only 200/201/400
documented with Litestar's own 400 body, public routes needing a token, rules missing)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from api.openapi import REQUEST_EXAMPLES
from ledger.domain.timestamps import BOUND_PATTERN
from tests.api_support import Api, api, make_api  # noqa: F401

PUBLIC = {"/v1/healthz", "/v1/version", "/v1/metrics", "/v1/tlog/checkpoint", "/v1/tlog/tile/{path}"}
METHODS = ("get", "post", "put", "patch", "delete")


@pytest.fixture
def doc(api: Api) -> dict[str, Any]:
    response = api.client.get("/schema/openapi.json")
    assert response.status_code == 200
    document: dict[str, Any] = response.json()
    return document


def operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, op)
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if method in METHODS
    ]


def resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def test_the_ui_works_offline(api: Api) -> None:
    page = api.client.get("/schema")
    assert page.status_code == 200 and "swagger-ui" in page.text
    assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", page.text), "a URL to another host"
    assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
    assert len(assets) >= 3
    for asset in assets:
        assert asset.startswith("/schema/assets/"), asset
        served = api.client.get(asset)
        assert served.status_code == 200 and len(served.content) > 500, asset


def test_every_operation_documents_its_errors_as_the_envelope(doc: dict[str, Any]) -> None:
    for method, path, op in operations(doc):
        statuses = set(op["responses"])
        expected = {"400", "408", "503"} | (set() if path in PUBLIC else {"401", "403", "429"})
        assert expected <= statuses, (method, path, sorted(statuses))
        for status, response in op["responses"].items():
            if status.startswith(("4", "5")):
                schema = resolve(doc, response["content"]["application/json"]["schema"])
                assert {"error", "run_id", "trace_id"} <= set(schema["required"]), (method, path, status)
                detail = resolve(doc, schema["properties"]["error"])
                assert set(detail["required"]) == {"code", "message", "retryable"}


def test_statuses_particular_to_routes_are_documented(doc: dict[str, Any]) -> None:
    def statuses(method: str, path: str) -> set[str]:
        return set(doc["paths"][path][method]["responses"])

    assert {"404", "409", "413", "422"} <= statuses("post", "/v1/retrievals")
    assert {"409", "413", "422"} <= statuses("post", "/v1/documents")
    assert "404" in statuses("get", "/v1/citations/{citation_id}")
    assert "404" in statuses("get", "/v1/receipts/{receipt_id}/bundle")
    assert {"404", "409"} <= statuses("post", "/v1/erasures")


def test_every_success_has_a_real_model(doc: dict[str, Any]) -> None:
    for method, path, op in operations(doc):
        for status, response in op["responses"].items():
            if not status.startswith("2"):
                continue
            (media_type, content), *_ = response["content"].items()
            schema = resolve(doc, content["schema"])
            if media_type == "application/json":
                assert schema.get("properties"), (method, path, status, "empty body schema")
                assert {"run_id", "trace_id", "server_version"} <= set(schema["required"])


def test_a_deduplicated_write_is_documented_and_answered_200(api: Api, doc: dict[str, Any]) -> None:
    for path in ("/v1/documents", "/v1/documents/upload", "/v1/retrievals", "/v1/policy-bundles"):
        assert {"200", "201"} <= set(doc["paths"][path]["post"]["responses"]), path
    body = {"path": "same.md", "text": "# Same\n\nText.\n"}
    first = api.client.post("/v1/documents", json=body, headers=api.headers())
    again = api.client.post("/v1/documents", json=body, headers=api.headers())
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["dedup"] is True


def test_export_is_documented_as_ndjson(doc: dict[str, Any]) -> None:
    assert list(doc["paths"]["/v1/export"]["get"]["responses"]["200"]["content"]) == ["application/x-ndjson"]


def test_public_routes_need_no_token_and_the_others_say_so(doc: dict[str, Any], api: Api) -> None:
    for method, path, op in operations(doc):
        if path in PUBLIC:
            assert op["security"] == [], path
            if "{" not in path:  # a templated path names no resource of its own
                assert api.client.get(path).status_code == 200, path  # really public
        else:
            assert op["security"] == [{"BearerToken": []}], (method, path)
    assert "security" not in doc or doc["security"] == []


def test_the_rules_the_server_enforces_are_in_the_schema(doc: dict[str, Any]) -> None:
    schemas = doc["components"]["schemas"]

    def rule(model: str, field: str) -> dict[str, Any]:
        prop: dict[str, Any] = schemas[model]["properties"][field]
        return next((b for b in prop.get("anyOf", [prop]) if b.get("type") == "string"), prop)

    for model, field in [
        ("DocumentIn", "subject_id"),
        ("RetrievalIn", "subject_id"),
        ("PolicyBundleIn", "policy_version"),
        ("RetrievalIn", "context_hash"),
        ("SelectedEntryIn", "expires_at"),
        ("SelectedEntryIn", "score"),
    ]:
        assert rule(model, field).get("pattern"), (model, field)
    for model in ("DocumentIn", "RetrievalIn", "PolicyBundleIn", "ErasureIn", "LegalHoldIn", "TaskIn"):
        assert schemas[model]["additionalProperties"] is False, model
    retention = schemas["DocumentIn"]["properties"]["retention_days"]["anyOf"][0]
    assert retention["type"] == "integer"  # strict: "5" and true are not integers
    assert "oneOf" in schemas["ErasureIn"] and "anyOf" in schemas["LegalHoldIn"]
    key = next(
        p for p in doc["paths"]["/v1/documents"]["post"]["parameters"] if p["name"] == "Idempotency-Key"
    )
    assert key["schema"]["pattern"] == r"^[\x21-\x7e]{1,255}$"
    for path in ("/v1/events", "/v1/receipts"):
        for name in ("since", "until"):
            param = next(p for p in doc["paths"][path]["get"]["parameters"] if p["name"] == name)
            # An RFC 3339 time or a bare day (the whole UTC day): a pattern, not `date-time`.
            assert param["schema"]["pattern"] == BOUND_PATTERN and "format" not in param["schema"], (
                path,
                name,
            )


RAW_BOUNDS = ("ge", "le", "gt", "lt")  # pydantic's names, which no JSON Schema reader knows
JSON_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
DATA_KEYS = ("example", "examples", "default", "enum", "const")  # values, not schemas


def schema_keywords(node: Any, where: str = "") -> list[tuple[str, str]]:
    """(place, keyword) of every keyword in every schema object of the document: the keys of
    a `properties` mapping are field names and example values are data, neither is read."""
    found: list[tuple[str, str]] = []
    if isinstance(node, list):
        for index, item in enumerate(node):
            found += schema_keywords(item, f"{where}/{index}")
    elif isinstance(node, dict):
        for key, value in node.items():
            found.append((where, key))
            if key in DATA_KEYS:
                continue
            if key in ("properties", "patternProperties", "$defs", "schemas") and isinstance(value, dict):
                for name, schema in value.items():
                    found += schema_keywords(schema, f"{where}/{key}/{name}")
            else:
                found += schema_keywords(value, f"{where}/{key}")
    return found


def test_every_bound_is_published_as_minimum_and_maximum(doc: dict[str, Any]) -> None:
    keywords = schema_keywords(doc)
    assert [(where, key) for where, key in keywords if key in RAW_BOUNDS] == []
    bounded = {where for where, key in keywords if key in JSON_BOUNDS}
    top_k = doc["components"]["schemas"]["SearchInput"]["properties"]["top_k"]
    assert (top_k["minimum"], top_k["maximum"]) == (1, 50)  # was published as ge/le
    assert "/components/schemas/DocumentIn/properties/retention_days/anyOf/0" in bounded
    assert len(bounded) >= 5


def test_every_operation_with_a_body_documents_415_and_the_upload_its_fields(doc: dict[str, Any]) -> None:
    bodies = [(method, path, op) for method, path, op in operations(doc) if op.get("requestBody")]
    assert len(bodies) >= 8
    for method, path, op in bodies:
        refused = op["responses"].get("415")
        assert refused is not None, (method, path)
        assert refused["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody"), (method, path)
    assert doc["components"]["schemas"]["DocumentUpload"]["additionalProperties"] is False


def test_every_request_body_has_an_example(doc: dict[str, Any]) -> None:
    bodies = 0
    for method, path, op in operations(doc):
        for media in op.get("requestBody", {}).get("content", {}).values():
            bodies += 1
            assert media.get("example"), (method, path)
            name = media["schema"]["$ref"].rsplit("/", 1)[-1]
            assert media["example"] == REQUEST_EXAMPLES[name]
    assert bodies >= 6


def test_links_lead_from_writes_to_their_reads(doc: dict[str, Any]) -> None:
    retrieval = doc["paths"]["/v1/retrievals"]["post"]["responses"]["201"]["links"]
    assert {"ReadReceipt", "DownloadBundle", "ReadCitation"} <= set(retrieval)
    assert retrieval["ReadCitation"]["parameters"] == {"path.citation_id": "$response.body#/citation_ids/0"}
    document = doc["paths"]["/v1/documents"]["post"]["responses"]["201"]["links"]
    assert {"RecordRetrieval", "EraseDocument", "RemoveDocument"} <= set(document)
    op_ids = {op["operationId"] for _, _, op in operations(doc)}
    for links in (retrieval, document):
        assert all(link["operationId"] in op_ids for link in links.values())


# --- behaviour the schemathesis run found ---------------------------------------------------
@pytest.mark.parametrize(
    "query",
    [
        "tree_size=null",  # was read as "no value": 200
        "tree_size=1&tree_size=2",  # was: the last one silently won
        "tree_size=1.0",
    ],
)
def test_integer_query_parameters_are_whole_numbers_given_once(api: Api, query: str) -> None:
    api.document()
    response = api.client.get(f"/v1/events/1/inclusion-proof?{query}", headers=api.headers())
    assert response.status_code == 400, response.text
    assert "tree_size" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    "since",
    ["0001-01-01T00:00:00+01:00", "2026-02-30T00:00:00Z", "2026-05-23T09:30", "2026-02-30", "yesterday"],
)
def test_since_must_be_an_rfc3339_moment(api: Api, since: str) -> None:
    # The first was a 500 (OverflowError converting to UTC); a time needs its seconds and zone
    # (a bare day is the whole day: tests/test_api_lists.py).
    response = api.client.get("/v1/events", params={"since": since}, headers=api.headers())
    # Not the documented shape: 400; the shape, but no such moment: 422.
    assert response.status_code == (400 if since in ("2026-05-23T09:30", "yesterday") else 422), response.text
    assert "since" in response.json()["error"]["message"]


def test_a_tree_size_past_the_log_is_404_and_an_inverted_range_422(api: Api) -> None:
    api.document()
    h = api.headers()
    assert api.client.get("/v1/events/1/inclusion-proof?tree_size=999999", headers=h).status_code == 404
    assert api.client.get("/v1/checkpoints/consistency?from=1&to=999999", headers=h).status_code == 404
    assert api.client.get("/v1/checkpoints/consistency?from=2&to=1", headers=h).status_code == 422


def test_an_integral_json_number_is_an_integer(api: Api) -> None:
    # JSON Schema's `integer` includes 5.0; the strict model refused it (400).
    body = {"path": "n.md", "text": "# N\n\nText.\n", "retention_days": 30.0}
    response = api.client.post("/v1/documents", json=body, headers=api.headers())
    assert response.status_code == 201, response.text


def test_the_upload_takes_the_text_as_a_plain_form_field(api: Api) -> None:
    # The schema documents a text field; a part without a filename was a 400.
    response = api.client.post(
        "/v1/documents/upload",
        files={"file": (None, "# T\n\nText.\n")},  # a part without a filename
        data={"path": "t.md"},
        headers=api.headers(),
    )
    assert response.status_code == 201, response.text


def test_every_guarded_route_declares_its_contract(api: Api) -> None:
    """`contract()` on every route: the token statuses exactly where a `requires` guard is."""
    from litestar.routes import HTTPRoute

    for route in api.client.app.routes:
        if not isinstance(route, HTTPRoute) or not route.path.startswith("/v1"):
            continue
        for handler in route.route_handlers:
            if handler.http_methods <= {"OPTIONS", "HEAD"}:
                continue  # Litestar's own
            guarded = any(g.__name__.startswith("requires") for g in handler.guards or [])
            responses = handler.responses or {}
            assert {400, 408, 503} <= set(responses), (route.path, "no contract()")
            assert (401 in responses) == guarded, route.path


def test_a_body_is_documented_required_exactly_when_the_server_requires_one(
    api: Api, doc: dict[str, Any]
) -> None:
    """Each operation with a request body, called without one: a required body is refused
    (400/415/422), an optional one (`POST /v1/sources/{name}/sync`) is not, and the document
    says which (Litestar marked every body required)."""
    checked = 0
    for method, path, op in operations(doc):
        body = op.get("requestBody")
        if body is None:
            continue
        url = re.sub(r"\{[^}]+\}", "no-such-name", path)
        # Operator routes answer a tenant's token 403 before reading a body: call them as the operator.
        who = "operator" if path.startswith("/v1/operator/") else "admin"
        answer = api.client.request(method, url, headers=api.headers(who))
        refused = answer.status_code in (400, 415, 422)
        assert body.get("required", False) is refused, (method, path, answer.status_code, answer.text)
        checked += 1
    assert checked >= 9
    sync = doc["paths"]["/v1/sources/{name}/sync"]["post"]["requestBody"]
    assert sync["required"] is False
