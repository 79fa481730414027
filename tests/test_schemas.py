"""The contract package (`ledger.schemas`): each request and answer shape written once, the
client's models the very same classes, and the package loadable without the server."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

import client
from client import models
from ledger.schemas import answers, reads, requests

ROOT = Path(__file__).resolve().parent.parent
RETRIEVAL = {"query": "how long are audit logs kept?", "engine": "external:my-rag", "status": "no_hit"}


def _models(module: object) -> dict[str, type[BaseModel]]:
    return {
        name: value
        for name, value in vars(module).items()
        if isinstance(value, type) and issubclass(value, BaseModel)
    }


def test_the_client_s_models_are_the_contract_s() -> None:
    contract = {model for module in (answers, reads, requests) for model in _models(module).values()}
    named = {name for name, model in _models(models).items() if model not in contract}
    for name in named - {"Spooled"}:  # the only client-side shape: no server answers it
        model = _models(models)[name]
        (base,) = model.__bases__  # a name for a contract model, adding no field of its own
        assert base in contract and not vars(model).get("__annotations__"), name
    assert named == {
        "RetrievalReceipt",
        "BatchAnswer",
        "DocumentRecorded",
        "SearchAnswer",
        "CitationAnswer",
        "EventsPage",
        "Spooled",
    }
    assert client.BatchItemResult is answers.BatchItemOut  # nested in BatchAnswer: the very class


def test_no_surface_or_use_case_writes_a_contract_shape_again() -> None:
    """Every module of the API, the use cases and the client that holds a model named like one of
    the contract's holds that very class: no second copy of a request or answer shape."""
    contract = {
        name: model
        for module in (answers, reads, requests)
        for name, model in _models(module).items()
        if model.__module__.startswith("ledger.schemas")
    }
    checked = 0
    for package in ("api", "ledger.usecases", "client"):
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, prefix=package + "."):
            module = importlib.import_module(info.name)
            for name, model in _models(module).items():
                if name not in contract:
                    continue
                # The domain's own models (an event's `Locator`) are the log's, not a copy.
                if model.__module__.startswith(("ledger.schemas", "ledger.domain")):
                    checked += model is contract[name]
                    continue
                raise AssertionError(f"{info.name} defines its own {name} ({model.__module__})")
    assert checked >= 20  # the routes, MCP and the use cases do name them


def test_a_batch_item_built_alone_fails_at_once_while_a_batch_refuses_it_by_index() -> None:
    retrieval = requests.RetrievalIn.model_validate(RETRIEVAL)
    with pytest.raises(ValidationError, match="idempotency_key"):
        requests.RetrievalBatchItemIn(idempotency_key="two words", retrieval=retrieval)
    batch = requests.RetrievalBatchIn.model_validate(
        {"items": [{"idempotency_key": "k-1", "retrieval": RETRIEVAL}, {"idempotency_key": "two words"}]}
    )
    good, bad = batch.items
    assert good.problem is None and good.retrieval == retrieval
    assert bad.problem is not None and bad.problem.startswith("idempotency_key:")
    assert "two words" not in bad.problem  # a refusal never echoes the value


def test_the_client_and_its_models_load_no_store_web_framework_or_server() -> None:
    probe = (
        "import sys, client, client.models, ledger.schemas.examples;"
        "print(' '.join(m for m in ('psycopg', 'sqlite3', 'eventsourcing', 'litestar', 'uvicorn', 'mcp',"
        " 'api', 'projections', 'ledger.storage', 'ledger.writing', 'ledger.usecases') if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert loaded.stdout.strip() == ""


def test_the_client_refuses_what_the_server_s_rules_refuse_before_sending() -> None:
    # Nothing listens on port 9: a request that got as far as sending would fail otherwise.
    entry = {"document_id": "d", "chunk_id": "d.c1", "score": "1", "snippet": "a\x00b"}
    with client.Client("http://127.0.0.1:9", "token") as ledger, pytest.raises(ValidationError) as caught:
        ledger.record_retrieval({**RETRIEVAL, "status": "ok", "selected_entries": [entry]})
    first = caught.value.errors()[0]
    assert first["type"] == "control_character" and first["loc"] == ("selected_entries", 0, "snippet")
