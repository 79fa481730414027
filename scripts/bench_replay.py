"""Replay benchmark: receipt replay latency at random positions in ledgers of growing
size, against the naive way measured in the same run.

The ledger is built fast but for real: many small signed events per transaction
(`Ledger.append_batch`, 1,000 per commit, no HTTP), every batch projected by the real
runner in the same transaction (`ledger_context` attached from the start), and every
`--search-every` entries a few real searches (`ledger.usecases.search.search`) record
`citeledger-bm25` (`ranking.ENGINE`) receipts at that position.

- replay (external): the real use case on an `external:` receipt drawn at random: checks,
  every entry's fate from the corpus read model, a signed replay receipt and
  `ReplayRecorded` appended.
- replay (bm25): the same use case on a search receipt: three `rank` runs (as of the
  receipt, now, now under the live policy) on the search index, the replay receipt's
  entries sealed, both entries appended.
- naive: rebuild the tenant's corpus by reading the log from position 1 up to the
  receipt (decode every entry, apply ingests and removals), then judge the same entries
  (external) or decrypt the live chunks and BM25-rank them (bm25). A lower bound of the
  naive replay: one run instead of three, no write, no current state.

Everything runs in one invocation on one SQLite store per size. Writes
docs/benchmarks/replay.md (and prints it).

    python scripts/bench_replay.py [--sizes 10000,100000,1000000] [--samples 200] [--naive 5]
"""

from __future__ import annotations

import argparse
import hashlib
import math
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _bench_events import DOCS_PER_TENANT, TENANTS, cited, document_version, live_receipt

from bootstrap import ledger_context
from ledger.config import LedgerConfig
from ledger.domain.entries import EventDraft
from ledger.domain.events import DocumentRemoved, PolicyBundlePublished, PolicySnapshot, TaskEnvelope
from ledger.policy.policy_rules import ChunkFacts
from ledger.retrieval.search_text import query_terms, term_counts
from ledger.schemas.requests import SearchIn
from ledger.usecases.context import Caller, UseCaseContext, draft
from ledger.usecases.policy import bundle_rules
from ledger.usecases.ranking import ENGINE
from ledger.usecases.replay import replay
from ledger.usecases.search import search
from ledger.writing.application import Ledger
from projections.receipt_index import RECEIPTS_TABLE

ROOT = Path(__file__).resolve().parents[1]
CHUNKS_PER_VERSION = 3
BUNDLE = (
    "version: bench\nrules:\n  - id: no-drafts\n    action: deny\n    match: {paths: ['drafts/**']}\n"
    "  - id: guides-first\n    action: boost\n    factor: \"1.5\"\n    match: {paths: ['guides/**']}\n"
)
FOLDERS = ("docs", "guides", "drafts", "notes")
WORDS = (
    "audit logs retention days salary bands parental leave weeks expense receipts travel hotel "
    "limit deploy window rollback incident escalation rotation review quarterly budget approval "
    "manager security access badge laptop backup restore vendor contract invoice payroll"
).split()
TEXTS_PER_TENANT = 60  # distinct chunk texts, sealed once each (sealing is not what is measured)
QUERIES = [" ".join(pair) for pair in zip(WORDS[::2], WORDS[1::2], strict=False)]
BUNDLE_SHA = hashlib.sha256(BUNDLE.encode()).hexdigest()


class Workload:
    """Documents with versions (new chunk ids per version), removals, and `external:`
    receipts citing two chunks live at the time, under a frozen policy snapshot."""

    def __init__(self, ledger: Ledger) -> None:
        self.rng = random.Random(11)
        seal = ledger.sealer.seal
        words = random.Random(3)
        self.texts = {
            t: [
                seal(" ".join(words.choice(WORDS) for _ in range(words.randint(20, 60))), tenant_id=t)
                for _ in range(TEXTS_PER_TENANT)
            ]
            for t in TENANTS
        }
        self.sealed = {t: seal("audit logs retention days", tenant_id=t) for t in TENANTS}
        self.query = {t: seal("how long are audit logs kept?", tenant_id=t) for t in TENANTS}
        self.live: dict[str, dict[int, str]] = {t: {} for t in TENANTS}  # tenant -> doc -> live version
        self.versions: dict[tuple[str, int], int] = {}
        self.snapshot = PolicySnapshot(
            bundle_hash=BUNDLE_SHA, bundle_yaml=BUNDLE, captured_at="2026-01-01T00:00:00Z"
        )

    def policies(self) -> list[EventDraft]:
        payload = PolicyBundlePublished(policy_version="bench", bundle_sha256=BUNDLE_SHA, bundle_yaml=BUNDLE)
        return [draft(Caller(t, "admin"), payload) for t in TENANTS]

    def hex_id(self) -> str:
        return f"{self.rng.getrandbits(128):032x}"

    @staticmethod
    def path(doc: int) -> str:
        return f"{FOLDERS[doc % len(FOLDERS)]}/{doc}.md"

    def ingest(self, tenant: str) -> EventDraft:
        doc = self.rng.randrange(DOCS_PER_TENANT)
        version = self.versions.get((tenant, doc), 0) + 1
        self.versions[(tenant, doc)] = version
        version_id = f"doc-{doc}-v{version}"
        self.live[tenant][doc] = version_id
        chunk_ids = [f"{version_id}-c{i}" for i in range(CHUNKS_PER_VERSION)]
        texts = [self.rng.choice(self.texts[tenant]) for _ in chunk_ids]
        return document_version(tenant, doc, version, self.path(doc), chunk_ids, texts)

    def remove(self, tenant: str) -> EventDraft | None:
        live = list(self.live[tenant])
        if not live:
            return None
        doc = self.rng.choice(live)
        del self.live[tenant][doc]
        return draft(
            Caller(tenant, "svc-ingest"), DocumentRemoved(document_id=f"doc-{doc}", reason="withdrawn")
        )

    def retrieval(self, tenant: str) -> EventDraft | None:
        live = list(self.live[tenant].items())
        if not live:
            return None
        entries = []
        for doc, version_id in self.rng.sample(live, min(2, len(live))):
            citation_id = self.hex_id()  # drawn before the chunk: the same ids as before the shared builders
            chunk_id = f"{version_id}-c{self.rng.randrange(CHUNKS_PER_VERSION)}"
            snippet, expires_at = self.sealed[tenant], "2099-01-01T00:00:00Z"
            entries.append(cited(citation_id, doc, chunk_id, self.path(doc), snippet, expires_at, version_id))
        task = TaskEnvelope(auth_scope=["retrieval.write"])
        return live_receipt(
            tenant, self.hex_id(), self.query[tenant], task, "external:bench-rag", self.snapshot, entries
        )

    def batch(self, size: int, offset: int) -> list[EventDraft]:
        drafts: list[EventDraft] = []
        for i in range(offset, offset + size):
            tenant = self.rng.choice(TENANTS)
            made = (
                self.ingest(tenant)
                if i % 20 == 0 or sum(map(len, self.live.values())) < 50
                else self.remove(tenant)
                if i % 499 == 0
                else self.retrieval(tenant)
            )
            drafts.append(made if made is not None else self.ingest(tenant))
        return drafts


def run_searches(ctx: UseCaseContext, rng: random.Random, count: int) -> None:
    """Real searches through the use case: each records a signed `ranking.ENGINE` receipt."""
    for _ in range(count):
        tenant = rng.choice(TENANTS)
        caller = Caller(tenant, "svc-search", frozenset({"retrieval.write"}))
        body = SearchIn.model_validate({"input": {"query": rng.choice(QUERIES), "top_k": 5}})
        search(ctx, caller, body)


def build(ledger: Ledger, ctx: UseCaseContext, events: int, search_every: int, searches: int) -> float:
    workload = Workload(ledger)
    rng = random.Random(17)
    started = time.perf_counter()
    ledger.append_batch(workload.policies())
    done = ledger.size
    while done < events:
        size = min(1000, events - done)
        ledger.append_batch(workload.batch(size, done))
        if ledger.size // search_every != done // search_every:
            run_searches(ctx, rng, searches)
        done = ledger.size
        if done // 100_000 != (done - size) // 100_000:
            print(f"  built {done:,} entries ({done / (time.perf_counter() - started):,.0f}/s)", flush=True)
    return done / (time.perf_counter() - started)


def naive_replay(ledger: Ledger, tenant: str, receipt_position: int) -> dict[str, str]:
    """The tenant's corpus rebuilt from the log prefix, then each entry's fate."""
    chunks: dict[str, tuple[str, str, bool]] = {}  # chunk_id -> (document_id, path, live)
    receipt = None
    for event in ledger.read(1, receipt_position):
        if event.tenant_id != tenant:
            continue
        payload = event.payload
        if event.type == "DocumentIngested":
            for chunk_id, (doc, path, live) in list(chunks.items()):
                if doc == payload["document_id"] and live:
                    chunks[chunk_id] = (doc, path, False)
            for chunk in payload["chunks"]:
                chunks[chunk["chunk_id"]] = (payload["document_id"], payload["path"], True)
        elif event.type == "DocumentRemoved":
            for chunk_id, (doc, path, live) in list(chunks.items()):
                if doc == payload["document_id"] and live:
                    chunks[chunk_id] = (doc, path, False)
        elif event.type == "RetrievalRecorded" and event.position == receipt_position:
            receipt = payload
    assert receipt is not None
    rules = bundle_rules(receipt["policy_snapshot"]["bundle_yaml"])
    fates = {}
    for entry in receipt["selected_entries"]:
        doc, path, live = chunks.get(entry["chunk_id"], ("", "", False))
        verdict = rules.judge(ChunkFacts(entry["chunk_id"], doc, path, "internal"), frozenset())
        fates[entry["chunk_id"]] = "unchanged" if live and not verdict.denied else "changed"
    return fates


def naive_search(ledger: Ledger, tenant: str, receipt_position: int) -> list[str]:
    """The tenant's corpus rebuilt from the log prefix, decrypted, and BM25-ranked for the
    receipt's query (plain Lucene BM25, no boosts or policy: a lower bound)."""
    live: dict[str, tuple[str, str, dict[str, object]]] = {}  # chunk_id -> (document, path, sealed)
    receipt = None
    for event in ledger.read(1, receipt_position):
        if event.tenant_id != tenant:
            continue
        payload = event.payload
        if event.type in ("DocumentIngested", "DocumentRemoved"):
            live = {k: v for k, v in live.items() if v[0] != payload["document_id"]}
            for chunk in payload.get("chunks", []) if event.type == "DocumentIngested" else []:
                live[chunk["chunk_id"]] = (payload["document_id"], payload["path"], chunk["text"])
        elif event.type == "RetrievalRecorded" and event.position == receipt_position:
            receipt = payload
    assert receipt is not None
    query = ledger.sealer.unseal(receipt["query"], tenant_id=tenant)
    wanted = [t.text for t in query_terms(query)]
    counted = {
        chunk_id: term_counts(ledger.sealer.unseal(sealed, tenant_id=tenant))  # type: ignore[arg-type]
        for chunk_id, (_, _, sealed) in live.items()
    }
    n = len(counted) or 1
    avgdl = sum(length for _, length in counted.values()) / n
    df = {t: sum(1 for counts, _ in counted.values() if t in counts) for t in wanted}
    scores = {}
    for chunk_id, (counts, length) in counted.items():
        score = 0.0
        for t in wanted:
            tf = counts.get(t, 0)
            if tf:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                score += idf * tf / (tf + 1.2 * (1 - 0.75 + 0.75 * length / avgdl))
        if score > 0:
            scores[chunk_id] = score
    return sorted(scores, key=lambda c: -scores[c])[: receipt["search"]["top_k"]]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, round(q * len(ordered)) - 1)]


def _timed_ms(fn: Callable[[], object]) -> tuple[float, object]:
    started = time.perf_counter()
    out = fn()
    return (time.perf_counter() - started) * 1000, out


def measure(args: argparse.Namespace, size: int, root: Path) -> dict[str, float]:
    config = LedgerConfig(data_dir=Path(tempfile.mkdtemp(dir=root)), run_checkpointer=False)
    result: dict[str, float] = {"size": size}
    with Ledger(config) as ledger:
        print(f"[{size:,}] building", flush=True)
        ctx = ledger_context(ledger)  # every batch is projected in its own transaction
        result["build_rate"] = build(ledger, ctx, size, args.search_every, args.searches)
        store = ledger.store
        rows = store.rows(
            f"SELECT tenant_id, receipt_id, position, engine FROM {store.table(RECEIPTS_TABLE)} "
            "WHERE mode='live' ORDER BY position",
            (),
        )
        result["bm25_receipts"] = sum(1 for row in rows if row["engine"] == ENGINE)
        rng = random.Random(5)
        for kind in ("external", "bm25"):
            pool = [row for row in rows if (row["engine"] == ENGINE) == (kind == "bm25")]
            picked = rng.sample(pool, min(args.samples, len(pool)))
            replay_ms, ok = [], 0
            for row in picked:
                caller = Caller(row["tenant_id"], "bench", frozenset({"replay.run"}))
                ms, out = _timed_ms(
                    lambda row=row, caller=caller: replay(ctx, caller, row["receipt_id"]).body
                )
                replay_ms.append(ms)
                body: dict[str, object] = out  # type: ignore[assignment]
                assert body["replay_receipt_id"]
                ok += body["integrity"] in ("ok", "not_applicable")
            naive_ms = []
            naive = naive_search if kind == "bm25" else naive_replay
            for row in rng.sample(picked, min(args.naive, len(picked))):
                ms, _ = _timed_ms(
                    lambda row=row, naive=naive: naive(ledger, row["tenant_id"], int(row["position"]))
                )
                naive_ms.append(ms)
            result.update(
                {
                    f"{kind}_p50": statistics.median(replay_ms),
                    f"{kind}_p95": percentile(replay_ms, 0.95),
                    f"{kind}_samples": len(replay_ms),
                    f"{kind}_ok": ok,
                    f"{kind}_naive_p50": statistics.median(naive_ms),
                    f"{kind}_naive_p95": percentile(naive_ms, 0.95),
                    f"{kind}_naive_samples": len(naive_ms),
                }
            )
        print(f"[{size:,}] {result}", flush=True)
    return result


def table(results: list[dict[str, float]], args: argparse.Namespace) -> str:
    lines = [
        "# Replay benchmark",
        "",
        f"Machine: {platform.machine()}, 2 cores (shared with other work), "
        f"Python {platform.python_version()}; generated by `scripts/bench_replay.py --sizes {args.sizes} "
        f"--samples {args.samples} --naive {args.naive} --search-every {args.search_every} "
        f"--searches {args.searches}` (SQLite, one run).",
        "",
        "Workload: 10 tenants, 200 documents each in four folders; per 1000 entries ~50 document "
        "versions (3 chunks drawn from 60 distinct texts per tenant, new ids per version), ~2 removals, "
        "the rest `external:` receipts citing 2 live chunks under a policy snapshot (a deny and a boost "
        f"rule); every {args.search_every:,} entries {args.searches} real searches record "
        f"`{ENGINE}` receipts. Built with 1,000 signed entries per commit, projected by the "
        "real runner in the same transaction (build rate includes projection).",
        "",
        "Receipts are drawn at random positions. *replay* is the whole use case (checks, a signed "
        "replay receipt + `ReplayRecorded` appended and fsynced; for bm25 three `rank` runs and "
        "`integrity` checked: the ok column counts receipts whose context hash was reproduced). "
        "*naive* rebuilds the tenant's corpus from the log prefix up to the receipt and judges the "
        "entries (external) or decrypts and BM25-ranks the live chunks once (bm25): a lower bound.",
        "",
        "| events | build (entries/s) | kind | receipts sampled | replay p50 / p95 (ms) | integrity ok "
        "| naive p50 / p95 (ms) | naive p50 / replay p50 | naive p50 / replay p95 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        for kind in ("external", "bm25"):
            lines.append(
                f"| {int(r['size']):,} | {r['build_rate']:,.0f} | {kind} | {int(r[f'{kind}_samples'])} "
                f"| {r[f'{kind}_p50']:.1f} / {r[f'{kind}_p95']:.1f} | {int(r[f'{kind}_ok'])} "
                f"| {r[f'{kind}_naive_p50']:,.0f} / {r[f'{kind}_naive_p95']:,.0f} "
                f"({int(r[f'{kind}_naive_samples'])}) "
                f"| {r[f'{kind}_naive_p50'] / r[f'{kind}_p50']:,.0f}x "
                f"| {r[f'{kind}_naive_p50'] / r[f'{kind}_p95']:,.0f}x |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--naive", type=int, default=5)
    parser.add_argument("--search-every", type=int, default=5_000)
    parser.add_argument("--searches", type=int, default=10)
    # No default file: docs/benchmarks/replay.md holds a reading of the table a run must not overwrite.
    parser.add_argument("--out", default=None, help="write the table here too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp:
        results = [measure(args, int(size), Path(tmp)) for size in args.sizes.split(",")]
    text = table(results, args)
    if args.out is not None:
        Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
