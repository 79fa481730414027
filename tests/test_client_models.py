"""The client's models against the server: request models against the OpenAPI document
of the app built in-process (property names, which are required, JSON types), response
models against what the real server answers. A change on either side fails here."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from api.app import create_app
from client import models
from ledger.config import LedgerConfig
from tests.api_support import Api, api, api_config, make_api  # noqa: F401

REQUESTS: list[tuple[type[BaseModel], str]] = [
    (models.RetrievalIn, "RetrievalIn"),
    (models.TaskIn, "TaskIn"),
    (models.SelectedEntryIn, "SelectedEntryIn"),
    (models.ScoreComponentIn, "ScoreComponentIn"),
    (models.FilterAppliedIn, "FilterAppliedIn"),
    (models.DocumentIn, "DocumentIn"),
    (models.RetrievalBatchIn, "RetrievalBatchIn"),
    (models.RetrievalBatchItemIn, "RetrievalBatchItemIn"),
    (models.SearchIn, "SearchIn"),
    (models.SearchInput, "SearchInput"),
    (models.SearchFiltersIn, "SearchFiltersIn"),
]
# Response models: every property the server documents, the client knows (and calls it
# required when the server always sends it).
RESPONSES: list[tuple[type[BaseModel], str]] = [
    (models.SearchAnswer, "SearchOut"),
    (models.SearchOutput, "SearchOutput"),
    (models.SearchCitation, "SearchCitation"),
    (models.SearchLocator, "SearchLocator"),
]


def _types(schema: dict[str, Any], components: dict[str, Any]) -> set[str]:
    """The JSON types a property allows ($ref resolved, null included)."""
    if "$ref" in schema:
        target = components.get(schema["$ref"].split("/")[-1], {})
        return {target.get("type", "object")}
    if "type" in schema:
        kind = schema["type"]
        return set(kind) if isinstance(kind, list) else {kind}
    if "enum" in schema or "const" in schema:
        return {"string"}
    found: set[str] = set()
    for option in schema.get("anyOf", []) + schema.get("oneOf", []) + schema.get("allOf", []):
        found |= _types(option, components)
    return found


@pytest.fixture(scope="module")
def server_components(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    config = api_config(LedgerConfig(data_dir=tmp_path_factory.mktemp("openapi"), run_checkpointer=False))
    document = create_app(config).openapi_schema.to_schema()
    components: dict[str, Any] = document["components"]["schemas"]
    return components


@pytest.mark.parametrize(("model", "name"), REQUESTS, ids=[name for _, name in REQUESTS])
def test_request_models_follow_the_openapi_document(
    model: type[BaseModel], name: str, server_components: dict[str, Any]
) -> None:
    server = server_components[name]
    ours = model.model_json_schema(ref_template="#/components/schemas/{model}")
    our_components = ours.get("$defs", {})
    assert set(ours["properties"]) == set(server["properties"]), name
    assert set(ours.get("required", [])) == set(server.get("required", [])), name
    for field, schema in server["properties"].items():
        theirs = _types(schema, server_components)
        mine = _types(ours["properties"][field], our_components)
        assert mine == theirs, (name, field, mine, theirs)


ANSWER_FIELDS = set(models.Answer.model_fields)  # optional in the client: it never needs them


@pytest.mark.parametrize(("model", "name"), RESPONSES, ids=[name for _, name in RESPONSES])
def test_response_models_follow_the_openapi_document(
    model: type[BaseModel], name: str, server_components: dict[str, Any]
) -> None:
    server = server_components[name]
    every, required = _fields(model)
    assert set(server["properties"]) <= every, (name, set(server["properties"]) - every)
    assert set(server.get("required", [])) - ANSWER_FIELDS <= required, name
    assert required <= set(server.get("required", [])), (name, required - set(server.get("required", [])))


def _fields(model: type[BaseModel]) -> tuple[set[str], set[str]]:
    return set(model.model_fields), {n for n, f in model.model_fields.items() if f.is_required()}


def _check(model: type[BaseModel], answer: dict[str, Any]) -> None:
    every, required = _fields(model)
    assert set(answer) <= every, (model.__name__, set(answer) - every)
    assert required <= set(answer), (model.__name__, required - set(answer))
    model.model_validate(answer)


def test_response_models_follow_the_server_answers(api: Api) -> None:
    doc = api.document()
    _check(models.DocumentRecorded, doc)
    _check(models.DocumentRecorded, api.document())  # unchanged text: the dedup answer
    receipt = api.retrieval(doc)
    _check(models.RetrievalReceipt, receipt)
    batch = api.client.post(
        "/v1/retrievals/batch",
        json={"items": [{"idempotency_key": "k", "retrieval": api.retrieval_body(doc)}, {"bad": 1}]},
        headers=api.headers(),
    ).json()
    _check(models.BatchAnswer, batch)
    for item in batch["results"]:
        _check(models.BatchItemResult, item)
    citation = api.client.get(f"/v1/citations/{receipt['citation_ids'][0]}", headers=api.headers()).json()
    _check(models.CitationAnswer, citation)
    events = api.client.get("/v1/events?limit=1", headers=api.headers()).json()
    _check(models.EventsPage, events)
    request = models.SearchIn(input=models.SearchInput(query="how long are audit logs kept"))
    found = api.client.post("/v1/search", json=request.model_dump(mode="json"), headers=api.headers())
    assert found.status_code == 200, found.text
    answer = found.json()
    assert answer["status"] == "ok" and answer["output"]["citations"]
    _check(models.SearchAnswer, answer)
    _check(models.SearchOutput, answer["output"])
    for cited in answer["output"]["citations"]:
        _check(models.SearchCitation, cited)
    absent = models.SearchIn(input=models.SearchInput(query="submarine reactor maintenance"))
    missing = api.client.post("/v1/search", json=absent.model_dump(mode="json"), headers=api.headers()).json()
    assert missing["status"] == "no_hit" and missing["output"]["gaps"]
    _check(models.SearchAnswer, missing)
