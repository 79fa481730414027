"""Every new log entry fits a C2SP tlog-tiles entry bundle (at most 65,535 bytes): the
largest inputs the routes allow are written as several entries (a document version, a
receipt, a scrub) or refused with 413 naming the limit, nothing written; every entry bundle
of the log then serves, and an independent reader (tests/independent_tlog.py) parses it.
On the old code the first document below was one 600 KB entry and its bundle answered 422."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from ledger.config import LedgerConfig
from ledger.domain.entry_limit import MAX_ENTRY_BYTES
from ledger.evidence.bundle import verify_bundle
from ledger.evidence.tenant_export import verify_tenant_export
from ledger.storage.audit import verify_store
from ledger.storage.store import LEDGER_STREAM_ID
from ledger.writing.application import Ledger
from tests import independent_tlog as spec
from tests import loopback_http
from tests.api_support import LoopbackServer, api_config, make_tokens
from tests.conftest import RawStore

EMOJI = "\U0001f600"  # four bytes of UTF-8, never escaped in canonical JSON
DEEP_HEADINGS = "".join("#" * level + " " + EMOJI * 200 + "\n\n" for level in range(1, 7))
LONG_PATH = "big/" + "/".join(EMOJI * 60 for _ in range(4)) + "/worst.md"


def _line(i: int) -> str:
    prefix = f"alpha beta {i} "
    return prefix + EMOJI * (8000 - len(prefix))  # one whole chunk


class Client:
    def __init__(self, server: LoopbackServer, tokens: dict[str, str]) -> None:
        self.http = loopback_http.client(base_url=server.base_url, timeout=120)
        self.tokens = tokens

    def post(self, path: str, body: Any, who: str = "admin") -> httpx.Response:
        return self.http.post(
            path,
            content=json.dumps(body, ensure_ascii=False).encode(),
            headers={"Authorization": f"Bearer {self.tokens[who]}", "content-type": "application/json"},
        )

    def get(self, path: str, who: str = "admin", **params: Any) -> httpx.Response:
        return self.http.get(path, params=params, headers={"Authorization": f"Bearer {self.tokens[who]}"})


def _every_bundle(client: Client, ledger: Ledger) -> int:
    """Every entry bundle of the log, read as a tiles client would; the entries it holds are
    the log's, byte for byte. Returns how many entries were read."""
    size = ledger.sync()
    stored = [event.entry for event in ledger.read(1, size)]
    read: list[bytes] = []
    for n in range((size + 255) // 256):
        width = min(256, size - n * 256)
        answer = client.get("/v1/tlog/" + spec.tile_url("entries", n, width), who="operator")
        assert answer.status_code == 200, (n, answer.text[:300])
        read += spec.entries_of_bundle(answer.content)
    assert read == stored
    assert max(len(entry) for entry in read) <= MAX_ENTRY_BYTES
    return len(read)


def test_the_largest_inputs_keep_every_entry_bundle_servable(
    ledger_config: LedgerConfig, tmp_path: Path
) -> None:
    config = api_config(ledger_config)
    tokens = make_tokens(config)
    with LoopbackServer(config) as server:
        client = Client(server, tokens)
        ledger = server.app.state.services.ledger
        # A version whose chunks are as large as chunking makes them (8,000 four-byte
        # characters under six 200-character headings, a long path and title): several entries.
        text = DEEP_HEADINGS + "\n\n".join(_line(i) for i in range(60)) + "\n"
        worst = client.post("/v1/documents", {"path": LONG_PATH, "text": text, "title": EMOJI * 256})
        assert worst.status_code == 201, worst.text[:300]
        doc = worst.json()
        assert len(doc["chunks"]) == 61  # the headings' own chunk, then one per line
        head = ledger.get(doc["position"])
        assert head.type == "DocumentIngested" and head.envelope["payload"]["parts"] > 1
        # Thousands of small sections: packed many to an entry.
        small = "".join(f"## part {i}\n\ngamma words {i}\n\n" for i in range(3000))
        many = client.post("/v1/documents", {"path": "big/many.md", "text": small})
        assert many.status_code == 201 and len(many.json()["chunks"]) == 3000

        # The largest policy a receipt can carry, then a search whose 50 hits (two a file at
        # most) carry deep headings and long paths: its receipt takes several entries.
        for n in range(25):
            two = DEEP_HEADINGS + _line(1) + "\n\n" + _line(2) + "\n"
            path = LONG_PATH.replace("worst", f"w{n}")
            assert client.post("/v1/documents", {"path": path, "text": two}).status_code == 201
        refused = client.post("/v1/policy-bundles", {"bundle_yaml": "rules: []\n#" + '"' * 30_000})
        assert refused.status_code == 413 and refused.json()["error"]["code"] == "bundle_too_large"
        assert "49,152" in refused.json()["error"]["message"]
        policy = client.post("/v1/policy-bundles", {"bundle_yaml": "rules: []\n#" + "x" * 49_000})
        assert policy.status_code == 201, policy.text[:300]
        search = client.post("/v1/search", {"input": {"query": "alpha beta", "top_k": 50}})
        assert search.status_code == 200, search.text[:300]
        receipt_id = search.json()["receipt_id"]
        searched = client.get(f"/v1/receipts/{receipt_id}").json()
        assert len(searched["citations"]) >= 50 and searched["continued_events"]

        # An external retrieval citing 60 whole chunks as its snippets: one entry per citation.
        entries = [
            {
                "document_id": doc["document_id"],
                "chunk_id": chunk["chunk_id"],
                "score": "1",
                "snippet": _line(i),
            }
            for i, chunk in enumerate(doc["chunks"][1:])
        ]
        posted = client.post(
            "/v1/retrievals", {"query": "q", "engine": "external:rag", "selected_entries": entries}
        )
        assert posted.status_code == 201, posted.text[:300]
        big_receipt = posted.json()["receipt_id"]

        # One citation too large for any entry (a whole chunk and the longest explanation):
        # 413 naming the limit, nothing written; in a batch, that item alone is refused.
        size = ledger.sync()
        alone = {**entries[0], "explanation": EMOJI * 4096}
        too_large = client.post(
            "/v1/retrievals", {"query": "q", "engine": "external:rag", "selected_entries": [alone]}
        )
        assert too_large.status_code == 413, too_large.text[:300]
        error = too_large.json()["error"]
        assert error["code"] == "entry_too_large" and "65,535 bytes" in error["message"]
        assert ledger.sync() == size
        items = [
            {
                "idempotency_key": f"k-{i}",
                "retrieval": {"query": "q", "engine": "external:rag", "selected_entries": [e]},
            }
            for i, e in enumerate([alone, entries[1]])
        ]
        batch = client.post("/v1/retrievals/batch", {"items": items})
        assert batch.status_code == 200, batch.text[:300]
        results = batch.json()["results"]
        assert [r["http_status"] for r in results] == [413, 201]
        assert ledger.sync() == size + 2  # the receipt: its head (the policy) and its citation

        # Read back as one receipt: every citation, a bundle proving every part, a replay
        # reproducing the search's context_hash.
        shown = client.get(f"/v1/receipts/{big_receipt}")
        assert shown.status_code == 200 and len(shown.json()["citations"]) == 60
        assert len(shown.json()["continued_events"]) >= 59
        # Listed whole too: the receipt index row refers to every part's entry, and the
        # document filter finds ids that only continuation entries cite.
        listed = client.get("/v1/receipts", document_id=doc["document_id"], kind="external").json()
        (row,) = [r for r in listed["receipts"] if r["receipt_id"] == big_receipt]
        assert row["citation_count"] == 60
        assert row["citation_ids"] == [c["citation_id"] for c in shown.json()["citations"]]
        bundle = client.get(f"/v1/receipts/{big_receipt}/bundle").json()["bundle"]
        assert len(bundle["continued"]) == len(shown.json()["continued_events"])
        cited = {c["document"]["entry"]["position"] for c in bundle["citations"]}
        assert len(cited) > 1  # the entries holding the cited chunks, continuations among them
        assert verify_bundle(bundle, ledger.root_public_key)["payload"]["receipt_id"] == big_receipt
        # The console shows it whole (every citation, intact), as does the tenant export.
        # A browser's form carries its origin (the console refuses one without).
        origin = {"Origin": server.base_url}
        with loopback_http.client(base_url=server.base_url, timeout=60, headers=origin) as console:
            signed_in = console.post("/console/sign-in", data={"token": tokens["admin"]})
            assert signed_in.status_code == 303
            page = console.get(f"/console/receipts/{big_receipt}")
            assert page.status_code == 200 and "badge intact" in page.text
            assert all(c["citation_id"] in page.text for c in shown.json()["citations"])
        export = tmp_path / "acme.jsonl"
        export.write_bytes(client.get("/v1/export").content)
        assert verify_tenant_export(export, ledger.root_public_key).ok
        kinds = [orjson.loads(line).get("entry", {}).get("type") for line in export.read_bytes().splitlines()]
        assert "DocumentContinued" in kinds and "RetrievalContinued" in kinds
        replay = client.post(f"/v1/receipts/{receipt_id}/replay", {})
        assert replay.status_code in (200, 201), replay.text[:300]
        assert replay.json()["integrity"] == "ok"
        assert client.get(f"/v1/citations/{searched['citations'][-1]['citation_id']}").status_code == 200
        # The last chunk of the big version, held by its last continuation entry.
        citation = shown.json()["citations"][-1]["citation_id"]
        read = client.get(f"/v1/citations/{citation}")
        assert read.status_code == 200 and read.json()["data"]["chunk_text"] == _line(59)

        # Erasing the document scrubs every part of it.
        erased = client.post("/v1/erasures", {"document_id": doc["document_id"]})
        assert erased.status_code in (200, 201), erased.text[:300]
        assert client.get(f"/v1/citations/{citation}").status_code in (404, 410)

        assert _every_bundle(client, ledger) == ledger.sync()
        report = verify_store(ledger.store, ledger.root_public_key, deep=True)
        assert report.ok, report.first_bad


def test_an_old_entry_over_the_bound_still_verifies_and_its_bundle_says_so(
    ledger_config: LedgerConfig, raw_store: RawStore
) -> None:
    """A ledger written before the bound may hold a larger entry (as the old code wrote it,
    signed and chained): it opens and verifies, its bundle answers the clear 422, and the
    bundles after it serve."""
    with Ledger(ledger_config) as ledger:
        size, prev_hash, key = ledger.sync(), ledger.head_hash, ledger.signing_key()
        header: dict[str, Any] = {
            "v": 1,
            "event_id": "0" * 32,
            "type": "PolicyBundlePublished",
            "tenant_id": "acme",
            "position": size + 1,
            "prev_hash": prev_hash,
            "recorded_at": "2026-01-01T00:00:00.000000Z",
            "actor": "old",
            "run_id": None,
            "trace_id": None,
            "payload": {
                "policy_version": "old",
                "bundle_sha256": "0" * 64,
                "bundle_yaml": "rules: []\n#" + "x" * 100_000,
            },
            "kid": key.kid,
        }
        header["signature"] = key.sign(orjson.dumps(header, option=orjson.OPT_SORT_KEYS))
    raw_store.execute(
        "INSERT INTO stored_events (originator_id, originator_version, topic, state) VALUES (?,?,?,?)",
        (
            raw_store.stream_value(LEDGER_STREAM_ID),
            size + 1,
            "citeledger:event:PolicyBundlePublished",
            orjson.dumps(header, option=orjson.OPT_SORT_KEYS),
        ),
    )
    config = api_config(ledger_config)
    tokens = make_tokens(config)
    with LoopbackServer(config) as server:
        client = Client(server, tokens)
        ledger = server.app.state.services.ledger
        assert ledger.sync() == size + 1
        assert verify_store(ledger.store, ledger.root_public_key).ok
        answer = client.get("/v1/tlog/" + spec.tile_url("entries", 0, size + 1), who="operator")
        assert answer.status_code == 422 and answer.json()["error"]["code"] == "entry_too_large"


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_no_draft_over_the_bound_is_ever_written(ledger_config: LedgerConfig) -> None:
    """The guard is the write path's, whatever the type: a hold naming the most targets the
    route allows is refused naming the limit, and the log does not move."""
    from ledger.domain.entries import EventDraft
    from ledger.domain.entry_limit import EntryTooLarge
    from ledger.domain.events import LegalHoldPlaced

    with Ledger(ledger_config) as ledger:
        size = ledger.sync()
        payload = LegalHoldPlaced(
            hold_id="h1",
            document_ids=[f"{i:0128d}" for i in range(1000)],
            legal_basis=ledger.sealer.seal("basis", tenant_id="acme"),
        )
        with pytest.raises(EntryTooLarge, match="65,535 bytes"):
            ledger.append(EventDraft.of(payload, tenant_id="acme", actor="a"), tenant_id="acme")
        assert ledger.sync() == size


def test_a_source_sync_of_the_largest_files_splits_each_version_and_commits_them_whole(
    ledger: Ledger, tmp_path: Path
) -> None:
    """30 files at the source's size limit, each a version of ~15 entries: the sync writes
    them in transactions of whole versions under the group commit's cap; the corpus holds
    every chunk once, a second sync records nothing, and every entry fits a bundle."""
    from bootstrap import ledger_context
    from ledger.retrieval.source_registry import SourceRegistry
    from ledger.retrieval.sources import SourceLimits
    from ledger.storage.claims import DocumentClaims
    from ledger.usecases.context import Caller
    from ledger.usecases.sources import add_source, sync_source
    from projections.queries import ReadModels

    folder = tmp_path / "notes"
    folder.mkdir()
    limits = SourceLimits(max_file_bytes=512 * 1024)  # the limit this load was sized for (16 MiB now)
    line = EMOJI * 7_000 + "\n\n"  # 28,002 bytes: a chunk a paragraph
    for n in range(30):
        (folder / f"f{n}.md").write_text(
            f"# file {n}\n\n" + line * (limits.max_file_bytes // len(line.encode()) - 1)
        )
    ctx = ledger_context(ledger)
    registry = SourceRegistry(tmp_path / "data")
    add_source(registry, limits, "notes", str(folder.resolve()), "acme")
    caller = Caller("acme", "sync-test", frozenset({"ingest.write"}))
    before = ledger.sync()
    report = sync_source(ctx, DocumentClaims(ledger.store), registry, limits, caller, "notes")
    assert {row["status"] for row in report["files"]} == {"ingested"}, report["files"][:2]
    written = list(ledger.read(before + 1, ledger.sync()))
    assert len(written) > 400  # more than one transaction's worth
    assert max(len(e.entry) for e in written) <= MAX_ENTRY_BYTES
    heads = [e for e in written if e.type == "DocumentIngested"]
    assert len(heads) == 30 and all(e.parts > 1 for e in heads)
    assert sum(e.parts for e in heads) == len(written)
    ctx.lookups.refresh()
    chunks = ReadModels(ledger.store).corpus_now("acme")
    assert len(chunks) == sum(len(e.payload["chunks"]) for e in written) == 30 * 17
    again = sync_source(ctx, DocumentClaims(ledger.store), registry, limits, caller, "notes")
    assert {row["status"] for row in again["files"]} == {"unchanged"}


def test_verify_names_a_continuation_without_its_head(ledger: Ledger) -> None:
    """Entries are signed, so only a faulty writer could break the split form: `verify` names
    the position of a continuation that follows no head."""
    from ledger.domain.entries import EventDraft
    from ledger.domain.events import Chunk, DocumentContinued, Locator

    sealed = ledger.sealer.seal("text", tenant_id="acme")
    stray = DocumentContinued(
        document_id="d1",
        version_id="v1",
        version=1,
        part=2,
        source="api",
        path="a.md",
        content_sha256="0" * 64,
        sensitivity="internal",
        chunks=[Chunk(chunk_id="c1", ordinal=1, locator=Locator(start_line=1, end_line=1), text=sealed)],
    )
    event = ledger.append(EventDraft.of(stray, tenant_id="acme", actor="a"), tenant_id="acme")
    report = verify_store(ledger.store, ledger.root_public_key)
    assert report.first_bad is not None and report.first_bad.position == event.position
    assert "without the head" in report.first_bad.problem


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_the_prepared_bound_is_never_below_the_signed_size(ledger: Ledger) -> None:
    """`prepare` judges a draft by its envelope at its largest, so the check on the signed
    bytes (which would fail a whole group commit) is never the one that refuses."""
    from ledger.domain.entries import prepare
    from tests.factories import retrieval_draft

    for draft in (retrieval_draft(ledger), retrieval_draft(ledger, "q" * 5000, run_id="r" * 128)):
        bound = draft.size_bound(len(prepare(draft).payload_json))
        [event] = ledger.append_batch([draft], tenant_id="acme")
        assert len(event.entry) <= bound <= len(event.entry) + 32


def test_a_scrub_of_many_keys_and_citations_is_recorded_in_entries_that_fit(ledger: Ledger) -> None:
    """Keys are destroyed before the scrub is recorded: a record too large for one entry
    must never be refused then (it would stay unrecorded). It is packed into several."""
    from ledger.writing.retention import shred

    refs = [f"document/acme/{'d' * 100}{i:06d}" for i in range(1_500)]
    citations = [f"{i:032x}" for i in range(4_000)]
    before = ledger.sync()
    first = shred(
        ledger, tenant_id="acme", key_refs=refs, reason="governance_scrub", actor="t", citation_ids=citations
    )
    assert first is not None and first.position == before + 1
    written = list(ledger.read(before + 1, ledger.sync()))
    assert len(written) > 3 and {e.type for e in written} == {"RetentionScrubbed"}
    assert max(len(e.entry) for e in written) <= MAX_ENTRY_BYTES
    assert [r for e in written for r in e.payload["key_refs"]] == refs
    assert [c for e in written for c in e.payload["citation_ids"]] == citations
    assert ledger.data_keys.unrecorded_destructions("acme") == []
