"""The ledger contract: every test here runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import base64
import hmac
import itertools
import os
import stat
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import orjson
import pytest

from ledger.domain.entries import EventDraft, entry_signature_ok, signing_input_of
from ledger.domain.events import PolicySnapshot, SigningKeyRotated
from ledger.domain.fields import MAX_ENVELOPE_BYTES
from ledger.domain.payloads import EventRejected
from ledger.evidence.bundle import BundleError, build_bundle, verify_bundle
from ledger.evidence.export_file import verify_export
from ledger.storage.audit import verify_store, write_export
from ledger.tlog.canonical import canonical_json
from ledger.tlog.merkle import verify_consistency, verify_inclusion
from ledger.tlog.signing import verify_signature
from ledger.usecases.context import Caller, draft
from ledger.writing.application import Ledger
from ledger.writing.idempotency import IdempotencyKey, Protected, StoredAnswer, records, reveal
from ledger.writing.sealing import KeyDestroyed, KeyedMac, SealBroken
from tests.factories import TENANT, document_draft, retrieval_draft


def test_appends_are_signed_chained_and_contiguous(ledger: Ledger) -> None:
    recorded = ledger.append_batch([document_draft(ledger), retrieval_draft(ledger)], tenant_id=TENANT)
    recorded.append(ledger.append(retrieval_draft(ledger), tenant_id=TENANT))
    assert [event.position for event in recorded] == [2, 3, 4]  # 1 is the genesis key entry
    read_back = list(ledger.read())
    assert [event.position for event in read_back] == [1, 2, 3, 4]
    for previous, event in itertools.pairwise(read_back):
        assert event.envelope["prev_hash"] == previous.leaf_hash.hex()
        assert entry_signature_ok(event.envelope, ledger.public_keys[event.kid])
    assert read_back[3].entry == recorded[2].entry
    assert verify_store(ledger.store, ledger.root_public_key, deep=True).ok


def test_written_entries_read_as_their_stored_bytes(ledger: Ledger) -> None:
    """The envelope a fresh entry carries is the signer's (never parsed back): it must equal
    the stored bytes read afresh, member for member, and encode to exactly those bytes."""
    snapshot = PolicySnapshot(bundle_hash=None, bundle_yaml=None, captured_at="2026-01-01T00:00:00Z")
    drafts = [document_draft(ledger), retrieval_draft(ledger), retrieval_draft(ledger, snapshot=snapshot)]
    recorded = ledger.append_batch(drafts, tenant_id=TENANT)
    for event, stored in zip(recorded, list(ledger.read())[-3:], strict=True):
        assert "envelope" in event.__dict__  # from the signer
        assert event.envelope == orjson.loads(event.entry) == stored.envelope
        assert event.payload == stored.payload
        assert canonical_json(event.envelope) == event.entry == stored.entry
        assert (event.kid, event.signature, event.event_id) == (stored.kid, stored.signature, stored.event_id)


def _reference_signature_ok(envelope: dict[str, Any], public_raw: bytes) -> bool:
    """The definition: the signature over the canonical JSON of every other member."""
    signature = envelope.get("signature")
    if not isinstance(signature, str):
        return False
    try:
        return verify_signature(public_raw, signing_input_of(envelope), signature)
    except ValueError:
        return False


def test_entry_signature_check_equals_its_definition(ledger: Ledger) -> None:
    """The byte-splicing check agrees with re-encoding the envelope, on entries and on tampering."""
    recorded = ledger.append_batch([document_draft(ledger), retrieval_draft(ledger)], tenant_id=TENANT)
    other_key = ledger.keydir.generate().public_raw
    for event in [*ledger.read(), *recorded]:
        envelope = event.envelope
        variants: list[dict[str, Any]] = [
            envelope,
            {**envelope, "actor": "someone-else"},
            {**envelope, "position": envelope["position"] + 1},
            {**envelope, "signature": envelope["signature"][:-4] + "AAA="},
            {**envelope, "signature": envelope["signature"][:-2]},
            {**envelope, "signature": 7},
            {k: v for k, v in envelope.items() if k != "signature"},
            {**envelope, "extra": {"signature": envelope["signature"]}},
        ]
        for public_raw in (ledger.public_keys[event.kid], other_key):
            assert entry_signature_ok(event.entry, public_raw) == (public_raw != other_key)
            for variant in variants:
                expected = _reference_signature_ok(variant, public_raw)
                assert entry_signature_ok(variant, public_raw) == expected, variant


def test_reopened_ledger_continues_the_same_chain(open_ledger: Callable[..., Ledger]) -> None:
    first = open_ledger()
    first.append(retrieval_draft(first), tenant_id=TENANT)
    root = first.tree.root(first.size)
    first.close()
    second = open_ledger()
    assert second.size == 2 and second.tree.root(2) == root
    assert second.append(retrieval_draft(second), tenant_id=TENANT).position == 3
    assert verify_store(second.store, second.root_public_key, deep=True).ok


def test_policy_snapshot_absent_and_null_pair_stay_distinct(ledger: Ledger) -> None:
    legacy = ledger.append(retrieval_draft(ledger), tenant_id=TENANT)
    null_pair = ledger.append(
        retrieval_draft(
            ledger,
            snapshot=PolicySnapshot(bundle_hash=None, bundle_yaml=None, captured_at="2026-11-23T10:00:00Z"),
        ),
        tenant_id=TENANT,
    )
    assert "policy_snapshot" not in legacy.payload
    assert null_pair.payload["policy_snapshot"] == {
        "bundle_hash": None,
        "bundle_yaml": None,
        "captured_at": "2026-11-23T10:00:00Z",
    }


# -- bad input ------------------------------------------------------------------------
def _bad(ledger: Ledger, mutate: Callable[[EventDraft], EventDraft]) -> EventRejected:
    before = ledger.size
    with pytest.raises(EventRejected) as caught:
        ledger.append_batch([retrieval_draft(ledger), mutate(retrieval_draft(ledger))], tenant_id=TENANT)
    assert ledger.sync() == before, "a refused batch must write nothing"
    return caught.value


def _with_payload(valid: EventDraft, **changes: Any) -> EventDraft:
    """The draft with a deliberately malformed payload: a raw mapping the schemas must refuse
    (no payload class could hold it, so it cannot come from `draft()`)."""
    payload = (
        valid.payload.model_dump(mode="json") if not isinstance(valid.payload, dict) else dict(valid.payload)
    )
    payload.update(changes)
    return replace(valid, payload=payload)


def test_unknown_type_is_refused(ledger: Ledger) -> None:
    # Deliberately hand-built: no payload class is named "Nope", so `draft()` cannot make this event.
    error = _bad(ledger, lambda d: EventDraft(type="Nope", tenant_id=TENANT, actor="a", payload={}))
    assert error.field == "type"


def test_schema_violation_names_the_field(ledger: Ledger) -> None:
    error = _bad(ledger, lambda d: _with_payload(d, status="maybe"))
    assert error.field == "payload.status"
    error = _bad(ledger, lambda d: _with_payload(d, context_hash="xyz"))
    assert error.field == "payload.context_hash"
    error = _bad(ledger, lambda d: _with_payload(d, surprise=1))
    assert error.field == "payload.surprise"


def test_plain_text_where_a_sealed_value_belongs_is_refused(ledger: Ledger) -> None:
    error = _bad(ledger, lambda d: _with_payload(d, query="what is the secret?"))
    assert error.field == "payload.query"


def test_wrong_tenant_is_refused(ledger: Ledger) -> None:
    error = _bad(ledger, lambda d: replace(d, tenant_id="other"))
    assert error.field == "events[1].tenant_id"
    error = _bad(ledger, lambda d: replace(d, tenant_id="Bad Tenant!"))
    assert "tenant_id" in error.field


def test_oversized_payload_is_refused(ledger: Ledger) -> None:
    huge = "x" * (MAX_ENVELOPE_BYTES + 10)
    error = _bad(ledger, lambda d: _with_payload(d, receipt_id=huge))
    assert error.field == "payload.receipt_id"


def test_system_events_cannot_be_forged_through_append(ledger: Ledger) -> None:
    genesis = ledger.get(1)
    assert genesis is not None
    error = _bad(
        ledger,
        lambda d: draft(Caller(TENANT, "a"), SigningKeyRotated.model_validate(genesis.payload)),
    )
    assert error.field == "type"


# -- sealing ----------------------------------------------------------------------------
def test_text_is_sealed_and_signatures_cover_only_ciphertext(ledger: Ledger) -> None:
    marker = "UNIQUE-MARKER-7f3a9c"
    event = ledger.append(retrieval_draft(ledger, query=f"who wrote {marker}?"), tenant_id=TENANT)
    assert marker.encode() not in event.entry
    for row in ledger.read():
        assert marker.encode() not in row.entry
    sealed = event.payload["query"]
    assert ledger.sealer.unseal(sealed, tenant_id=TENANT) == f"who wrote {marker}?"
    with pytest.raises(SealBroken):
        ledger.sealer.unseal(sealed, tenant_id="other")
    forged = dict(sealed, ciphertext=base64.b64encode(b"\x00" * 40).decode())
    with pytest.raises(SealBroken):
        ledger.sealer.unseal(forged, tenant_id=TENANT)


def test_destroyed_data_key_leaves_signatures_and_proofs_valid(ledger: Ledger) -> None:
    event = ledger.append(retrieval_draft(ledger), tenant_id=TENANT)
    ledger.issue_checkpoint()
    assert ledger.data_keys.destroy(f"tenant/{TENANT}", TENANT, "erasure_request")
    assert not ledger.data_keys.destroy(f"tenant/{TENANT}", TENANT, "erasure_request")  # idempotent
    with pytest.raises(KeyDestroyed):
        ledger.sealer.unseal(event.payload["query"], tenant_id=TENANT)
    assert verify_store(ledger.store, ledger.root_public_key, deep=True).ok
    assert (
        verify_bundle(build_bundle(ledger, event.position), ledger.root_public_key)["position"]
        == event.position
    )


# -- keys ----------------------------------------------------------------------------------
def test_key_files_are_private_and_never_logged(ledger: Ledger) -> None:
    keys_dir = ledger.config.keys_dir
    assert stat.S_IMODE(keys_dir.stat().st_mode) == 0o700
    secrets = [path for path in keys_dir.iterdir() if path.suffix == ".key"]
    assert len(secrets) >= 2  # master key + root signing key
    for path in secrets:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    ledger.append(retrieval_draft(ledger), tenant_id=TENANT)
    private_pem = (keys_dir / f"{ledger.signing_key().kid}.key").read_bytes()
    body = private_pem.split(b"-----")[2].strip()
    raw_private = base64.b64decode(body)[-32:]
    for event in ledger.read():
        assert body not in event.entry
        assert base64.b64encode(raw_private) not in event.entry
    assert "private" not in repr(ledger.signing_key())


def test_widely_readable_key_file_is_refused(open_ledger: Callable[..., Ledger]) -> None:
    ledger = open_ledger()
    key_file = ledger.config.keys_dir / f"{ledger.signing_key().kid}.key"
    ledger.close()
    key_file.chmod(0o644)
    with pytest.raises(Exception, match="chmod 600"):
        open_ledger()


def test_rotation_keeps_old_entries_verifiable(ledger: Ledger) -> None:
    before = ledger.append(retrieval_draft(ledger), tenant_id=TENANT)
    old_kid = ledger.signing_key().kid
    rotation = ledger.rotate_signing_key()
    after = ledger.append(retrieval_draft(ledger), tenant_id=TENANT)
    assert rotation.kid == old_kid and rotation.payload["previous_kid"] == old_kid
    assert after.kid == rotation.payload["new_kid"] != old_kid
    ledger.issue_checkpoint()
    assert verify_store(ledger.store, ledger.root_public_key, deep=True).ok
    for event in (before, after):
        assert verify_bundle(build_bundle(ledger, event.position), ledger.root_public_key)
    latest = ledger.latest_checkpoint()
    assert latest is not None and latest.kid == rotation.payload["new_kid"]


# -- checkpoints and proofs --------------------------------------------------------------------
def test_checkpoints_follow_appends_within_the_configured_delay(open_ledger: Callable[..., Ledger]) -> None:
    ledger = open_ledger(run_checkpointer=True, checkpoint_interval_s=0.2)
    event = ledger.append(retrieval_draft(ledger), tenant_id=TENANT)
    deadline = time.monotonic() + 10  # generous: the machine is shared; the bound itself is 2 intervals
    latest = ledger.latest_checkpoint()
    while (latest is None or latest.tree_size < event.position) and time.monotonic() < deadline:
        time.sleep(0.05)
        latest = ledger.latest_checkpoint()
    assert latest is not None and latest.tree_size >= event.position
    assert latest.note.startswith(ledger.origin + "\n")


def test_on_demand_checkpoint_and_proofs(ledger: Ledger) -> None:
    for _ in range(5):
        ledger.append(retrieval_draft(ledger), tenant_id=TENANT)
    first = ledger.issue_checkpoint()
    assert first is not None and first.tree_size == 6
    assert ledger.issue_checkpoint() == first  # nothing new: no new checkpoint
    for _ in range(4):
        ledger.append(retrieval_draft(ledger), tenant_id=TENANT)
    second = ledger.issue_checkpoint()
    assert second is not None and (second.seq, second.tree_size) == (2, 10)
    verify_consistency(6, 10, first.root, second.root, ledger.consistency_proof(6, 10))
    for position in range(1, 11):
        event = ledger.get(position)
        assert event is not None
        verify_inclusion(event.leaf_hash, position - 1, 10, ledger.inclusion_proof(position, 10), second.root)


def test_export_verifies_offline(ledger: Ledger, tmp_path: Any) -> None:
    for _ in range(3):
        ledger.append(retrieval_draft(ledger), tenant_id=TENANT)
    ledger.issue_checkpoint()
    ledger.append(retrieval_draft(ledger), tenant_id=TENANT)  # pending
    out = tmp_path / "export.jsonl"
    with out.open("wb") as handle:
        assert write_export(ledger.store, handle, ledger.root_public_key) == (5, 1)
    report = verify_export(out, ledger.root_public_key, deep=True)
    assert report.ok and (report.entries, report.covered, report.pending) == (5, 4, 1)
    lines = out.read_bytes().splitlines()
    lines[3] = lines[3].replace(b'"status":"ok"', b'"status":"no_hit"')
    out.write_bytes(b"\n".join(lines) + b"\n")
    report = verify_export(out, ledger.root_public_key)
    assert not report.ok and report.first_bad is not None and report.first_bad.position == 2


def test_bundle_verifies_offline_and_rejects_tampering(ledger: Ledger) -> None:
    event = ledger.append(retrieval_draft(ledger), tenant_id=TENANT)
    bundle = orjson.loads(orjson.dumps(build_bundle(ledger, event.position)))
    assert verify_bundle(bundle, ledger.root_public_key)["event_id"] == event.event_id

    tampered = orjson.loads(orjson.dumps(bundle))
    tampered["entry"]["payload"]["status"] = "denied"
    with pytest.raises(BundleError, match="entry"):
        verify_bundle(tampered, ledger.root_public_key)

    tampered = orjson.loads(orjson.dumps(bundle))
    tampered["inclusion_proof"]["hashes"][0] = "00" * 32
    with pytest.raises(BundleError):
        verify_bundle(tampered, ledger.root_public_key)

    tampered = orjson.loads(orjson.dumps(bundle))
    tampered["checkpoint"]["note"] = tampered["checkpoint"]["note"].replace("\n2\n", "\n3\n")
    with pytest.raises(BundleError, match="checkpoint"):
        verify_bundle(tampered, ledger.root_public_key)

    other_key = base64.b64decode(bundle["key_chain"][0]["entry"]["payload"]["public_key"])[::-1]
    with pytest.raises(BundleError, match="genesis"):
        verify_bundle(bundle, other_key)


def test_group_commit_batches_concurrent_writers(ledger: Ledger) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from ledger.writing.group_commit import GroupCommitter

    committer = GroupCommitter(ledger)
    drafts = [[retrieval_draft(ledger), retrieval_draft(ledger)] for _ in range(60)]
    try:
        with ThreadPoolExecutor(max_workers=12) as pool:
            results = list(pool.map(lambda d: committer.submit(d, tenant_id=TENANT), drafts))
        bad = retrieval_draft(ledger, tenant="other")
        with pytest.raises(EventRejected):
            committer.submit([retrieval_draft(ledger), bad], tenant_id=TENANT)
    finally:
        committer.close()
    positions = sorted(event.position for result in results for event in result)
    assert positions == list(range(2, 122))  # every event once, nothing from the refused request
    for request, result in zip(drafts, results, strict=True):
        assert [event.event_id for event in result] == [sent.event_id for sent in request]
    assert ledger.sync() == 121
    assert committer.batches < len(drafts), "concurrent writers should share transactions"
    assert verify_store(ledger.store, ledger.root_public_key, deep=True).ok


def test_layered_sealing_is_shredded_by_any_one_key(ledger: Ledger) -> None:
    from ledger.writing.sealing import document_key_ref, expiry_key_ref

    document = document_key_ref(TENANT, "doc-1")
    expiry = expiry_key_ref(TENANT, "2026-12-01", "doc-1")
    chunk = ledger.sealer.seal("chunk text", tenant_id=TENANT, key_ref=document)
    snapshot = ledger.sealer.seal("chunk text", tenant_id=TENANT, key_ref=document, extra_key_refs=[expiry])
    assert snapshot.extra_key_refs == [expiry] and snapshot.ciphertext != chunk.ciphertext
    assert ledger.sealer.unseal(snapshot.model_dump(), tenant_id=TENANT) == "chunk text"
    swapped = snapshot.model_copy(update={"extra_key_refs": []})
    with pytest.raises(SealBroken):  # the key list is bound into the ciphertext
        ledger.sealer.unseal(swapped, tenant_id=TENANT)
    ledger.data_keys.destroy(expiry, TENANT, "retention_expired")
    with pytest.raises(KeyDestroyed):
        ledger.sealer.unseal(snapshot, tenant_id=TENANT)
    assert ledger.sealer.unseal(chunk, tenant_id=TENANT) == "chunk text"


def test_search_index_opens_chunks_through_the_ledgers_key_cache(ledger: Ledger) -> None:
    """One key cache per store: a key destroyed through the ledger is gone for the search
    index projection at once, not once its own copy would have expired."""
    from ledger.writing.sealing import document_key_ref
    from projections.search_index import SearchIndexProjection

    projection = SearchIndexProjection()
    projection.bind_log(ledger.store)
    opener = projection.keys(ledger.store).sealer
    document = document_key_ref(TENANT, "doc-shared")
    sealed = ledger.sealer.seal("chunk text", tenant_id=TENANT, key_ref=document)
    assert opener.unseal(sealed, tenant_id=TENANT) == "chunk text"
    ledger.data_keys.destroy(document, TENANT, "erasure")
    with pytest.raises(KeyDestroyed):
        opener.unseal(sealed, tenant_id=TENANT)


def test_a_closed_ledgers_store_is_not_kept_alive_by_the_shared_key_cache(tmp_path: Any) -> None:
    import gc
    import weakref

    from bootstrap import ledger_context
    from ledger.config import LedgerConfig

    opened = Ledger(LedgerConfig(data_dir=tmp_path / "ledger", run_checkpointer=False))
    ledger_context(opened)  # the search index projection takes the shared key cache too
    store = weakref.ref(opened.store)
    opened.close()
    del opened
    gc.collect()
    assert store() is None


def test_ensure_creates_missing_keys_and_never_revives_a_destroyed_one(ledger: Ledger) -> None:
    from ledger.writing.sealing import document_key_ref

    gone, fresh = document_key_ref(TENANT, "doc-gone"), document_key_ref(TENANT, "doc-fresh")
    ledger.data_keys.ensure([gone], TENANT)
    sealed = ledger.sealer.seal("old text", tenant_id=TENANT, key_ref=gone)
    ledger.data_keys.destroy(gone, TENANT, "erasure")
    ledger.data_keys.ensure([gone, fresh], TENANT)
    assert ledger.data_keys.known(fresh)
    with pytest.raises(KeyDestroyed):
        ledger.sealer.unseal(sealed, tenant_id=TENANT)
    with pytest.raises(KeyDestroyed):
        ledger.sealer.seal("new text", tenant_id=TENANT, key_ref=gone)
    again = ledger.sealer.seal("new text", tenant_id=TENANT, key_ref=fresh)
    assert ledger.sealer.unseal(again, tenant_id=TENANT) == "new text"


def test_keys_ensure_made_are_the_stored_ones(ledger: Ledger) -> None:
    """`ensure` keeps the keys it stored without reading them back: another process, reading
    them from the store, opens what this one sealed under them (and the other way round)."""
    from ledger.writing.sealing import DataKeyStore, Sealer, document_key_ref, expiry_key_ref

    refs = [document_key_ref(TENANT, "doc-new"), expiry_key_ref(TENANT, "2030-01-01", "doc-new")]
    ledger.data_keys.ensure(refs, TENANT)
    sealed = ledger.sealer.seal("the text", tenant_id=TENANT, key_ref=refs[0], extra_key_refs=refs[1:])
    other = Sealer(DataKeyStore(ledger.store, ledger.keydir.master_key()))
    assert other.unseal(sealed, tenant_id=TENANT) == "the text"
    back = other.seal("and back", tenant_id=TENANT, key_ref=refs[1])
    assert ledger.sealer.unseal(back, tenant_id=TENANT) == "and back"


def test_line_deleted_from_an_export_is_named(ledger: Ledger, tmp_path: Any) -> None:
    for _ in range(6):
        ledger.append(retrieval_draft(ledger), tenant_id=TENANT)
    ledger.issue_checkpoint()
    out = tmp_path / "export.jsonl"
    with out.open("wb") as handle:
        write_export(ledger.store, handle, ledger.root_public_key)
    lines = out.read_bytes().splitlines()
    assert lines[1].startswith(b'{"checkpoint":')
    del lines[2 + 3]  # header, one checkpoint, then entries 1.. : this is entry 4
    out.write_bytes(b"\n".join(lines) + b"\n")
    report = verify_export(out, ledger.root_public_key)
    assert report.first_bad is not None and report.first_bad.position == 4


def test_commitments_and_macs_are_hmac_sha256_of_the_salt() -> None:
    """The sealer's MAC with its key states hashed once is RFC 2104's HMAC-SHA256, for every
    salt length (a data key's 32 bytes, and across the 64-byte block)."""
    for length in (0, 1, 31, 32, 63, 64, 65, 200):
        for _ in range(20):
            salt, data = os.urandom(length), os.urandom(length * 3 + 1)
            assert KeyedMac(salt).hexdigest(data) == hmac.digest(salt, data, "sha256").hex()
            assert KeyedMac(salt).digest(data) == hmac.digest(salt, data, "sha256")


def test_revealed_and_stored_answers_keep_every_value_and_seal_protected_parts(ledger: Ledger) -> None:
    """An answer's plain and stored forms, walked past its scalar leaves: every value kept
    (tuples as lists), each protected part in plain in one and sealed in the other."""
    sealed = ledger.sealer.seal("the question", tenant_id=TENANT)
    secret = Protected("the question", sealed, withheld=None)
    answer = {
        "n": 1,
        "f": 2.5,
        "ok": True,
        "none": None,
        "s": "x",
        "ids": ("a", "b"),
        "nested": [{"q": secret, "depth": [1, [secret]]}],
        "q": secret,
    }
    plain = reveal(answer)
    assert plain == {
        "n": 1,
        "f": 2.5,
        "ok": True,
        "none": None,
        "s": "x",
        "ids": ["a", "b"],
        "nested": [{"q": "the question", "depth": [1, ["the question"]]}],
        "q": "the question",
    }
    assert isinstance(plain["ids"], list)
    [record] = records([(IdempotencyKey(TENANT, "k", "f"), (201, answer), 7)])
    stored = orjson.loads(record.response)
    assert b"the question" not in record.response
    assert stored["nested"][0]["depth"][1][0]["$sealed"] == sealed.model_dump(mode="json")
    assert stored["ids"] == ["a", "b"] and stored["f"] == 2.5
    status, replayed = StoredAnswer("f", 201, stored).replay(IdempotencyKey(TENANT, "k", "f"), ledger.sealer)
    assert (status, replayed) == (201, {**plain, "dedup": True})
    # An answer marked plain is stored as it is: the bytes of the walked form; and one that
    # holds a protected part after all is refused, never stored in plain.
    key = IdempotencyKey(TENANT, "k", "f")
    walked, as_is = records([(key, (201, plain), 7), (key, (201, plain), 7)], [False, True])
    assert walked.response == as_is.response == orjson.dumps(plain)
    with pytest.raises(TypeError):
        records([(key, (201, answer), 7)], [True])
