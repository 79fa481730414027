"""The OpenAPI contract: what `/schema/openapi.json` promises, and the offline UI at `/schema`.

A route declares its contract in one line, next to its guards:

    @post("/", guards=[requires("ingest.write")], status_code=201, **contract(404, 413, 422, dedup=XOut))
    async def post_x(...) -> Response[XOut]: ...

`contract(*statuses)` documents the statuses particular to the route, each with the error
envelope's schema (`ErrorBody`); the ones every route can return (400 bad request, 408
deadline, 503 store unavailable) and, unless `public=True`, the token's (401, 403, 429) are
added, with the bearer-token security requirement. `dedup=Model` documents the 200 a repeated
write answers beside its 201. Success bodies come from the handler's `Response[Model]`
annotation (models in `ledger.schemas`); request examples from `ledger.schemas.examples`.

`ContractJson` serves the document: Litestar builds it from the routes, then every pydantic
model's schema is replaced by pydantic's own (so patterns, `additionalProperties: false` and
strict types are exactly what the server validates), request bodies get their example, and
operations needing no token say `security: []` (Litestar drops an empty list).

The UI is Swagger UI from the pinned `swagger-ui-py` package, served under `/schema/assets`:
no CDN, so it works offline.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from litestar import Request
from litestar.openapi.config import OpenAPIConfig
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.plugins import JsonRenderPlugin, SwaggerRenderPlugin
from litestar.openapi.spec import Components, Example, SecurityScheme
from litestar.response import Response
from litestar.router import Router
from litestar.routes import HTTPRoute
from litestar.static_files import create_static_files_router
from pydantic import BaseModel, ConfigDict, Field

from api.api_error import CODES, RETRYABLE_STATUSES
from ledger.schemas.examples import REQUEST_EXAMPLES
from ledger.schemas.field_rules import MAX_DOCUMENT_CHARS

BEARER: list[dict[str, list[str]]] = [{"BearerToken": []}]
SCHEMA_PATH = "/schema"
JSON_PATH = f"{SCHEMA_PATH}/openapi.json"
ASSETS_PATH = f"{SCHEMA_PATH}/assets"
ALWAYS = (400, 408, 503)
WITH_TOKEN = (401, 403, 429)

_WHY: dict[int, str] = {
    200: "A repeat of a recorded write (same Idempotency-Key and body, or the same content): the "
    "first answer again with `dedup: true`; nothing new was written",
    400: "Malformed request: a body, parameter, header or the query string breaks a rule of this "
    "schema (the message names the field and the rule); nothing was written",
    401: "Missing or invalid bearer token",
    403: "The token lacks a scope this operation (or the object) needs",
    404: "Not found; identical whether the object never existed or is another tenant's",
    408: "The request ran past the server's deadline; nothing was written, then or later (a write "
    "that had begun to commit is answered, late, instead): a retry runs it again",
    409: "Conflict: the Idempotency-Key was used with another body, or the object's state forbids "
    "the change (under legal hold, already removed)",
    413: "The request body or an uploaded file exceeds its size limit",
    415: "The body is not of the type this operation reads (its `Content-Type` must be the one "
    "documented for the request body); nothing was written",
    422: "Well formed, but refused by a rule the schema cannot express (a snippet not in the cited "
    "chunk, an expiry past the retention window, an unknown chunk); nothing was written",
    429: "The token's rate limit is spent; wait `Retry-After` seconds",
    503: "The event store cannot serve now (did not answer in time, read-only, full, unreachable; "
    "retry after `Retry-After` seconds), or (`policy_unloadable`) the tenant's live policy bundle "
    "cannot be loaded until a valid one is published",
}


class ErrorDetail(BaseModel):
    code: str = Field(description="Stable machine-readable code, e.g. `not_found`", min_length=1)
    message: str = Field(description="What was wrong, naming the field and the rule; never document text")
    retryable: bool = Field(description="True only when the same request may succeed later")


class ErrorBody(BaseModel):
    """The one error envelope of every 4xx/5xx answer (some add fields, e.g. `hold_ids`)."""

    model_config = ConfigDict(extra="allow")
    error: ErrorDetail
    run_id: str
    trace_id: str


def _error_response(status: int) -> ResponseSpec:
    code = CODES.get(status, "error")
    example = {
        "error": {
            "code": code,
            "message": _WHY[status].split(";")[0],
            "retryable": status in RETRYABLE_STATUSES,
        },
        "run_id": "run-5f1c0a9e",
        "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
    }
    return ResponseSpec(
        data_container=ErrorBody,
        description=_WHY[status],
        generate_examples=False,
        examples=[Example(summary=code, value=example)],
    )


def contract(*statuses: int, public: bool = False, dedup: type[BaseModel] | None = None) -> dict[str, Any]:
    """The `responses=` and `security=` of one route handler (see the module docstring)."""
    every = {*ALWAYS, *statuses, *(() if public else WITH_TOKEN)}
    responses: dict[int, ResponseSpec] = {status: _error_response(status) for status in sorted(every)}
    if dedup is not None:
        responses[200] = ResponseSpec(data_container=dedup, description=_WHY[200], generate_examples=False)
    return {"responses": responses} if public else {"responses": responses, "security": BEARER}


# --- links: how one answer leads to the next request (Swagger UI shows them; schemathesis'
# stateful phase follows them, so receipts, citations, bundles and erasures get real answers) ----
_DOCUMENT_ID = "$response.body#/document_id"
_RECEIPT_ID = {"path.receipt_id": "$response.body#/receipt_id"}
_CITATION_ID = {"path.citation_id": "$response.body#/citation_ids/0"}
_POSITION = {"path.position": "$response.body#/position"}
_CITE_FIRST_CHUNK = {
    "query": "what does the document say?",
    "engine": "external:linked",
    "selected_entries": [
        {
            "document_id": _DOCUMENT_ID,
            "chunk_id": "$response.body#/chunks/0/chunk_id",
            "score": "1.5",
            # A one-chunk document is its chunk: the whole text occurs in it.
            "snippet": "$request.body#/text",
        }
    ],
}
Link = tuple[str, str, dict[str, Any], dict[str, Any] | None]  # name, target, parameters, body
_FROM_DOCUMENT: list[Link] = [
    ("RemoveDocument", "DELETE /v1/documents/{document_id}", {"path.document_id": _DOCUMENT_ID}, None),
    ("EraseDocument", "POST /v1/erasures", {}, {"document_id": _DOCUMENT_ID}),
    ("HoldDocument", "POST /v1/legal-holds", {}, {"document_ids": [_DOCUMENT_ID], "legal_basis": "audit"}),
]
_FROM_RECEIPT: list[Link] = [
    ("ReadReceipt", "GET /v1/receipts/{receipt_id}", _RECEIPT_ID, None),
    ("DownloadBundle", "GET /v1/receipts/{receipt_id}/bundle", _RECEIPT_ID, None),
    ("DownloadCoseReceipt", "GET /v1/receipts/{receipt_id}/receipt.cose", _RECEIPT_ID, None),
    ("ReadCitation", "GET /v1/citations/{citation_id}", _CITATION_ID, None),
    ("ReadChunkMcp", "GET /v1/mcp/chunks/{citation_id}", _CITATION_ID, None),
    ("ReplayReceipt", "POST /v1/receipts/{receipt_id}/replay", _RECEIPT_ID, None),
    ("ReadEvent", "GET /v1/events/{position}", _POSITION, None),
    ("ProveInclusion", "GET /v1/events/{position}/inclusion-proof", _POSITION, None),
]
LINKS: dict[str, list[Link]] = {
    "POST /v1/documents": [
        ("RecordRetrieval", "POST /v1/retrievals", {}, _CITE_FIRST_CHUNK),
        *_FROM_DOCUMENT,
    ],
    "POST /v1/documents/upload": _FROM_DOCUMENT,
    "POST /v1/retrievals": _FROM_RECEIPT,
    "POST /v1/legal-holds": [
        ("ReleaseHold", "DELETE /v1/legal-holds/{hold_id}", {"path.hold_id": "$response.body#/hold_id"}, None)
    ],
}


def _add_links(document: dict[str, Any]) -> None:
    operations = {
        f"{method.upper()} {path}": operation
        for path, item in document.get("paths", {}).items()
        for method, operation in item.items()
        if isinstance(operation, dict) and "responses" in operation
    }
    for source, links in LINKS.items():
        if source not in operations:
            continue
        for status, response in operations[source]["responses"].items():
            if not status.startswith("2"):
                continue
            response["links"] = {
                name: {
                    "operationId": operations[target]["operationId"],
                    **({"parameters": parameters} if parameters else {}),
                    **({"requestBody": body} if body is not None else {}),
                }
                for name, target, parameters, body in links
                if target in operations
            }


# --- the document ------------------------------------------------------------------------------
def _models_of(routes: list[Any]) -> dict[str, type[BaseModel]]:
    """Every pydantic model a route takes or answers, by the component name Litestar gives it."""
    found: dict[str, type[BaseModel]] = {}

    def add(annotation: Any) -> None:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found[annotation.__name__] = annotation

    for route in routes:
        if not isinstance(route, HTTPRoute):
            continue
        for handler in route.route_handlers:
            signature = handler.parsed_fn_signature
            data = signature.parameters.get("data")
            if data is not None:
                add(data.annotation)
                for inner in data.inner_types:  # an optional body: `Model | None`
                    add(inner.annotation)
            returned = signature.return_type
            if returned.is_subclass_of(Response) and returned.inner_types:
                add(returned.inner_types[0].annotation)
            for spec in (handler.responses or {}).values():
                add(spec.data_container)
    return found


def _optional_bodies(routes: list[Any]) -> set[tuple[str, str]]:
    """(path, method) of the operations whose body may be left out (`data: Model | None`):
    Litestar marks every request body required."""
    found: set[tuple[str, str]] = set()
    for route in routes:
        if not isinstance(route, HTTPRoute):
            continue
        for handler in route.route_handlers:
            data = handler.parsed_fn_signature.parameters.get("data")
            if data is not None and data.is_optional:
                found.update((route.path_format, method.lower()) for method in handler.http_methods)
    return found


def _walk_operations(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for item in document.get("paths", {}).values():
        for method, operation in item.items():
            if method in ("get", "post", "put", "patch", "delete"):
                yield operation


def finish_document(document: dict[str, Any], routes: list[Any]) -> dict[str, Any]:
    """Litestar's document with pydantic's own schemas, examples and explicit `security: []`."""
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for name, model in _models_of(routes).items():
        generated = model.model_json_schema(ref_template="#/components/schemas/{model}", by_alias=True)
        for def_name, definition in generated.pop("$defs", {}).items():
            schemas[def_name] = definition
        schemas[name] = generated
    for name, example in REQUEST_EXAMPLES.items():
        if name in schemas:
            schemas[name]["examples"] = [example]
    _form_fields_like(schemas, form="DocumentUpload", model="DocumentIn")
    _add_links(document)
    for path, method in _optional_bodies(routes):
        body = document.get("paths", {}).get(path, {}).get(method, {}).get("requestBody")
        if body is not None:
            body["required"] = False
    for operation in _walk_operations(document):
        operation.setdefault("security", [])
        for parameter in operation.get("parameters", []):
            parameter["schema"] = _without_null(parameter.get("schema", {}))
        if operation.get("requestBody"):
            operation["responses"].setdefault("415", _media_type_response(operation["responses"]["400"]))
        for media in operation.get("requestBody", {}).get("content", {}).values():
            media["schema"] = _without_null(media.get("schema", {}))  # an optional body is left out
            ref = media.get("schema", {}).get("$ref", "")
            name = ref.rsplit("/", 1)[-1]
            if name in REQUEST_EXAMPLES:
                media["example"] = REQUEST_EXAMPLES[name]
    return document


def _media_type_response(bad_request: dict[str, Any]) -> dict[str, Any]:
    """The 415 of an operation with a body (`api.routes.common.body_media_type`), in the
    envelope of its documented 400."""
    content = bad_request.get("content", {})
    schema = content.get("application/json", {}).get("schema", {})
    example = {
        "error": {"code": CODES[415], "message": "Content-Type must be application/json", "retryable": False},
        "run_id": "run-5f1c0a9e",
        "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
    }
    return {
        "description": _WHY[415],
        "content": {
            "application/json": {"schema": schema, "examples": {"unsupported_media_type": {"value": example}}}
        },
    }


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A parameter's schema without Litestar's `null` branch: an optional parameter is one
    that may be left out (`required: false`); no query string or header carries a null."""
    for keyword in ("oneOf", "anyOf"):
        branches = schema.get(keyword)
        if isinstance(branches, list):
            kept = [b for b in branches if b.get("type") != "null"]
            if len(kept) == 1:
                rest = {k: v for k, v in schema.items() if k != keyword}
                if rest.get("default", 0) is None:
                    del rest["default"]
                return {**rest, **kept[0]}
    return schema


def _form_fields_like(schemas: dict[str, Any], *, form: str, model: str) -> None:
    """A multipart form whose fields are checked as `model`'s: document those fields' rules
    (a form field is left out, never null)."""
    if form not in schemas or model not in schemas:
        return
    rules = schemas[model]["properties"]
    for name, field in schemas[form].get("properties", {}).items():
        if name in rules:
            field.clear()
            field.update(_without_null(rules[name]))
    schemas[form]["additionalProperties"] = False  # an unknown field is refused (422)
    # The upload is markdown text, read as UTF-8 (not any binary file).
    schemas[form]["properties"]["file"] = {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_DOCUMENT_CHARS,
        "contentMediaType": "text/markdown",
        "description": "The markdown document, UTF-8",
    }


class _Finished:
    """The finished document of one application, built on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._document: dict[str, Any] | None = None
        self.rendered = b""

    def get(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            if self._document is None:
                document = orjson.loads(orjson.dumps(openapi_schema, default=_jsonable))
                self._document = finish_document(document, request.app.routes)
                self.rendered = orjson.dumps(self._document)
            return self._document


class ContractJson(JsonRenderPlugin):
    """`/schema/openapi.json`: the finished document."""

    def __init__(self, finished: _Finished) -> None:
        super().__init__(path="/openapi.json")
        self.finished = finished

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        self.finished.get(request, openapi_schema)
        return self.finished.rendered


class OfflineSwagger(SwaggerRenderPlugin):
    """`/schema`: Swagger UI on the finished document, its files served by this server."""

    def __init__(self, finished: _Finished) -> None:
        super().__init__(
            path="/",
            js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
            css_url=f"{ASSETS_PATH}/swagger-ui.css",
            standalone_preset_js_url=f"{ASSETS_PATH}/swagger-ui-standalone-preset.js",
            favicon=f"<link rel='icon' type='image/png' href='{ASSETS_PATH}/favicon-32x32.png'>",
        )
        self.finished = finished

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        return super().render(request, self.finished.get(request, openapi_schema))


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(type(value).__name__)


def _swagger_assets() -> Path:
    spec = importlib.util.find_spec("swagger_ui")  # found, not imported: only its files are used
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("swagger-ui-py is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "static"


def openapi_config(version: str) -> OpenAPIConfig:
    finished = _Finished()
    return OpenAPIConfig(
        title="citeledger",
        version=version,
        path=SCHEMA_PATH,
        description=(
            "Signed, event-sourced audit ledger for AI retrievals — HTTP API v1. Every error is the "
            "envelope `{error: {code, message, retryable}, run_id, trace_id}`."
        ),
        components=Components(security_schemes={"BearerToken": SecurityScheme(type="http", scheme="bearer")}),
        render_plugins=[ContractJson(finished), OfflineSwagger(finished)],
        # Examples come from REQUEST_EXAMPLES; generated ones would be random and unseeded.
        create_examples=False,
    )


def assets_router() -> Router:
    """Swagger UI's files, served by this server (public, not in the document)."""
    return create_static_files_router(
        path=ASSETS_PATH, directories=[_swagger_assets()], include_in_schema=False, name="swagger-assets"
    )


__all__ = [
    "BEARER",
    "JSON_PATH",
    "REQUEST_EXAMPLES",
    "ContractJson",
    "ErrorBody",
    "OfflineSwagger",
    "assets_router",
    "contract",
    "finish_document",
    "openapi_config",
]
