"""Receipt replay through the real route on a real loopback server (uvicorn + httpx),
on SQLite and PostgreSQL: every refusal, every diff field, the statuses of an
`external:` receipt's entries, the replay chain, idempotency and fail-open."""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Self

import httpx
import pytest

from ledger.config import LedgerConfig
from ledger.storage.audit import verify_store
from projections.receipt_index import RECEIPTS_TABLE
from tests import loopback_http
from tests.api_support import LoopbackServer, serving
from tests.factories import retrieval_draft

IDS = {"X-Run-Id": "run-fixed", "X-Trace-Id": "trace-fixed"}
DOC = "# Retention\n\nAudit logs are kept for 180 days.\n\n## Access\n\nRestricted documents need a scope.\n"
SNIPPET = "Audit logs are kept for 180 days."
DENY_HANDBOOK = (
    "version: deny-hb\nrules:\n  - id: no-handbook\n    action: deny\n    match: {paths: ['handbook/**']}\n"
)
ALLOW_ALL = "version: open\nrules: []\n"


class Server:
    """A running app and a client with every test token."""

    def __init__(self, loopback: LoopbackServer, tokens: dict[str, str]) -> None:
        self.loopback = loopback
        self.client = loopback_http.client(base_url=loopback.base_url, timeout=30)
        self.tokens = tokens

    @classmethod
    @contextmanager
    def running(cls, ledger_config: LedgerConfig) -> Iterator[Self]:
        """One served on `ledger_config`'s store for the length of the block."""
        with serving(ledger_config) as (loopback, _, tokens):
            server = cls(loopback, tokens)
            try:
                yield server
            finally:
                server.client.close()

    @property
    def services(self) -> Any:
        return self.loopback.app.state.services

    def headers(self, who: str = "admin", **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}", **IDS, **extra}

    def document(self, text: str = DOC, document_id: str | None = None, **fields: Any) -> dict[str, Any]:
        body = {"path": "handbook/retention.md", "text": text, **fields}
        if document_id:
            body["document_id"] = document_id
        response = self.client.post("/v1/documents", json=body, headers=self.headers())
        assert response.status_code in (200, 201), response.text
        result: dict[str, Any] = response.json()
        return result

    def receipt(self, doc: dict[str, Any], *, subject_id: str | None = None) -> str:
        body: dict[str, Any] = {
            "query": "how long are audit logs kept?",
            "engine": "external:test-rag",
            "task": {"task_id": "task-1", "auth_scope": ["retrieval.write"]},
            "selected_entries": [
                {
                    "document_id": doc["document_id"],
                    "chunk_id": doc["chunks"][0]["chunk_id"],
                    "score": "3.25",
                    "snippet": SNIPPET,
                }
            ],
        }
        if subject_id:
            body["subject_id"] = subject_id
        response = self.client.post("/v1/retrievals", json=body, headers=self.headers())
        assert response.status_code == 201, response.text
        return str(response.json()["receipt_id"])

    def publish(self, bundle_yaml: str) -> None:
        response = self.client.post(
            "/v1/policy-bundles", json={"bundle_yaml": bundle_yaml}, headers=self.headers()
        )
        assert response.status_code == 201, response.text

    def replay(self, receipt_id: str, who: str = "admin", **params: Any) -> httpx.Response:
        extra = {k: v for k, v in params.items() if k == "Idempotency-Key"}
        query = {k: v for k, v in params.items() if k != "Idempotency-Key"}
        return self.client.post(
            f"/v1/receipts/{receipt_id}/replay", params=query, headers=self.headers(who, **extra)
        )

    def replayed(self, receipt_id: str, **params: Any) -> dict[str, Any]:
        response = self.replay(receipt_id, **params)
        assert response.status_code == 201, response.text
        body: dict[str, Any] = response.json()
        return body

    def execute(self, statement: str, params: tuple[Any, ...]) -> None:
        """Raw SQL on the store, as someone with database access would."""
        store = self.services.ledger.store
        with store.transaction(commit=True) as cursor:
            cursor.execute(store.sql(statement), params)


@pytest.fixture
def server(ledger_config: LedgerConfig) -> Iterator[Server]:
    with Server.running(ledger_config) as running:
        yield running


def _refused(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["error"]["code"] == code
    assert body["run_id"] == "run-fixed" and body["trace_id"] == "trace-fixed"
    return body


# --- refusals -------------------------------------------------------------------------
def test_unknown_and_other_tenants_receipts_are_the_same_404(server: Server) -> None:
    receipt_id = server.receipt(server.document())
    unknown = _refused(server.replay(uuid.uuid4().hex), 404, "not_found")
    other = _refused(server.replay(receipt_id, who="other"), 404, "not_found")
    assert unknown == other
    assert unknown["error"]["message"] == "receipt not found"


def test_replay_needs_the_replay_scope(server: Server) -> None:
    receipt_id = server.receipt(server.document())
    denied = server.replay(receipt_id, who="reader")
    assert denied.status_code == 403 and denied.json()["error"]["code"]


def test_legacy_receipt_without_snapshot_is_unreplayable(server: Server) -> None:
    ledger = server.services.ledger
    event = ledger.append(retrieval_draft(ledger))  # no policy_snapshot: a legacy post
    server.services.projector.catch_up()
    body = _refused(server.replay(event.payload["receipt_id"]), 422, "unreplayable.missing_policy_snapshot")
    assert "policy_snapshot" in body["error"]["message"]


def test_replay_of_a_replay_is_refused(server: Server) -> None:
    receipt_id = server.receipt(server.document())
    replay_id = server.replayed(receipt_id)["replay_receipt_id"]
    body = _refused(server.replay(replay_id), 422, "unreplayable.nested_replay")
    assert "parent_receipt_id" in body["error"]["message"]


@pytest.mark.parametrize("tamper", ["yaml", "hash_and_yaml", "null_pair"])
def test_tampered_snapshot_in_the_read_model_is_refused(server: Server, tamper: str) -> None:
    if tamper != "null_pair":
        server.publish(DENY_HANDBOOK)
    receipt_id = server.receipt(server.document())
    original = server.replayed(receipt_id)  # replayable before the tampering
    assert original["replay_receipt_id"]
    table = server.services.ledger.store.table(RECEIPTS_TABLE)
    forged_yaml = ALLOW_ALL
    snapshot = {
        "yaml": {
            "bundle_hash": hashlib.sha256(DENY_HANDBOOK.encode()).hexdigest(),
            "bundle_yaml": forged_yaml,
        },
        # A consistent forgery (hash of the forged text): only the signed receipt tells.
        "hash_and_yaml": {
            "bundle_hash": hashlib.sha256(forged_yaml.encode()).hexdigest(),
            "bundle_yaml": forged_yaml,
        },
        "null_pair": {
            "bundle_hash": hashlib.sha256(forged_yaml.encode()).hexdigest(),
            "bundle_yaml": forged_yaml,
        },
    }[tamper]
    import orjson

    row = {**snapshot, "captured_at": "2026-01-01T00:00:00Z"}
    server.execute(
        f"UPDATE {table} SET policy_snapshot=? WHERE receipt_id=?",
        (orjson.dumps(row, option=orjson.OPT_SORT_KEYS).decode(), receipt_id),
    )
    body = _refused(server.replay(receipt_id), 422, "unreplayable.invalid_snapshot")
    assert "policy_snapshot" in body["error"]["message"]
    assert forged_yaml not in body["error"]["message"]


def test_unparseable_snapshot_yaml_is_refused(server: Server) -> None:
    """Text and hash agree (and match the signed receipt) but the YAML does not parse:
    a receipt forged before signing, or a parser change; written straight to the log."""
    ledger = server.services.ledger
    broken = "rules: [unclosed\n"
    from ledger.domain.events import PolicySnapshot

    snapshot = PolicySnapshot(
        bundle_hash=hashlib.sha256(broken.encode()).hexdigest(),
        bundle_yaml=broken,
        captured_at="2026-01-01T00:00:00Z",
    )
    event = ledger.append(retrieval_draft(ledger, snapshot=snapshot))
    server.services.projector.catch_up()
    body = _refused(server.replay(event.payload["receipt_id"]), 422, "unreplayable.invalid_snapshot")
    assert "YAML" in body["error"]["message"]


def test_erased_query_is_unreplayable(server: Server) -> None:
    receipt_id = server.receipt(server.document(), subject_id="subj-7")
    erased = server.client.post("/v1/erasures", json={"subject_id": "subj-7"}, headers=server.headers())
    assert erased.status_code == 200, erased.text
    _refused(server.replay(receipt_id), 422, "unreplayable.erased")


def test_at_position_outside_the_receipt_and_the_log_is_refused(server: Server) -> None:
    doc = server.document()
    receipt_id = server.receipt(doc)
    position = server.client.get(f"/v1/receipts/{receipt_id}", headers=server.headers()).json()["position"]
    size = server.services.ledger.size
    for bad in (position - 1, size + 1):
        body = _refused(server.replay(receipt_id, at_position=bad), 422, "invalid_at_position")
        assert body["error"]["message"].startswith("at_position")
    assert server.replay(receipt_id, at_position=0).status_code == 400
    assert server.replay(receipt_id, at_position="x").status_code == 400
    assert server.replay(receipt_id, at_position=position).status_code == 201


def test_refusals_write_nothing(server: Server) -> None:
    receipt_id = server.receipt(server.document())
    size = server.services.ledger.size
    _refused(server.replay(uuid.uuid4().hex), 404, "not_found")
    _refused(server.replay(receipt_id, who="other"), 404, "not_found")
    _refused(server.replay(receipt_id, at_position=size + 5), 422, "invalid_at_position")
    assert server.services.ledger.size == size


# --- external receipts: the diff and each entry's status -------------------------------
def test_unchanged_receipt_replays_with_a_signed_linked_receipt(server: Server) -> None:
    doc = server.document()
    receipt_id = server.receipt(doc)
    body = server.replayed(receipt_id)
    assert body["original_receipt_id"] == receipt_id and body["replay_receipt_id"]
    assert body["integrity"] == "not_applicable" and body["engine"] == "external:test-rag"
    assert body["server_version"] and "policy_version" in body
    [entry] = body["entries"]
    assert entry["status"] == "unchanged" and entry["chunk_id"] == doc["chunks"][0]["chunk_id"]
    assert entry["rank"] == 1 and entry["citation_id"]
    assert body["entry_counts"]["unchanged"] == 1 and sum(body["entry_counts"].values()) == 1
    envelope = body["diff"]["data_drift"]
    assert envelope["context_hash"]["changed"] is False
    assert envelope["context_hash"]["original"] == envelope["context_hash"]["replay"]
    assert envelope["selected_entries"]["added"] == [] and envelope["selected_entries"]["removed"] == []
    assert envelope["selected_entries"]["common"] == 1
    common = envelope["selected_entries"]["common_entries"][0]
    assert (common["old_rank"], common["new_rank"], common["moved"]) == (1, 1, False)
    assert envelope["filters_applied"] == {"added": [], "removed": []}
    assert SNIPPET not in str(body)  # document text never in the answer

    # The replay receipt: signed, mode as_of_replay, linked both ways.
    replay_view = server.client.get(f"/v1/receipts/{body['replay_receipt_id']}", headers=server.headers())
    assert replay_view.status_code == 200
    replay_json = replay_view.json()
    assert replay_json["mode"] == "as_of_replay" and replay_json["parent_receipt_id"] == receipt_id
    assert replay_json["replay_chain"] == {"parent_receipt_id": receipt_id, "replays": []}
    original_view = server.client.get(f"/v1/receipts/{receipt_id}", headers=server.headers()).json()
    assert original_view["replay_chain"]["parent_receipt_id"] is None
    assert [r["receipt_id"] for r in original_view["replay_chain"]["replays"]] == [body["replay_receipt_id"]]
    events = server.client.get("/v1/events?type=ReplayRecorded&order=asc", headers=server.headers()).json()[
        "events"
    ]
    link = events[-1]["payload"]
    assert (
        link["original_receipt_id"] == receipt_id and link["replay_receipt_id"] == body["replay_receipt_id"]
    )
    assert link["summary"]["entries_common"] == 1 and link["integrity_finding"] is None
    assert body["replay_receipt"]["position"] == replay_json["position"]
    ledger = server.services.ledger
    ledger.issue_checkpoint()
    assert verify_store(ledger.store, ledger.root_public_key, deep=True).ok


def test_document_edited_after_the_receipt(server: Server) -> None:
    doc = server.document()
    receipt_id = server.receipt(doc)
    position_then = server.services.ledger.size
    # A new version that still says it (moved down): superseded; then one that no longer does.
    server.document("# Retention\n\nIntro.\n\n" + SNIPPET + "\n", document_id=doc["document_id"])
    superseded = server.replayed(receipt_id)
    [entry] = superseded["entries"]
    assert entry["status"] == "superseded" and entry["current_chunk_id"] not in (None, entry["chunk_id"])
    envelope = superseded["diff"]["data_drift"]
    assert [e["chunk_id"] for e in envelope["selected_entries"]["removed"]] == [entry["chunk_id"]]
    assert envelope["context_hash"]["changed"] is True and envelope["selected_entries"]["common"] == 0
    server.document("# Retention\n\nAudit logs are kept for 90 days.\n", document_id=doc["document_id"])
    changed = server.replayed(receipt_id)
    assert changed["entries"][0]["status"] == "changed"
    # As of the receipt's own time the entry still stood.
    then = server.replayed(receipt_id, at_position=position_then)
    assert then["entries"][0]["status"] == "unchanged" and then["at_position"] == position_then
    assert then["diff"]["data_drift"]["context_hash"]["changed"] is False


def test_a_section_unchanged_in_a_new_version_is_unchanged(server: Server) -> None:
    """Chunk ids come from content: editing another section keeps the cited one's id, and
    the cited text stands as it was, so the entry is unchanged (and kept by the replay)."""
    doc = server.document()
    receipt_id = server.receipt(doc)
    edited = server.document(
        "# Retention\n\nAudit logs are kept for 180 days.\n\n## Access\n\nEveryone may read.\n",
        document_id=doc["document_id"],
    )
    assert edited["version"] == 2 and edited["chunks"][0]["chunk_id"] == doc["chunks"][0]["chunk_id"]
    body = server.replayed(receipt_id)
    [entry] = body["entries"]
    assert entry["status"] == "unchanged", entry
    envelope = body["diff"]["data_drift"]
    assert envelope["selected_entries"]["removed"] == [] and envelope["selected_entries"]["common"] == 1


def test_removed_scrubbed_and_expired_entries(server: Server) -> None:
    removed_doc = server.document(document_id="doc-removed")
    removed_receipt = server.receipt(removed_doc)
    deleted = server.client.delete("/v1/documents/doc-removed", headers=server.headers())
    assert deleted.status_code == 200, deleted.text
    assert server.replayed(removed_receipt)["entries"][0]["status"] == "removed"

    scrubbed_doc = server.document(document_id="doc-scrubbed")
    scrubbed_receipt = server.receipt(scrubbed_doc)
    erased = server.client.post(
        "/v1/erasures", json={"document_id": "doc-scrubbed"}, headers=server.headers()
    )
    assert erased.status_code == 200, erased.text
    scrubbed = server.replayed(scrubbed_receipt)
    assert scrubbed["entries"][0]["status"] == "scrubbed"
    assert (
        scrubbed["diff"]["data_drift"]["selected_entries"]["removed"][0]["chunk_id"]
        == (scrubbed_doc["chunks"][0]["chunk_id"])
    )

    expiring_receipt = server.receipt(server.document(document_id="doc-expiring"))
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=400)
    server.services.clock = lambda: later
    assert server.replayed(expiring_receipt)["entries"][0]["status"] == "expired"


def test_snapshot_policy_filters_and_survives_a_new_bundle(server: Server) -> None:
    server.publish(DENY_HANDBOOK)
    receipt_id = server.receipt(server.document())  # the external engine ignored the policy
    first = server.replayed(receipt_id)
    [entry] = first["entries"]
    assert entry["status"] == "filtered_by_snapshot_policy" and entry["rule_id"] == "no-handbook"
    added = first["diff"]["data_drift"]["filters_applied"]["added"]
    assert added == [{"rule_id": "no-handbook", "chunk_id": entry["chunk_id"], "action": "deny"}]
    # The live bundle is overwritten: the snapshot still decides.
    server.publish(ALLOW_ALL)
    assert server.replayed(receipt_id)["entries"][0]["status"] == "filtered_by_snapshot_policy"


def test_scopes_of_the_receipt_decide_unless_scope_rules(server: Server) -> None:
    server.publish(
        "version: scoped\nrules:\n  - id: restricted-scope\n    action: deny\n"
        "    match: {sensitivity: [restricted]}\n    unless_scope: knowledge.restricted.read\n"
    )
    receipt_id = server.receipt(server.document(sensitivity="restricted"))  # auth_scope: retrieval.write
    assert server.replayed(receipt_id)["entries"][0]["rule_id"] == "restricted-scope"


# --- idempotency, read-only, fail-open ---------------------------------------------
def test_idempotent_replay(server: Server) -> None:
    receipt_id = server.receipt(server.document())
    first = server.replayed(receipt_id, **{"Idempotency-Key": "replay-1"})
    again = server.replay(receipt_id, **{"Idempotency-Key": "replay-1"})
    assert again.status_code == 201 and again.json()["dedup"] is True
    assert again.json()["replay_receipt_id"] == first["replay_receipt_id"]
    other = server.replay(
        receipt_id, at_position=server.services.ledger.size, **{"Idempotency-Key": "replay-1"}
    )
    _refused(other, 409, "idempotency_key_reused")


def test_replay_is_read_only_on_everything_but_its_own_entries(server: Server) -> None:
    receipt_id = server.receipt(server.document())
    before = server.services.ledger.size
    server.replayed(receipt_id)
    types = [event.type for event in server.services.ledger.read(before + 1)]
    assert types == ["RetrievalRecorded", "ReplayRecorded"]


def _block_writes(server: Server, on: bool) -> None:
    config = server.services.config.ledger
    if config.database_url is None:
        statement = (
            "CREATE TRIGGER refuse_writes BEFORE INSERT ON stored_events "
            "BEGIN SELECT RAISE(ABORT, 'full'); END"
            if on
            else "DROP TRIGGER refuse_writes"
        )
        import sqlite3

        conn = sqlite3.connect(config.sqlite_path)
        try:
            conn.execute(statement)
            conn.commit()
        finally:
            conn.close()
        return
    from tests.conftest import pg_connect

    schema = config.database_url.split("schema=")[1]
    with pg_connect() as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        if on:
            conn.execute(
                "CREATE FUNCTION refuse_writes() RETURNS trigger AS $$ BEGIN "
                "RAISE EXCEPTION 'full'; END $$ LANGUAGE plpgsql"
            )
            conn.execute(
                "CREATE TRIGGER refuse_writes BEFORE INSERT ON citeledger_events "
                "FOR EACH ROW EXECUTE FUNCTION refuse_writes()"
            )
        else:
            conn.execute("DROP TRIGGER refuse_writes ON citeledger_events")
            conn.execute("DROP FUNCTION refuse_writes()")


def test_failed_replay_write_still_returns_the_diff(server: Server) -> None:
    receipt_id = server.receipt(server.document())
    size = server.services.ledger.size
    _block_writes(server, True)
    try:
        response = server.replay(receipt_id)
    finally:
        _block_writes(server, False)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["replay_receipt_id"] is None and body["replay_receipt"] is None
    assert body["entries"][0]["status"] == "unchanged"
    assert body["diff"]["data_drift"]["selected_entries"]["common"] == 1
    assert server.services.ledger.size == size
    # The store works again: the next replay is recorded.
    assert server.replayed(receipt_id)["replay_receipt_id"]
