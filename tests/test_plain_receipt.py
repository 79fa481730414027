"""A batch records its receipts from their JSON form (`ledger.usecases.receipt_json`), never
building the event models: every stored receipt must be exactly the bytes its model encodes,
whatever fields the request sets, and a value no request model checked is refused as before."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from pydantic import ValidationError

from ledger.domain.events import RetrievalRecorded, UnverifiedCitation
from ledger.domain.payloads import encode_payload
from ledger.schemas.requests import RetrievalIn
from ledger.usecases.context import Caller
from ledger.usecases.retrievals import BatchItem, record_retrievals
from ledger.writing.application import Ledger
from ledger.writing.idempotency import IdempotencyKey
from tests.factories import TENANT, UseCases

TEXT = "# Retention\n\nAudit logs are kept for 180 days.\n\n## Backups\n\nBackups are kept for 35 days.\n"


def _bodies(document: dict[str, Any], snippet: str) -> list[dict[str, Any]]:
    """Requests that set every field a recorded receipt carries, and leave each one out."""
    chunk = document["chunks"][0]["chunk_id"]
    cited = {"document_id": document["document_id"], "chunk_id": chunk, "snippet": snippet}
    return [
        {"query": "plain", "engine": "external:x", "selected_entries": [cited]},
        {
            "query": "everything é",
            "engine": "external:a.b-c",
            "subject_id": "subject-1",
            "status": "denied",
            "task": {"task_id": "t-1", "deadline_ms": 900, "auth_scope": ["retrieval.write", "unheld"]},
            "context_hash": "c" * 64,
            "selected_entries": [
                {
                    **cited,
                    "score": "-1.5e-05",
                    "score_breakdown": [{"component": "bm25", "value": "1.25"}],
                    "explanation": "why",
                    "expires_at": "2026-01-02T00:00:00Z",
                },
                {**cited, "explanation": ""},
            ],
            "filters_applied": [{"rule_id": "r-1", "chunk_id": "c-9", "action": "redact"}],
        },
        {"query": "none found", "engine": "external:x", "status": "no_hit", "task": {"auth_scope": []}},
    ]


def test_batch_receipts_are_the_bytes_their_models_encode(ledger: Ledger) -> None:
    uses = UseCases(ledger)
    entry = uses.ingest(TEXT)
    document = {"document_id": entry.payload["document_id"], "chunks": entry.payload["chunks"]}
    snippet = ledger.sealer.unseal(entry.payload["chunks"][0]["text"], tenant_id=TENANT)[:20]
    caller = Caller(TENANT, "svc-rag", frozenset({"retrieval.write"}), trace_id="trace-1")
    items = [
        BatchItem(IdempotencyKey(TENANT, uuid.uuid4().hex, f"fp-{n}"), RetrievalIn.model_validate(body))
        for n, body in enumerate(_bodies(document, snippet))
    ]
    otlp_like = (UnverifiedCitation(rank=1, carried_id="doc-9", score="2", reason="unknown_id_no_content"),)
    items.append(
        BatchItem(
            IdempotencyKey(TENANT, uuid.uuid4().hex, "fp-otlp"),
            items[0].body,
            run_id="run-1",
            trace_id="trace-2",
            unverifiable=otlp_like,
            data_source="store-1",
        )
    )
    outcomes = record_retrievals(uses.ctx, caller, items)
    assert [o.error for o in outcomes] == [None] * len(items)
    for outcome in outcomes:
        assert outcome.result is not None
        event = ledger.get(outcome.result.body["position"])
        assert event is not None
        payload = event.payload
        modelled = encode_payload("RetrievalRecorded", RetrievalRecorded.model_validate(payload))
        assert modelled[0] == payload
        assert modelled[1] in event.entry  # the stored entry carries exactly the model's bytes


def test_a_trace_id_no_request_model_checked_is_refused_as_the_model_refuses_it(ledger: Ledger) -> None:
    uses = UseCases(ledger)
    entry = uses.ingest(TEXT)
    document = {"document_id": entry.payload["document_id"], "chunks": entry.payload["chunks"]}
    snippet = ledger.sealer.unseal(entry.payload["chunks"][0]["text"], tenant_id=TENANT)[:20]
    body = RetrievalIn.model_validate(_bodies(document, snippet)[0])
    caller = Caller(TENANT, "svc-rag", frozenset({"retrieval.write"}))
    for trace_id, data_source in (("bad trace\n", None), (None, "not an id\n")):
        item = BatchItem(
            IdempotencyKey(TENANT, uuid.uuid4().hex, "fp"), body, trace_id=trace_id, data_source=data_source
        )
        with pytest.raises(ValidationError):
            record_retrievals(uses.ctx, caller, [item])


def _constraints(schema: dict[str, Any], defs: dict[str, Any], path: str = "") -> dict[str, dict[str, Any]]:
    """Each value's JSON-schema rules by its path (`.task.task_id`, `.selected_entries[*].score`)."""
    if "$ref" in schema:
        return _constraints(defs[schema["$ref"].split("/")[-1]], defs, path)
    out: dict[str, dict[str, Any]] = {}
    for alternative in schema.get("anyOf", []) + schema.get("allOf", []):
        for key, rules in _constraints(alternative, defs, path).items():
            out.setdefault(key, {}).update(rules)
    if "properties" in schema:
        for name, sub in schema["properties"].items():
            out.update(_constraints(sub, defs, f"{path}.{name}"))
    elif schema.get("type") == "array":
        out[f"{path}[]"] = {k: schema[k] for k in ("maxItems", "minItems") if k in schema}
        out.update(_constraints(schema.get("items", {}), defs, f"{path}[*]"))
    elif "anyOf" not in schema and "allOf" not in schema:
        rules = ("maxLength", "minLength", "pattern", "maximum", "minimum", "enum", "const")
        out[path] = {k: schema[k] for k in rules if k in schema}
    return out


def test_the_request_checks_what_the_receipt_copies_as_strictly_as_the_event_model() -> None:
    """The JSON form copies request values into the receipt unchecked (the model is not built):
    every value the two share must carry the event model's rules in the request model too, so a
    value the event model would refuse never reaches the log by this path."""

    def rules(model: type[Any]) -> dict[str, dict[str, Any]]:
        schema = model.model_json_schema(mode="validation")
        return _constraints(schema, schema.get("$defs", {}))

    request, event = rules(RetrievalIn), rules(RetrievalRecorded)
    shared = set(request) & set(event)
    assert {".task.task_id", ".selected_entries[*].score", ".filters_applied[*].rule_id"} <= shared
    differing = {path for path in shared if request[path] != event[path]}
    # The request takes external engines only (a subset of the event's); an explanation is
    # sealed before the receipt holds it.
    assert differing == {".engine", ".selected_entries[*].explanation"}
    assert request[".engine"]["pattern"].strip("^$") in event[".engine"]["pattern"]
