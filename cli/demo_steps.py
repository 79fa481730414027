"""The steps of `citeledger demo` on the sample corpus, each one call of a use case
(`ledger.usecases`), as the HTTP API and `citeledger sources` make them: register and
sync the corpus, search it, read a citation back, publish a policy, erase a document,
replay a search receipt. Each step prints what happened and returns what later steps need.

Timings are wall time around the use case call, as the caller sees it (the receipt
write included); nothing here is a benchmark (that is `scripts/bench_search.py`).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from ledger.retrieval.source_registry import SourceRegistry
from ledger.retrieval.sources import SourceLimits, denied_by
from ledger.schemas.requests import ErasureIn, PolicyBundleIn, SearchIn, SearchInput
from ledger.storage.claims import DocumentClaims
from ledger.usecases.citations import read_citation
from ledger.usecases.context import Caller, UseCaseContext
from ledger.usecases.errors import CitationUnavailable
from ledger.usecases.policy import publish_policy
from ledger.usecases.replay import replay
from ledger.usecases.retention import erase
from ledger.usecases.search import search
from ledger.usecases.sources import add_source, remove_source, sync_source
from ledger.writing.application import Ledger
from projections.queries import ReadModels
from projections.views import HistoryFilter

SOURCE_NAME = "demo-corpus"
EXCERPT_CHARS = 160
MAX_DRIFT_LINES = 6

QUERIES = [  # (language, query): each has an answer in tests/corpus (tests/golden/queries.yaml)
    ("English", "how long are audit logs kept"),
    ("Chinese", "年假有几天"),
    ("Japanese", "有給休暇は何日もらえますか"),
]
ABSENT_QUERY = "submarine reactor maintenance schedule"  # the corpus holds no answer
TRAVEL_QUERY = "hotel limit per night in the travel policy"
ERASURE_QUERY = "checkout outage expired TLS certificate"

# Superseded documents rank below their successors, and nothing under security/ is
# returned without the restricted scope (the demo's caller does not hold it).
POLICY_BUNDLE = """\
version: demo-policy-1
rules:
  - id: security-needs-scope
    action: deny
    match: {paths: ["security/**"]}
    unless_scope: knowledge.restricted.read
  - id: superseded-travel-policy
    action: downrank
    factor: "0.5"
    match: {paths: ["policies/travel/travel-policy-2025.md"]}
"""


@dataclass
class Demo:
    """What every step works with."""

    ledger: Ledger
    ctx: UseCaseContext
    caller: Caller
    console: Console

    def say(self, text: str = "", style: str | None = None) -> None:
        # Whole lines (commands copy as they are); no markup: paths and headings may hold brackets.
        self.console.print(text, soft_wrap=True, markup=False, highlight=False, style=style)

    def heading(self, text: str) -> None:
        self.say("")
        self.say(text, style="bold")


def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    answer = call()
    return answer, time.perf_counter() - started


class UnfitCorpus(Exception):
    """A `--corpus` the demo's steps cannot run on (its questions find nothing there)."""


def default_corpus() -> Path:
    """tests/corpus of the checkout this package runs from (an editable install of a clone)."""
    return Path(__file__).resolve().parents[1] / "tests" / "corpus"


# --- sources ------------------------------------------------------------------------------
def _readable_copy(demo: Demo, corpus: Path, limits: SourceLimits) -> Path:
    """The corpus itself, or, when the checkout sits under a system path no source may read
    (a clone in /root), a private copy in the temporary directory: the denylist is not
    relaxed for the demo."""
    if denied_by(corpus.resolve(), limits.denylist) is None:
        return corpus
    copy = Path(tempfile.gettempdir()) / "citeledger-demo-corpus"
    copy.mkdir(mode=0o700, exist_ok=True)
    shutil.copytree(corpus, copy, dirs_exist_ok=True)
    demo.say(f"{corpus} is under a denylisted system path; the demo reads a copy at {copy}")
    return copy


def register_corpus(demo: Demo, registry: SourceRegistry, limits: SourceLimits, corpus: Path) -> None:
    """Allowlist the corpus folder for the demo's tenant (as `citeledger sources add`)."""
    demo.heading("1. Allowlist the sample corpus as a source")
    corpus = _readable_copy(demo, corpus, limits)
    existing = registry.get(SOURCE_NAME, demo.caller.tenant_id)
    if existing is not None and Path(existing.path) == corpus.resolve():
        demo.say(f"source {SOURCE_NAME} -> {existing.path} (already on the allowlist)")
        return
    if existing is not None:  # the checkout moved: point the source at this one
        remove_source(registry, SOURCE_NAME)
    added = add_source(registry, limits, SOURCE_NAME, str(corpus), demo.caller.tenant_id)
    demo.say(
        f"source {added['name']} -> {added['path']} (tenant {added['tenant_id']}); "
        "nothing outside the allowlist is readable"
    )


def sync_corpus(demo: Demo, registry: SourceRegistry, limits: SourceLimits) -> dict[str, int]:
    """Record every markdown file of the corpus (as `citeledger sources sync`)."""
    demo.heading("2. Sync it: one signed DocumentIngested per new or changed file")
    claims = DocumentClaims(demo.ledger.store)
    report, seconds = timed(lambda: sync_source(demo.ctx, claims, registry, limits, demo.caller, SOURCE_NAME))
    totals: dict[str, int] = report["totals"]
    demo.say(
        f"{len(report['files'])} files in {seconds:.2f} s (wall time: read, chunk, seal, sign, commit): "
        f"{totals['ingested']} ingested, {totals['unchanged']} unchanged, {totals['removed']} removed, "
        f"{totals['skipped']} skipped"
    )
    reasons = Counter(row.get("reason", "?") for row in report["files"] if row["status"] == "skipped")
    for reason, count in sorted(reasons.items()):
        demo.say(f"  skipped ({reason}): {count}")
    erased = reasons.get("erased", 0)
    if report["files"] and totals["unchanged"] + erased == len(report["files"]):
        demo.say(
            "  all unchanged since the last sync: nothing new was recorded (deduplicated by content hash)"
            + (f"; {erased} erased file(s) stay out until re-admitted" if erased else "")
        )
    return totals


# --- search -------------------------------------------------------------------------------
def run_search(demo: Demo, query: str) -> tuple[dict[str, Any], float]:
    body = SearchIn(task_id=f"demo-{int(time.time() * 1000)}", input=SearchInput(query=query, top_k=3))
    result, seconds = timed(lambda: search(demo.ctx, demo.caller, body))
    return result.body, seconds


def show_search(demo: Demo, label: str, answer: dict[str, Any], seconds: float) -> None:
    count = len(answer["output"]["citations"])
    demo.say(
        f"{label}: {answer['output']['query']!r} -> {answer['status']}, "
        f"{count} citation{'' if count == 1 else 's'}, "
        f"{seconds * 1000:.1f} ms (wall time, receipt write included); receipt {answer['receipt_id']} "
        f"at position {answer['position']}"
    )
    for cited in answer["output"]["citations"]:
        locator = cited["locator"]
        demo.say(
            f"    {cited['score']:>10}  {cited['path']} lines {locator['start_line']}-{locator['end_line']}"
            f"  [{locator.get('heading_path') or '-'}]"
        )
    for gap in answer["output"]["gaps"]:
        demo.say(f"    gap: {gap}")


def search_corpus(demo: Demo) -> dict[str, Any]:
    """An English, a Chinese and a Japanese question, then one the corpus cannot answer."""
    demo.heading("3. Search: every search, hits or not, is a signed RetrievalRecorded receipt")
    answers = {}
    for language, query in QUERIES:
        answers[language], seconds = run_search(demo, query)
        show_search(demo, language, answers[language], seconds)
    absent, seconds = run_search(demo, ABSENT_QUERY)
    show_search(demo, "Absent", absent, seconds)
    demo.say(
        f"no_hit for {ABSENT_QUERY!r}: the receipt records that nothing answered, "
        f"with {len(absent['output']['gaps'])} gaps"
    )
    english = answers["English"]
    if not english["output"]["citations"]:
        raise UnfitCorpus(
            f"the corpus does not answer the demo's English question {QUERIES[0][1]!r}: "
            "run the demo on the sample corpus (tests/corpus)"
        )
    first = english["output"]["citations"][0]
    reason = ", ".join(f"{c['component']} {c['value']}" for c in first["reason"]["score_breakdown"])
    terms = ", ".join(f"{t['term']} {t['bm25']}" for t in first["reason"]["terms"])
    demo.say(f"why {first['path']} ranked first: {reason}; BM25 per term: {terms}")
    return english


def read_back(demo: Demo, citation_id: str) -> dict[str, Any]:
    """GET /v1/citations/{id}: the cited chunk as recorded at ingest, under retention rules."""
    return read_citation(demo.ctx, ReadModels(demo.ledger.store), demo.caller, citation_id)


def show_citation(demo: Demo, citation_id: str) -> None:
    demo.heading("4. Read a citation back (GET /v1/citations/{id})")
    cited = read_back(demo, citation_id)
    excerpt = " ".join(cited["chunk_text"].split())[:EXCERPT_CHARS]
    demo.say(
        f"citation {citation_id}: {cited['path']} lines {cited['locator']['start_line']}-"
        f"{cited['locator']['end_line']}, {cited['sensitivity']}, receipt {cited['receipt_id']}, "
        f"expires {cited['expires_at'] or 'never'}"
    )
    demo.say(f"  text as recorded: {excerpt}...")


# --- policy -------------------------------------------------------------------------------
def publish_demo_policy(demo: Demo) -> dict[str, Any]:
    """Search the travel policy, publish the bundle, search again: the filters are recorded."""
    demo.heading("5. Publish a policy bundle; searches record the filters it applied")
    before, seconds = run_search(demo, TRAVEL_QUERY)
    show_search(demo, "Travel, before", before, seconds)
    published = publish_policy(demo.ctx, demo.caller, PolicyBundleIn(bundle_yaml=POLICY_BUNDLE)).body
    state = (
        "already live (same bundle)"
        if published.get("dedup")
        else f"published at position {published['position']}"
    )
    demo.say(f"policy {published['policy_version']} (sha256 {published['bundle_sha256'][:16]}...) {state}:")
    for line in POLICY_BUNDLE.splitlines():
        demo.say(f"    {line}")
    after, seconds = run_search(demo, TRAVEL_QUERY)
    show_search(demo, "Travel, after", after, seconds)
    event = demo.ledger.get(after["position"])
    filters = event.payload["filters_applied"] if event is not None else []  # the signed receipt itself
    paths = chunk_paths(demo)
    for item in filters:
        where = paths.get(item["chunk_id"], f"chunk {item['chunk_id']}")
        demo.say(
            f"  filters_applied: {item['rule_id']} -> {item['action']} on {where} "
            f"(chunk {item['chunk_id'][:12]})"
        )
    if not filters:
        demo.say("  filters_applied: none (no rule matched these results)")
    return before


def chunk_paths(demo: Demo) -> dict[str, str]:
    """chunk id -> path of the live corpus: a receipt's filters name chunks, people read paths."""
    return {
        chunk.chunk_id: chunk.path
        for chunk in ReadModels(demo.ledger.store).corpus_now(demo.caller.tenant_id)
    }


# --- erasure ------------------------------------------------------------------------------
def erase_a_document(demo: Demo) -> None:
    """Erase the top document of a search: its key is destroyed, its citations read back gone."""
    demo.heading("6. Erase a document (an erasure request); its citations are gone")
    earlier = _earlier_demo_erasure(demo)
    if earlier is not None:  # a rerun: the same step finds its work done, and erases nothing more
        position, document_ids = earlier
        demo.say(
            f"already done by an earlier run: document {', '.join(document_ids)} was erased at position "
            f"{position} (RetentionScrubbed); its key stays destroyed, so nothing more is erased now"
        )
        return
    answer, _ = run_search(demo, ERASURE_QUERY)
    citations = answer["output"]["citations"]
    if not citations:
        demo.say(f"{ERASURE_QUERY!r} finds nothing left to erase (earlier runs erased its answers)")
        return
    cited = citations[0]
    read_back(demo, cited["citation_id"])
    demo.say(f"citation {cited['citation_id']} of {cited['path']} reads back: ok (before)")
    erased = erase(demo.ctx, demo.caller, ErasureIn(document_id=cited["document_id"]))
    demo.say(
        f"erased document {cited['document_id']} ({cited['path']}): its data key destroyed, "
        f"RetentionScrubbed at position {erased['position']}; "
        "the signed entries stay, their text can no longer be read"
    )
    try:
        read_back(demo, cited["citation_id"])
    except CitationUnavailable as gone:
        demo.say(f"citation {cited['citation_id']} reads back: gone (404 {gone.code}: {gone.message})")
        return
    raise RuntimeError("an erased document's citation still reads back")


def _earlier_demo_erasure(demo: Demo) -> tuple[int, list[str]] | None:
    """The erasure request an earlier demo run recorded (position, document ids), if any."""
    page = ReadModels(demo.ledger.store).events(
        demo.caller.tenant_id, HistoryFilter(types=["RetentionScrubbed"], actor=demo.caller.actor), limit=50
    )
    for entry in page.items:
        event = demo.ledger.get(entry.position)
        if event is not None and event.payload.get("reason") == "erasure_request":
            return entry.position, list(event.payload.get("document_ids", []))
    return None


# --- replay -------------------------------------------------------------------------------
def _drift_line(name: str, envelope: dict[str, Any]) -> str:
    entries, filters = envelope["selected_entries"], envelope["filters_applied"]
    moved = sum(1 for e in entries["common_entries"] if e["moved"])
    changed = "changed" if envelope["context_hash"]["changed"] else "unchanged"
    return (
        f"  {name}: context hash {changed}; entries +{len(entries['added'])} -{len(entries['removed'])} "
        f"~{moved} moved; filters +{len(filters['added'])} -{len(filters['removed'])}"
    )


def replay_receipt(demo: Demo, receipt_id: str) -> str:
    """Re-run a search receipt under its frozen policy: integrity, data drift, policy drift."""
    demo.heading("7. Replay a search receipt (POST /v1/receipts/{id}/replay)")
    body, seconds = timed(lambda: replay(demo.ctx, demo.caller, receipt_id).body)
    demo.say(
        f"receipt {receipt_id} (the travel search before the policy) replayed in {seconds:.2f} s "
        f"(wall time, three runs and the replay receipt write); replay receipt {body['replay_receipt_id']}"
    )
    integrity: str = body["integrity"]
    if integrity == "ok":
        demo.say(
            f"integrity: ok (re-run as of its position {body['corpus_position']}: the same bytes, same hash)"
        )
    elif integrity == "reproduced_apart_from_erased":
        paths = ", ".join(e["path"] for e in (body["integrity_reason"] or {}).get("erased", []))
        demo.say(f"integrity: reproduced apart from the documents erased since ({paths})")
    else:
        demo.say(
            f"integrity: {integrity} (the re-run as of its position does not reproduce its context hash)"
        )
    explained = {
        "as_of_original": "as of the receipt's position, its frozen policy",
        "data_drift": "today's corpus, the frozen policy",
        "policy_drift": "today's corpus, today's policy vs the frozen one",
    }
    for name, envelope in body["diff"].items():
        demo.say(_drift_line(name, envelope) + f"  ({explained.get(name, name)})")
        for detail in _drift_details(envelope)[:MAX_DRIFT_LINES]:
            demo.say(f"      {detail}")
    return integrity


def _drift_details(envelope: dict[str, Any]) -> list[str]:
    entries, filters = envelope["selected_entries"], envelope["filters_applied"]
    lines = [f"+ rank {e['rank']} {e['path']} score {e['score']}" for e in entries["added"]]
    lines += [f"- rank {e['rank']} {e['path']} score {e['score']}" for e in entries["removed"]]
    lines += [
        f"~ rank {e['old_rank']} -> {e['new_rank']} {e['path']} score {e['old_score']} -> {e['new_score']}"
        for e in entries["common_entries"]
        if e["moved"]
    ]
    lines += [f"+ filter {f['rule_id']} {f['action']} chunk {f['chunk_id'][:12]}" for f in filters["added"]]
    lines += [f"- filter {f['rule_id']} {f['action']} chunk {f['chunk_id'][:12]}" for f in filters["removed"]]
    return lines
