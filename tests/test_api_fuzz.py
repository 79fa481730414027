"""Property-based fuzzing of every write route (POST and DELETE) with malformed requests:
wrong types, strings and booleans for integers, unknown fields, impossible dates, invalid
UTF-8, deep and huge JSON, bodies that are not JSON objects, bad Idempotency-Keys.

Each request starts from a body the route would accept (it cites a real document, releases
a real hold) and breaks it in exactly one way, so the refusal is the mutation's doing. For
every one: no 5xx, a 4xx in the envelope with `retryable: false`, and nothing written (the
log's head in the store is unchanged). Seeded (derandomized) and bounded.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api_support import Api, api, make_api  # noqa: F401

FUZZ = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)

# A JSON value of each type; a mutation picks one of a type the field does not take.
VALUES: dict[str, st.SearchStrategy[Any]] = {
    "string": st.text(max_size=20),
    "integer": st.integers(min_value=-(2**60), max_value=2**60),
    "number": st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer()),
    "boolean": st.booleans(),
    "null": st.none(),
    "array": st.lists(st.integers(), max_size=3),
    "object": st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
}
BAD_DATES = [
    "2026-02-30T00:00:00Z",
    "2026-13-01T00:00:00Z",
    "2026-01-01T24:00:00Z",
    "0000-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z",
    "yesterday",
    "2026-01-01",
]
BAD_KEYS = ["", " ", "key with spaces", "ключ", "x" * 256, "tab\tkey"]


def _deep(depth: int) -> bytes:
    return b'{"a": ' + b"[" * depth + b"]" * depth + b"}"


RAW_BODIES = st.sampled_from(
    [
        _deep(10_000),
        _deep(100_000),
        b'{"path": "a\xff\xfe.md", "text": "# A\\n\\nB\\n"}',  # invalid UTF-8 inside a string
        b"\xff\xfe\xfd",
        b"not json",
        b"[]",
        b"42",
        b'"text"',
        b"null",
        b'{"a": 1',
        b'{"a": 1}{"b": 2}',
        b'{"' + b"k" * 70_000 + b'": 1}',
        b"[" + b"1," * 400_000 + b"1]",  # larger than the body limit
    ]
)


@pytest.fixture
def world(api: Api) -> dict[str, Any]:
    """A document, a policy-free tenant, a hold: the real objects valid bodies refer to."""
    doc = api.document()
    held = api.document("# Held\n\nKept for a case.\n", path="fuzz/held.md")  # a hold names a real document
    hold = api.client.post(
        "/v1/legal-holds",
        json={"document_ids": [held["document_id"]], "legal_basis": "fuzz"},
        headers=api.headers(),
    )
    assert hold.status_code == 201, hold.text
    return {"doc": doc, "hold_id": hold.json()["hold_id"], "retrieval": api.retrieval_body(doc)}


def valid_bodies(world: dict[str, Any]) -> dict[str, tuple[dict[str, Any], dict[str, str]]]:
    """Route -> (a body it accepts, the JSON type of each top-level field; `?`: or null)."""
    return {
        "/v1/documents": (
            {
                "path": "fuzz/a.md",
                "text": "# A\n\nSome text.\n",
                "retention_days": 30,
                "sensitivity": "public",
            },
            {"path": "string", "text": "string", "retention_days": "integer?", "sensitivity": "string"},
        ),
        "/v1/retrievals": (
            world["retrieval"],
            {"query": "string", "engine": "string", "task": "object", "selected_entries": "array"},
        ),
        "/v1/policy-bundles": (
            {"bundle_yaml": "version: 1\nrules: []\n", "policy_version": "fuzz-1"},
            {"bundle_yaml": "string", "policy_version": "string?"},
        ),
        "/v1/erasures": ({"document_id": world["doc"]["document_id"]}, {"document_id": "string"}),
        "/v1/legal-holds": (
            {"document_ids": [world["doc"]["document_id"]], "legal_basis": "fuzz"},
            {"document_ids": "array", "legal_basis": "string"},
        ),
    }


@st.composite
def broken(draw: st.DrawFn, body: dict[str, Any], types: dict[str, str]) -> tuple[str, bytes | None, Any]:
    """(what was broken, raw bytes or None, JSON body) — one mutation of a valid body."""
    kind = draw(st.sampled_from(["wrong_type", "unknown_field", "int_as_str_or_bool", "raw", "bad_date"]))
    mutated = orjson.loads(orjson.dumps(body))
    if kind == "wrong_type":
        field = draw(st.sampled_from(sorted(types)))
        takes = types[field].rstrip("?")  # `?`: the field may also be null
        refused = [t for t in VALUES if t != takes and not (t == "null" and types[field].endswith("?"))]
        other = draw(st.sampled_from(sorted(refused)))
        mutated[field] = draw(VALUES[other])
        return f"{field}:{other}", None, mutated
    if kind == "unknown_field":
        name = draw(st.text(min_size=1, max_size=12).filter(lambda n: n not in types))
        mutated[name] = draw(st.one_of(*VALUES.values()))
        return f"unknown:{name!r}", None, mutated
    if kind == "int_as_str_or_bool":
        value = draw(st.sampled_from(["5", "30", True, False, 5.5, "1e3"]))
        if "retention_days" in types:
            mutated["retention_days"] = value
        elif "selected_entries" in types:
            mutated["task"] = {**mutated.get("task", {}), "deadline_ms": value}
        else:  # no integer field: a string field given a boolean or a number
            text_field = next(name for name, kind_ in sorted(types.items()) if kind_.startswith("string"))
            mutated[text_field] = draw(st.sampled_from([True, False, 5.5, 7]))
        return f"int:{value!r}", None, mutated
    if kind == "bad_date" and "selected_entries" in types:
        mutated["selected_entries"][0]["expires_at"] = draw(st.sampled_from(BAD_DATES))
        return "date", None, mutated
    return "raw", draw(RAW_BODIES), None


def refused_without_write(api: Api, send: Callable[[], Any], what: str) -> None:
    head = api.services.ledger.sync()
    response = send()
    where = (what, response.status_code, response.text[:300])
    assert 400 <= response.status_code < 500, where
    body = response.json()
    assert set(body["error"]) == {"code", "message", "retryable"}, where
    assert body["error"]["retryable"] is False, where
    assert body["run_id"] and body["trace_id"], where
    assert api.services.ledger.sync() == head, where  # nothing written


@pytest.mark.parametrize(
    "route", ["/v1/documents", "/v1/retrievals", "/v1/policy-bundles", "/v1/erasures", "/v1/legal-holds"]
)
def test_json_write_routes_refuse_malformed_bodies(api: Api, world: dict[str, Any], route: str) -> None:
    body, types = valid_bodies(world)[route]

    @FUZZ
    @given(case=broken(body, types))
    def run(case: tuple[str, bytes | None, Any]) -> None:
        what, raw, mutated = case
        content = raw if raw is not None else json.dumps(mutated).encode()  # big ints, \ud800 escapes
        headers = {**api.headers(), "Content-Type": "application/json"}
        refused_without_write(api, lambda: api.client.post(route, content=content, headers=headers), what)

    run()


@pytest.mark.parametrize("route", ["/v1/documents", "/v1/retrievals", "/v1/policy-bundles"])
def test_bad_idempotency_keys_are_refused_before_writing(api: Api, world: dict[str, Any], route: str) -> None:
    body, _ = valid_bodies(world)[route]

    @FUZZ
    @given(key=st.sampled_from(BAD_KEYS))
    def run(key: str) -> None:
        headers = {**api.headers(), "Idempotency-Key": key}
        # httpx refuses non-latin-1 header text itself; send its UTF-8 bytes as a client could.
        raw_headers = {k: v.encode("utf-8") for k, v in headers.items()}
        refused_without_write(api, lambda: api.client.post(route, json=body, headers=raw_headers), key)

    run()


def test_upload_refuses_malformed_forms(api: Api, world: dict[str, Any]) -> None:
    good_file = ("a.md", b"# A\n\nText.\n", "text/markdown")
    cases = st.one_of(
        st.tuples(
            st.just("file not utf-8"),
            st.just({"file": ("a.md", b"\xff\xfe\x00bad", "text/markdown")}),
            st.just({}),
        ),
        st.tuples(st.just("path not utf-8"), st.just({"file": good_file}), st.just({"path": b"a\xff.md"})),
        st.tuples(
            st.just("retention_days"),
            st.just({"file": good_file}),
            st.sampled_from(["abc", "true", "5.5", "-1", "0", "99999999"]).map(
                lambda v: {"retention_days": v}
            ),
        ),
        st.tuples(
            st.just("sensitivity"),
            st.just({"file": good_file}),
            st.text(max_size=10)
            .filter(lambda v: v not in ("public", "internal", "restricted"))
            .map(lambda v: {"sensitivity": v}),
        ),
        st.tuples(st.just("no file"), st.just({}), st.just({"path": "a.md"})),
        st.tuples(st.just("empty file"), st.just({"file": ("a.md", b"", "text/markdown")}), st.just({})),
    )

    @FUZZ
    @given(case=cases)
    def run(case: tuple[str, dict[str, Any], dict[str, Any]]) -> None:
        what, files, data = case
        refused_without_write(
            api,
            lambda: api.client.post(
                "/v1/documents/upload", files=files or None, data=data, headers=api.headers()
            ),
            what,
        )

    run()


def test_delete_routes_refuse_malformed_requests(api: Api, world: dict[str, Any]) -> None:
    document_id = world["doc"]["document_id"]
    ids = st.one_of(
        st.text(min_size=1, max_size=20).filter(lambda s: "/" not in s and s not in (".", "..")),
        st.just("x" * 300),
        st.just("-leading-dash"),
    )

    @FUZZ
    @given(
        target=st.sampled_from(["document", "hold"]),
        bad_id=ids,
        reason=st.text(max_size=12).filter(lambda r: r not in ("source_deleted", "withdrawn")),
    )
    def run(target: str, bad_id: str, reason: str) -> None:
        if target == "document":
            # The real document, with a reason that is not one: refused, not removed.
            url, params = f"/v1/documents/{document_id}", {"reason": reason}
        else:
            url, params = f"/v1/legal-holds/{quote(bad_id, safe='')}", {}
        refused_without_write(
            api, lambda: api.client.delete(url, params=params, headers=api.headers()), f"{target}:{bad_id!r}"
        )

    run()
