"""A store cut back under its own evidence (entries and checkpoints deleted, the
Merkle tiles left) is held, not healed: the API keeps answering reads and
verification, refuses writes with 503 `integrity_hold`, reports the findings in
/v1/healthz and `citeledger lag`, and accepts writes again only after
`citeledger repair --yes` recorded a signed IntegrityRepaired entry."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from ledger.config import LedgerConfig
from ledger.storage.store import CHECKPOINT_STREAM_ID, LEDGER_STREAM_ID
from ledger.writing.application import Ledger
from tests.api_support import DOC, Api, make_api  # noqa: F401 - fixture
from tests.conftest import RawStore
from tests.factories import TENANT, retrieval_draft
from tests.server_process import run_cli, server_env


def _cut_back(ledger_config: LedgerConfig, raw_store: RawStore) -> int:
    """40 entries and two checkpoints; then the newest 15 entries and the newest
    checkpoint are deleted, as someone holding the database would."""
    ledger = Ledger(LedgerConfig(**{**ledger_config.__dict__, "run_checkpointer": False}))
    try:
        ledger.append_batch([retrieval_draft(ledger) for _ in range(24)], tenant_id=TENANT)
        ledger.issue_checkpoint()
        ledger.append_batch([retrieval_draft(ledger) for _ in range(15)], tenant_id=TENANT)
        assert ledger.issue_checkpoint() is not None
        ledger.tree.flush()
    finally:
        ledger.close()
    for position in range(26, 41):
        raw_store.execute(
            "DELETE FROM stored_events WHERE originator_id = ? AND originator_version = ?",
            (raw_store.stream_value(LEDGER_STREAM_ID), position),
        )
    raw_store.execute(
        "DELETE FROM stored_events WHERE originator_id = ? AND originator_version = 2",
        (raw_store.stream_value(CHECKPOINT_STREAM_ID),),
    )
    return 25


def test_a_cut_back_store_is_held_until_an_operator_repairs_it(
    ledger_config: LedgerConfig, raw_store: RawStore, make_api: Callable[..., Api]
) -> None:
    size = _cut_back(ledger_config, raw_store)
    api = make_api()
    health = api.client.get("/v1/healthz").json()
    assert health["integrity"]["ok"] is False
    assert [f["kind"] for f in health["integrity"]["findings"]] == ["log_shorter_than_tiles"]
    assert f"the log has {size} entries" in health["integrity"]["findings"][0]["message"]
    refused = api.client.post("/v1/documents", json={"path": "a.md", "text": DOC}, headers=api.headers())
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "integrity_hold"
    assert refused.json()["error"]["retryable"] is False
    # Reads and verification go on.
    latest = api.client.get("/v1/checkpoints/latest", headers=api.headers("reader"))
    assert latest.status_code == 200 and latest.json()["checkpoint"]["tree_size"] == 25
    assert (
        api.client.get("/v1/checkpoints/consistency?from=1&to=25", headers=api.headers("reader")).status_code
        == 200
    )
    assert api.services.ledger.size == size  # nothing was appended

    env = server_env(ledger_config, "t-" + uuid.uuid4().hex, CITELEDGER_DATA_DIR=str(ledger_config.data_dir))
    lag = run_cli(["lag"], env)
    assert lag.returncode == 1, lag.stderr
    reported: dict[str, Any] = json.loads(lag.stdout)
    assert [f["kind"] for f in reported["integrity"]["findings"]] == ["log_shorter_than_tiles"]
    verified = run_cli(["verify"], env)  # the log alone is a clean prefix; the store is not
    assert verified.returncode == 1 and "integrity: log_shorter_than_tiles" in verified.stdout
    dry = run_cli(["repair"], env)
    assert dry.returncode == 1 and "log_shorter_than_tiles" in dry.stdout
    repaired = run_cli(["repair", "--yes", "--actor", "ops-alice"], env)
    assert repaired.returncode == 0, repaired.stderr
    assert f"IntegrityRepaired at position {size + 1}" in repaired.stdout
    again = run_cli(["lag"], env)
    assert again.returncode == 0, again.stdout

    fresh = make_api()
    integrity = fresh.client.get("/v1/healthz").json()["integrity"]
    assert integrity == {"ok": True, "findings": [], "witness_alarms": []}
    assert fresh.document()["document_id"]
    entry = fresh.services.ledger.get(size + 1)
    assert entry is not None and entry.type == "IntegrityRepaired"
    assert entry.envelope["actor"] == "ops-alice"
    assert entry.payload["findings"][0]["kind"] == "log_shorter_than_tiles"
