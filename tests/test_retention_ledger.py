"""Crypto-shredding on real stores: keys destroyed, the act recorded and signed,
the text gone from the database files, the history still verifying."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from ledger.evidence.bundle import build_bundle, verify_bundle
from ledger.storage.audit import verify_store
from ledger.writing.application import Ledger
from ledger.writing.retention import RetentionRules, expiry_key_for, record_pending, shred
from ledger.writing.sealing import KeyDestroyed, document_key_ref
from tests.conftest import RawStore
from tests.factories import TENANT, UseCases


def test_expiry_respects_the_floor_and_rounds_up_to_midnight() -> None:
    rules = RetentionRules(floor_days=180, default_days=365)
    recorded = datetime(2026, 11, 23, 15, 30, tzinfo=UTC)
    assert rules.expires_at(recorded, 30) == datetime(2027, 5, 23, tzinfo=UTC)  # floor wins: 180 days
    assert rules.expires_at(recorded, 400) == datetime(2027, 12, 29, tzinfo=UTC)
    assert rules.expires_at(recorded, None) == datetime(2027, 11, 24, tzinfo=UTC)
    # The clock's UTC moments take a per-day cache; a midnight, the last microsecond of a day, and
    # the same moments in another zone or naive (taken as UTC) end the same days.
    for moment in (
        datetime(2026, 11, 23, tzinfo=UTC),
        datetime(2026, 11, 23, 23, 59, 59, 999999, tzinfo=UTC),
    ):
        for same in (moment, moment.astimezone(timezone(timedelta(hours=-5))), moment.replace(tzinfo=None)):
            assert rules.expires_at(same, 400) == datetime(2027, 12, 29, tzinfo=UTC)
    assert (
        expiry_key_for(TENANT, datetime(2027, 5, 23, tzinfo=UTC), "doc-1")
        == f"expiry/{TENANT}/2027-05-22:doc-1"
    )
    with pytest.raises(ValueError, match="retention days"):
        RetentionRules(floor_days=0)


def _database_bytes(ledger: Ledger) -> bytes:
    base = ledger.config.sqlite_path
    return b"".join(
        path.read_bytes() for path in (base, Path(f"{base}-wal"), Path(f"{base}-shm")) if path.exists()
    )


def _wrapped_key(raw_store: RawStore, key_ref: str) -> bytes:
    rows = raw_store.execute("SELECT wrapped FROM citeledger_data_keys WHERE key_ref=?", (key_ref,))
    return bytes(rows[0][0])


def test_shredding_a_document_erases_its_text_and_keeps_history_verifiable(
    ledger: Ledger, raw_store: RawStore
) -> None:
    marker = "MARKER-4c1d-unique-chunk-text"
    ingested = UseCases(ledger).ingest(f"Confidential: {marker}.")
    document_id = ingested.payload["document_id"]
    key_ref = document_key_ref(TENANT, document_id)
    chunk = ingested.payload["chunks"][0]["text"]
    assert marker in ledger.sealer.unseal(chunk, tenant_id=TENANT)
    wrapped = _wrapped_key(raw_store, key_ref)
    ledger.issue_checkpoint()

    scrub = shred(
        ledger,
        tenant_id=TENANT,
        key_refs=[key_ref],
        reason="erasure_request",
        actor="dpo",
        document_ids=[document_id],
    )
    assert scrub is not None and scrub.type == "RetentionScrubbed"
    assert scrub.payload["key_refs"] == [key_ref] and scrub.payload["document_ids"] == [document_id]
    with pytest.raises(KeyDestroyed):
        ledger.sealer.unseal(chunk, tenant_id=TENANT)
    assert shred(ledger, tenant_id=TENANT, key_refs=[key_ref], reason="erasure_request", actor="dpo") is None

    ledger.issue_checkpoint()
    assert verify_store(ledger.store, ledger.root_public_key, deep=True).ok
    assert verify_bundle(build_bundle(ledger, ingested.position), ledger.root_public_key)

    if ledger.config.database_url is None:
        files = _database_bytes(ledger)
        assert marker.encode() not in files
        assert wrapped not in files, "the destroyed key's bytes linger in the SQLite file or WAL"
    else:
        dumped = raw_store.execute("SELECT string_agg(t::text, '|') FROM citeledger_data_keys t")[0][0] or ""
        assert wrapped.hex() not in dumped and marker not in dumped
        events = raw_store.execute("SELECT string_agg(encode(state, 'escape'), '|') FROM stored_events")[0][0]
        assert marker not in events


def test_a_crash_between_destroying_and_recording_is_recovered(ledger: Ledger) -> None:
    ingested = UseCases(ledger).ingest()
    key_ref = document_key_ref(TENANT, ingested.payload["document_id"])
    assert ledger.data_keys.destroy(key_ref, TENANT, "governance_scrub")  # ...and the process dies here
    recorded = record_pending(ledger, actor="retention")
    assert [event.payload["key_refs"] for event in recorded] == [[key_ref]]
    assert recorded[0].payload["reason"] == "governance_scrub"
    assert record_pending(ledger, actor="retention") == []


def test_shredding_refuses_another_tenants_keys(ledger: Ledger) -> None:
    with pytest.raises(ValueError, match="does not belong"):
        shred(
            ledger, tenant_id=TENANT, key_refs=["document/other/doc-1"], reason="erasure_request", actor="x"
        )


def test_a_never_used_key_ref_gets_a_tombstone(ledger: Ledger) -> None:
    key_ref = document_key_ref(TENANT, "never-ingested")
    event = shred(ledger, tenant_id=TENANT, key_refs=[key_ref], reason="erasure_request", actor="dpo")
    assert event is not None
    with pytest.raises(KeyDestroyed):
        ledger.sealer.seal("new text", tenant_id=TENANT, key_ref=key_ref)


def test_retention_run_destroys_past_buckets_except_held_scopes(ledger: Ledger) -> None:
    from ledger.writing.retention import run_retention
    from ledger.writing.sealing import expiry_key_ref

    def sealed(day: str, scope: str) -> object:
        return ledger.sealer.seal(
            f"snapshot {day} {scope}",
            tenant_id=TENANT,
            key_ref=document_key_ref(TENANT, scope),
            extra_key_refs=[expiry_key_ref(TENANT, day, scope)],
        )

    old, held, today, other_tenant = (
        sealed("2026-11-20", "doc-a"),
        sealed("2026-11-20", "doc-held"),
        sealed("2026-11-23", "doc-a"),
        ledger.sealer.seal("x", tenant_id="other", key_ref=expiry_key_ref("other", "2026-11-01", "doc-z")),
    )
    now = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
    event = run_retention(ledger, tenant_id=TENANT, now=now, held_scopes=frozenset({"doc-held"}))
    assert event is not None and event.payload["reason"] == "retention_expired"
    assert event.payload["key_refs"] == [expiry_key_ref(TENANT, "2026-11-20", "doc-a")]
    with pytest.raises(KeyDestroyed):
        ledger.sealer.unseal(old, tenant_id=TENANT)  # type: ignore[arg-type]
    assert ledger.sealer.unseal(held, tenant_id=TENANT).startswith("snapshot")  # type: ignore[arg-type]
    assert ledger.sealer.unseal(today, tenant_id=TENANT).startswith("snapshot")  # type: ignore[arg-type]
    assert ledger.sealer.unseal(other_tenant, tenant_id="other") == "x"  # type: ignore[arg-type]
    assert run_retention(ledger, tenant_id=TENANT, now=now, held_scopes=frozenset({"doc-held"})) is None
