"""The ledger's own ranking: `rank`, a pure read of the search index as of a log position.
The search use case (`ledger.usecases.search`) runs it at the current position and records
the receipt; a replay (`ledger.usecases.replay`) runs it as of the receipt's position.

Ranking: BM25 (the Lucene variant bm25s calls `lucene`: k1 1.2, b 0.75) over
chunk text, with N, avgdl and df taken from the chunk versions live at the
position (`corpus_position`, inclusive: live_from <= p < live_to), plus
additive boosts for query terms in the document's title, the chunk's heading
path and the file name (each weighted by the term's idf), and a small bonus
for early sections. `@2` adds half the BM25 of the chunk's whole file
(`file_bm25`: a file whose sections together answer the query ranks above one
section that merely repeats a word; what whole-file rankers see and a chunk alone
does not). A policy bundle's boost/downrank factors multiply the sum.

No hit, on principle: a chunk is a candidate only if the query terms it
contains carry at least `MIN_COVERAGE` of the query's idf mass (`@1`: a term no
live chunk holds counts with the largest idf; `@2`: see `_needed_coverage`). A
query about something the corpus does not hold therefore finds nothing, however
common its other words are.

Engines: each receipt names the engine that ranked it (`ENGINES`); a replay runs
that engine's ranking and context-hash rule, so `@1` receipts keep reproducing
byte for byte. `@2`: the context hash covers the context (not scores), one
citation per file (`top_k` counts files), the no-hit rule above, `file_bm25`.

Determinism: scores are fixed-precision decimal strings; ties are broken by
path, then position in the file; the same corpus, query and policy give the
same bytes and the same `context_hash` — live, and on a replay as of the
receipt's position (both run this function).
"""

from __future__ import annotations

import decimal
import hashlib
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from ledger.domain.events import (
    MAX_FILTERS_APPLIED,
    SearchRequest,
)
from ledger.policy.policy_rules import ChunkFacts, PolicyRules, Verdict
from ledger.retrieval.search_text import Term, query_terms, stem_word, terms
from ledger.tlog.canonical import canonical_json
from ledger.usecases.context import UseCaseContext
from ledger.usecases.errors import Busy
from ledger.usecases.ports import ChunkState, CorpusView, IndexedChunk, SearchIndexReader
from ledger.usecases.visibility import visible_corpus
from ledger.writing.sealing import KeyDestroyed, SealBroken

log = logging.getLogger("citeledger.search")

ENGINE_V1 = "citeledger-bm25@1"
ENGINE_V2 = "citeledger-bm25@2"
ENGINE = ENGINE_V2  # what a live search runs and records
ENGINES = (ENGINE_V1, ENGINE_V2)  # what a replay can re-run, each under its own rules
K1, B = 1.2, 0.75
TITLE_WEIGHT, HEADING_WEIGHT, FILENAME_WEIGHT = 0.5, 0.25, 0.3
POSITION_WEIGHT = 0.1
FILE_WEIGHT = 0.5  # @2: times the BM25 of the chunk's whole file (`_FileBm25`)
MIN_COVERAGE = 0.4
MIN_COVERAGE_OOV = 0.5  # @2, when the query has words no chunk holds (`_needed_coverage`)
MAX_EXCUSED_OOV = 2
# @2: words that ask how much, how long or by when, not about what, and function words the
# stopword list lacks: when the corpus never uses one ("minimum" where the text says "at
# least", "without"), it does not count against a chunk. Known to the corpus, they count.
QUESTION_FORM_STEMS = frozenset(
    stem_word(word)
    for word in (
        "minimum maximum min max least length size amount number count total limit deadline "
        "duration frequency often quickly soon rate average typical usual exact exactly "
        "without within via per across upon unless whether along among beside besides despite "
        "toward towards onto amongst throughout versus etc instead"
    ).split()
)
SCORE_PLACES = 6
SNIPPET_CHARS = 240
MAX_HITS_PER_FILE = 2
FILTER_WINDOW = 4  # filters are recorded for the top (top_k x this) candidates
MAX_GAPS = 5
SearchStatus = Literal["ok", "no_hit", "denied", "timeout", "error"]


@dataclass(frozen=True)
class SearchHit:
    document_id: str
    version_id: str
    chunk_id: str
    path: str
    start_line: int
    end_line: int
    heading_path: str | None
    score: str
    score_breakdown: tuple[tuple[str, str], ...]  # (component, decimal value)
    term_scores: tuple[tuple[str, str], ...]  # (query term, its BM25 contribution)
    snippet: str  # empty when a policy redacts it
    snippet_span: tuple[int, int] | None
    sensitivity: str
    policy_rules: tuple[tuple[str, str], ...]  # (rule_id, action) that took effect
    chunk: ChunkState = field(compare=False, repr=False)

    def commitment_material(self) -> list[Any]:
        return [
            self.chunk_id,
            self.document_id,
            self.path,
            self.start_line,
            self.end_line,
            self.score,
            [list(c) for c in self.score_breakdown],
            list(self.snippet_span) if self.snippet_span else None,
            hashlib.sha256(self.snippet.encode("utf-8")).hexdigest(),
        ]

    def context_material(self) -> list[Any]:
        """What `@2`'s context hash commits to: the cited text and where it is, no score."""
        return [
            self.chunk_id,
            self.document_id,
            self.path,
            self.start_line,
            self.end_line,
            list(self.snippet_span) if self.snippet_span else None,
            hashlib.sha256(self.snippet.encode("utf-8")).hexdigest(),
        ]


@dataclass(frozen=True)
class SearchRun:
    status: SearchStatus
    position: int
    hits: tuple[SearchHit, ...]
    filters_applied: tuple[tuple[str, str, str], ...]  # (rule_id, chunk_id, action)
    gaps: tuple[str, ...]
    context_hash: str
    files_scanned: int
    denied_rule: str | None = None
    # Live chunk versions the caller's scopes may not see, left out before ranking (None: the
    # run ranked without the built-in rule, as receipts recorded before it did).
    withheld: int | None = None
    # Chunk ids of restricted chunks among the hits and filters: what an answer to a caller
    # without the scope must leave out (a replay's diff; `ledger.usecases.visibility`).
    restricted_ids: frozenset[str] = frozenset()

    @property
    def metrics(self) -> dict[str, int]:
        return {"files_scanned": self.files_scanned, "hits": len(self.hits)}


def context_hash_of(
    status: str, hits: Sequence[SearchHit], filters: Sequence[tuple[str, str, str]], engine: str = ENGINE
) -> str:
    """sha256 over the canonical JSON of what the search decided: never receipt or citation ids,
    timestamps or ciphertext (a snippet enters as the sha256 of its text).

    `@2` commits to the context the model was given — which chunks, in which order, with
    which text (span and snippet hash) — and the status: not scores, which move whenever any
    document of the corpus changes (a replay reports score movement apart). `@1` also
    committed to scores, score breakdowns and filters; its receipts keep that rule."""
    if engine == ENGINE_V1:
        body: dict[str, Any] = {
            "engine": ENGINE_V1,
            "status": status,
            "hits": [hit.commitment_material() for hit in hits],
            "filters_applied": [list(f) for f in filters],
        }
    else:
        body = {"engine": engine, "status": status, "context": [hit.context_material() for hit in hits]}
    return hashlib.sha256(canonical_json(body)).hexdigest()


def empty_run(
    status: SearchStatus,
    position: int,
    gaps: Sequence[str] = (),
    denied_rule: str | None = None,
    files: int = 0,
    filters: Sequence[tuple[str, str, str]] = (),
) -> SearchRun:
    return SearchRun(
        status=status,
        position=position,
        hits=(),
        filters_applied=tuple(filters),
        gaps=tuple(gaps),
        context_hash=context_hash_of(status, [], filters),
        files_scanned=files,
        denied_rule=denied_rule,
    )


def _fixed(value: float) -> str:
    text = f"{value:.{SCORE_PLACES}f}"
    return "0." + "0" * SCORE_PLACES if text.startswith("-0.") and float(text) == 0 else text


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _in_roots(
    chunk: IndexedChunk, roots: Sequence[str], root_sources: Sequence[str], source_of: dict[str, str]
) -> bool:
    """Whether a chunk lies under one of the target roots. A root whose first segment named a
    source when the search ran (`root_sources`) means that source, or a folder in it; any
    other root is a path prefix, as searches recorded before roots named sources had it."""
    if not roots:
        return True
    for root in roots:
        name, _, folder = root.strip("/").partition("/")
        if name in root_sources:
            if source_of.get(chunk.document_id) == name and (not folder or _under(chunk.path, folder)):
                return True
        elif _under(chunk.path, root):
            return True
    return False


def _snippet(text: str, wanted: set[str]) -> tuple[str, tuple[int, int]]:
    """The densest window (at most SNIPPET_CHARS) around the query's terms, cut from the
    chunk text itself so it occurs there verbatim."""
    found: list[Term] = [t for t in terms(text) if t.text in wanted]
    if not found:
        end = min(len(text), SNIPPET_CHARS)
        return text[:end], (0, end)
    best_start, best_count = found[0].start, -1
    for index, first in enumerate(found):
        distinct = {t.text for t in found[index:] if t.end <= first.start + SNIPPET_CHARS}
        if len(distinct) > best_count:
            best_start, best_count = first.start, len(distinct)
    line_start = text.rfind("\n", 0, best_start) + 1
    start = line_start if best_start - line_start <= SNIPPET_CHARS // 4 else best_start
    end = min(len(text), start + SNIPPET_CHARS)
    if end < len(text):
        space = text.rfind(" ", start + SNIPPET_CHARS // 2, end)
        end = space if space > 0 else end
    while end > start and text[end - 1].isspace():
        end -= 1
    return text[start:end], (start, end)


_verdicts: dict[tuple[PolicyRules, frozenset[str]], dict[tuple[str, str], Verdict]] = {}


def _verdict_cache(policy: PolicyRules, scopes: frozenset[str]) -> dict[tuple[str, str], Verdict]:
    """Rules look at path and sensitivity only, so verdicts are kept per (policy, scopes)
    across searches: policy cost grows with files, not with queries."""
    if len(_verdicts) > 64:
        _verdicts.clear()
    cache = _verdicts.setdefault((policy, scopes), {})
    if len(cache) > 200_000:
        cache.clear()
    return cache


def _judge(
    policy: PolicyRules, scopes: frozenset[str], cache: dict[tuple[str, str], Verdict], chunk: IndexedChunk
) -> Verdict:
    key = (chunk.path, chunk.sensitivity)
    verdict = cache.get(key)
    if verdict is None:
        verdict = cache[key] = policy.judge(
            ChunkFacts("", chunk.document_id, chunk.path, chunk.sensitivity), scopes
        )
    return verdict


def rank(
    ctx: UseCaseContext,
    tenant_id: str,
    query: str,
    request: SearchRequest,
    policy: PolicyRules,
    auth_scope: frozenset[str],
    deadline_s: float | None,
    *,
    withhold_restricted: bool = True,
    engine: str = ENGINE,
) -> SearchRun:
    """Rank `tenant_id`'s corpus as of `request.corpus_position` (a pure read).

    `deadline_s`: seconds this call may take (None: no limit); past it the answer is `timeout`.
    `withhold_restricted`: the built-in rule (`ledger.usecases.visibility`): chunks `auth_scope`
    may not see are left out before anything is ranked (the run's `withheld` counts them).
    Only the replay of a receipt recorded before the rule (it has no `withheld`) turns it off,
    to reproduce that receipt as it was ranked.
    `engine`: the ranking and hash rule to run (`ENGINES`); a replay passes its receipt's."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}")
    started = time.monotonic()
    index = ctx.search_index
    if index is None:
        raise RuntimeError("this process has no search index")
    position = request.corpus_position
    try:
        view = index.view(tenant_id, position)
    except LookupError:
        raise Busy(
            f"the search index has not reached position {position} yet; retry", code="index_behind"
        ) from None
    withheld: int | None = None
    if withhold_restricted:
        view, withheld = visible_corpus(view, auth_scope)
    restricted: set[str] = set()
    run = _rank(
        ctx,
        index,
        tenant_id,
        query,
        request,
        policy,
        auth_scope,
        deadline_s,
        view,
        started,
        restricted,
        engine,
    )
    restricted.update(hit.chunk_id for hit in run.hits if hit.sensitivity == "restricted")
    return replace(
        run,
        withheld=withheld,
        restricted_ids=frozenset(restricted),
        context_hash=context_hash_of(run.status, run.hits, run.filters_applied, engine),
    )


def _rank(
    ctx: UseCaseContext,
    index: SearchIndexReader,
    tenant_id: str,
    query: str,
    request: SearchRequest,
    policy: PolicyRules,
    auth_scope: frozenset[str],
    deadline_s: float | None,
    view: CorpusView,
    started: float,
    restricted: set[str],
    engine: str,
) -> SearchRun:
    """`rank` on a view; adds to `restricted` the restricted chunks its filters name."""
    position = request.corpus_position
    v1 = engine == ENGINE_V1

    def late() -> bool:
        return deadline_s is not None and time.monotonic() - started > deadline_s

    wanted = query_terms(query)
    if not wanted:
        return empty_run("no_hit", position, ["the query has no searchable words; ask with content words"])
    if late():
        return empty_run("timeout", position)
    n = view.live_count
    if n == 0:
        return empty_run("no_hit", position, ["no document is searchable for this tenant at this position"])
    avgdl = view.total_length / n
    size = len(view.lengths)
    bm25 = np.zeros(size)
    title, heading, filename = np.zeros(size), np.zeros(size), np.zeros(size)
    matched_idf = np.zeros(size)
    per_term: list[tuple[str, np.ndarray[Any, Any], np.ndarray[Any, Any]]] = []
    total_idf = 0.0
    missing: list[str] = []
    cover_idf: list[float] = []
    cover_terms: list[str] = []
    files = None if v1 else _FileBm25(view)
    for query_term in wanted:
        term = query_term.text
        rows, tf = view.body_postings(term)
        field_rows, codes = view.field_postings(term)
        df = len(rows)
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        if query_term.cover:
            total_idf += idf
            cover_idf.append(idf)
            cover_terms.append(term)
        if df == 0 and len(field_rows) == 0:
            if query_term.cover:
                missing.append(term)
            continue
        matches = np.zeros(size, dtype=bool)
        matches[rows] = True
        matches[field_rows] = True
        if query_term.cover:
            matched_idf[matches] += idf
        if not query_term.score:
            continue
        tf64 = tf.astype(np.float64)
        contribution = idf * tf64 / (tf64 + K1 * (1 - B + B * view.lengths[rows] / avgdl))
        bm25[rows] += contribution
        per_term.append((term, rows, contribution))
        if files is not None:
            files.add(idf_term_rows=(rows, tf64))
        title[field_rows[(codes & 1) > 0]] += TITLE_WEIGHT * idf
        heading[field_rows[(codes & 2) > 0]] += HEADING_WEIGHT * idf
        filename[field_rows[(codes & 4) > 0]] += FILENAME_WEIGHT * idf
    if late():
        return empty_run("timeout", position)
    touched = np.nonzero(matched_idf > 0)[0]
    seen = np.zeros(int(view.document_numbers.max(initial=0)) + 1, dtype=bool)
    seen[view.document_numbers[touched]] = True
    files_scanned = int(seen.sum())
    scored = (bm25 + title + heading + filename)[touched] > 0
    if v1:
        needed = MIN_COVERAGE * total_idf
    else:
        known = [idf for idf, term in zip(cover_idf, cover_terms, strict=True) if term not in missing]
        needed = _needed_coverage(known, missing, total_idf)
    qualified = touched[(matched_idf[touched] >= needed - 1e-12) & scored]
    roots = request.target_roots
    prefixes = request.filters.path_prefixes
    sensitivities = set(request.filters.sensitivity)
    candidates: list[int] = qualified.tolist()
    if roots or prefixes or sensitivities:
        root_sources = request.root_sources or []
        source_of = ctx.lookups.documents_of_sources(tenant_id, root_sources) if root_sources else {}
        candidates = [
            row
            for row in candidates
            if _in_roots(view.chunk(row), roots, root_sources, source_of)
            and (not prefixes or any(view.chunk(row).path.startswith(p) for p in prefixes))
            and (not sensitivities or view.chunk(row).sensitivity in sensitivities)
        ]
    if not candidates:
        return empty_run(
            "no_hit",
            position,
            _gaps([t.text for t in wanted], missing, bool(len(touched)), roots),
            files=files_scanned,
        )
    rows_array = np.array(candidates, dtype=np.int64)
    position_bonus = POSITION_WEIGHT / (1 + view.ordinals[rows_array])
    base = bm25[rows_array] + title[rows_array] + heading[rows_array] + filename[rows_array] + position_bonus
    file_score = np.zeros(len(rows_array))
    if files is not None:
        file_score = FILE_WEIGHT * files.scores[view.document_numbers[rows_array]]
        base = base + file_score
    slot_of = {row: i for i, row in enumerate(candidates)}
    top_k = min(request.top_k, policy.max_top_k)
    ranked = _top_ranked(view, policy, auth_scope, candidates, base, top_k * FILTER_WINDOW)
    if late():
        return empty_run("timeout", position, files=files_scanned)
    window = ranked[: top_k * FILTER_WINDOW]
    allowed = [item for item in ranked if not item[4].denied][: top_k * FILTER_WINDOW]
    wanted_rows = {item[3] for item in window} | {item[3] for item in allowed}
    states = index.chunk_states(tenant_id, [view.chunk(row) for row in sorted(wanted_rows)])
    filters: list[tuple[str, str, str]] = []
    first_deny: str | None = None
    for _score, _path, _ordinal, row, verdict, _base in window:
        state = states.get(row)
        if state is None:
            continue
        for rule_id, action in verdict.applied:
            if len(filters) < MAX_FILTERS_APPLIED:
                filters.append((rule_id, state.chunk_id, action))
                if state.sensitivity == "restricted":
                    restricted.add(state.chunk_id)
            if action == "deny" and first_deny is None:
                first_deny = rule_id
    if not allowed:
        if first_deny is not None:
            return empty_run(
                "denied",
                position,
                [f"every match was withheld by policy rule {first_deny}"],
                denied_rule=first_deny,
                files=files_scanned,
                filters=filters,
            )
        return empty_run(
            "no_hit", position, _gaps([t.text for t in wanted], missing, True, roots), files=files_scanned
        )
    term_sets = {t.text for t in wanted if t.score}
    hits: list[SearchHit] = []
    per_file: dict[str, list[SearchHit]] = {}
    for score, path, _ordinal, row, verdict, base_score in allowed:
        if v1 and len(hits) >= top_k:
            break
        state = states.get(row)
        # A file is a document: @2 keeps the same relative path in two sources apart (@1,
        # kept as recorded, went by path).
        file = path if v1 or state is None else state.document_id
        if not v1 and file not in per_file and len(per_file) >= top_k:
            continue  # @2: top_k counts citations (files); their later parts may still join
        if late():
            return empty_run("timeout", position, files=files_scanned)
        if state is None or state.text is None:
            continue
        same_file = per_file.get(file, [])
        if len(same_file) >= MAX_HITS_PER_FILE:
            continue
        try:
            text = ctx.sealer.unseal(state.text, tenant_id=tenant_id)
            heading_text = (
                ctx.sealer.unseal(state.heading_path, tenant_id=tenant_id) if state.heading_path else None
            )
        except (KeyDestroyed, SealBroken):
            continue  # erased a moment ago
        snippet, span = _snippet(text, term_sets)
        if any(h.snippet == snippet for h in same_file):
            continue  # the same words twice in one file: cite them once
        if verdict.redacted:
            snippet_out, span_out = "", None
        else:
            snippet_out, span_out = snippet, span
        idx = slot_of[row]
        components = [
            ("bm25", _fixed(float(bm25[row]))),
            ("title_boost", _fixed(float(title[row]))),
            ("heading_boost", _fixed(float(heading[row]))),
            ("filename_boost", _fixed(float(filename[row]))),
            ("position", _fixed(float(position_bonus[idx]))),
        ]
        if not v1:
            components.append(("file_bm25", _fixed(float(file_score[idx]))))
        if verdict.factor != 1:
            components.append(("policy", _fixed(float(score) - base_score)))
        term_scores = tuple(
            (term, _fixed(float(contribution[np.searchsorted(rows_of, row)])))
            for term, rows_of, contribution in _sorted_postings(per_term)
            if _contains(rows_of, row)
        )
        hit = SearchHit(
            document_id=state.document_id,
            version_id=state.version_id,
            chunk_id=state.chunk_id,
            path=path,
            start_line=state.start_line,
            end_line=state.end_line,
            heading_path=heading_text,
            score=score,
            score_breakdown=tuple(components),
            term_scores=term_scores,
            snippet=snippet_out,
            snippet_span=span_out,
            sensitivity=state.sensitivity,
            policy_rules=verdict.applied,
            chunk=state,
        )
        per_file.setdefault(file, same_file).append(hit)
        hits.append(hit)
    if not hits:
        return empty_run(
            "no_hit",
            position,
            _gaps([t.text for t in wanted], missing, True, roots),
            files=files_scanned,
            filters=filters,
        )
    # Merged per file: a file's hits stay together, files in order of their best hit (hits
    # come best first: score, then path, then place in the file). @1 keeps a file's hits in
    # score order; @2 in reading order, the parts of one citation (`citations_of`).
    if v1:
        order = {path: i for i, path in enumerate(dict.fromkeys(h.path for h in hits))}
        merged = tuple(sorted(hits, key=lambda h: order[h.path]))
    else:
        order = {doc: i for i, doc in enumerate(dict.fromkeys(h.document_id for h in hits))}
        merged = tuple(sorted(hits, key=lambda h: (order[h.document_id], h.start_line, h.end_line)))
    return SearchRun(
        status="ok",
        position=position,
        hits=merged,
        filters_applied=tuple(filters),
        gaps=(),
        context_hash=context_hash_of("ok", merged, filters),
        files_scanned=files_scanned,
    )


class _FileBm25:
    """`@2`: BM25 of whole files (a file's text is its live chunks': term counts and lengths
    summed per document), the same k1 and b, N and df counted in files."""

    def __init__(self, view: CorpusView) -> None:
        self.numbers = view.document_numbers
        size = int(self.numbers.max(initial=-1)) + 1
        live = np.asarray(view.live, dtype=bool)
        numbers = self.numbers[: len(live)][live]
        self.lengths = np.bincount(numbers, weights=view.lengths[: len(live)][live], minlength=size)
        self.count = int((np.bincount(numbers, minlength=size) > 0).sum())
        self.avgdl = float(self.lengths.sum()) / max(self.count, 1)
        self.scores = np.zeros(size)

    def add(self, idf_term_rows: tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]) -> None:
        rows, tf = idf_term_rows
        per_file = np.bincount(self.numbers[rows], weights=tf, minlength=len(self.scores))
        held = np.nonzero(per_file)[0]
        df = len(held)
        idf = math.log(1 + (self.count - df + 0.5) / (df + 0.5))
        counts = per_file[held]
        self.scores[held] += idf * counts / (counts + K1 * (1 - B + B * self.lengths[held] / self.avgdl))


def _needed_coverage(known: Sequence[float], missing: Sequence[str], corpus_max_idf_sum: float) -> float:
    """`@2`'s no-hit rule: the idf mass a chunk must cover. Every term the corpus knows counts
    with its idf. A term no live chunk holds (OOV) counts with the largest idf among the
    query's known terms (an unknown word weighs as much as the query's most specific known
    one, not as the rarest word possible: one stray word no longer outweighs the rest),
    except a word that asks how much or how long (`QUESTION_FORM_STEMS`), which counts
    nothing. More than `MAX_EXCUSED_OOV` unknown content words: the query is about what the
    corpus does not hold, and they count with the largest idf as under `@1`
    (`corpus_max_idf_sum` is that total). With unknown content words a chunk must cover
    `MIN_COVERAGE_OOV` of the mass, else `MIN_COVERAGE`."""
    content = [term for term in missing if term not in QUESTION_FORM_STEMS]
    if len(content) > MAX_EXCUSED_OOV or not known:
        return MIN_COVERAGE * corpus_max_idf_sum
    total = sum(known) + len(content) * max(known)
    if content:  # more than half: as many unknown topic words as known ones is not enough
        return MIN_COVERAGE_OOV * total + 1e-9
    return MIN_COVERAGE * total


Ranked = tuple[str, str, int, int, Verdict, float]  # (score, path, ordinal, row, verdict, base score)


def _top_ranked(
    view: CorpusView,
    policy: PolicyRules,
    scopes: frozenset[str],
    candidates: list[int],
    base: np.ndarray[Any, Any],
    window: int,
) -> list[Ranked]:
    """The best candidates in final order (score, then path, then place in the file), enough
    of them to hold `window` of all and `window` of the allowed ones: judged in order of their
    score before policy, stopping once no unjudged one could still climb past (its base score
    times the largest boost is below the window's last score). Cost follows the window, not
    the number of matches."""
    ceiling = math.prod((float(r.factor) for r in policy.rules if r.action == "boost"), start=1.0)
    verdicts = _verdict_cache(policy, scopes)
    order = np.argsort(-base, kind="stable")
    judged: list[Ranked] = []
    take = min(len(order), max(window * 4, 64))
    done = 0
    while True:
        for i in order[done:take].tolist():
            row = candidates[i]
            chunk = view.chunk(row)
            verdict = _judge(policy, scopes, verdicts, chunk)
            final = float(base[i]) * float(verdict.factor) if verdict.factor != 1 else float(base[i])
            judged.append((_fixed(final), chunk.path, chunk.ordinal, row, verdict, float(base[i])))
        done = take
        judged.sort(key=lambda item: (-decimal.Decimal(item[0]), item[1], item[2]))
        if done >= len(order):
            return judged
        bound = decimal.Decimal(_fixed(float(base[order[done]]) * ceiling))
        safe = [item for item in judged if decimal.Decimal(item[0]) > bound]
        if len(safe) >= window and sum(not item[4].denied for item in safe) >= window:
            return judged
        take = min(len(order), take * 4)


def _sorted_postings(
    per_term: list[tuple[str, np.ndarray[Any, Any], np.ndarray[Any, Any]]],
) -> list[tuple[str, np.ndarray[Any, Any], np.ndarray[Any, Any]]]:
    out = []
    for term, rows, contribution in per_term:
        order = np.argsort(rows, kind="stable")
        out.append((term, rows[order], contribution[order]))
    return out


def _contains(sorted_rows: np.ndarray[Any, Any], row: int) -> bool:
    at = int(np.searchsorted(sorted_rows, row))
    return at < len(sorted_rows) and int(sorted_rows[at]) == row


def _gaps(wanted: Sequence[str], missing: Sequence[str], some_match: bool, roots: Sequence[str]) -> list[str]:
    gaps = []
    if missing:
        gaps.append(f"no searchable document mentions: {', '.join(missing[:10])}")
    if some_match:
        gaps.append("some documents share words with the query but none covers enough of it")
    if roots:
        gaps.append("widen target_roots: only these roots were searched")
    gaps.append("rephrase with the words the documents would use, or add the missing document as a source")
    return gaps[:MAX_GAPS]
