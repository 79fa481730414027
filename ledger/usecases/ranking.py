"""The ledger's own ranking: `rank`, a pure read of the search index as of a log position.
The search use case (`ledger.usecases.search`) runs it at the current position and records
the receipt; a replay (`ledger.usecases.replay`) runs it as of the receipt's position.

Ranking: BM25 (the Lucene variant bm25s calls `lucene`: k1 1.2, b 0.75) over chunk text, with N,
avgdl and df taken from the chunk versions live at the position (`corpus_position`, inclusive:
live_from <= p < live_to), plus additive boosts for query terms in the document's title, the chunk's
heading path and the file name (each weighted by the term's idf), and a small bonus for early
sections. `@2` adds half the BM25 of the chunk's whole file (`file_bm25`: a file whose sections
together answer the query ranks above one section that merely repeats a word; what whole-file
rankers see and a chunk alone does not). A policy bundle's boost/downrank factors multiply the sum.

No hit, on principle: a chunk is a candidate only if the query terms it contains carry at least
`MIN_COVERAGE` of the query's idf mass (`@1`: a term no live chunk holds counts with the largest
idf; `@2`: see `_needed_coverage`). A query about something the corpus does not hold therefore finds
nothing, however common its other words are.

Engines: each receipt names the engine that ranked it (`ENGINES`); a replay runs that engine's
ranking and context-hash rule, so every receipt keeps reproducing byte for byte. `@2`: the context
hash covers the context (not scores), `top_k` counts files, `file_bm25`. `@3` to `@10`: a module
each (`ranking_v3` ... `ranking_v10`), whose docstring says what that version changed.

Determinism: scores are fixed-precision decimal strings; ties are broken by path, then position in
the file; the same corpus, query and policy give the same bytes and the same `context_hash` — live,
and on a replay as of the receipt's position (both run this function).
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np

from ledger.domain.events import SearchRequest
from ledger.domain.fields import MAX_FILTERS_APPLIED
from ledger.policy.policy_rules import PolicyRules
from ledger.retrieval.search_text import query_terms
from ledger.usecases import ranking_v10 as v10  # the steps that differ by engine (each dispatches)
from ledger.usecases.context import UseCaseContext
from ledger.usecases.errors import Busy
from ledger.usecases.ports import CorpusView, SearchIndexReader
from ledger.usecases.ranking_select import select_ranked
from ledger.usecases.ranking_steps import (
    FILE_WEIGHT,
    FILENAME_WEIGHT,
    FILTER_WINDOW,
    HEADING_WEIGHT,
    K1,
    MAX_HITS_PER_FILE,
    MIN_COVERAGE,
    POSITION_WEIGHT,
    SNIPPET_CHARS,
    TITLE_WEIGHT,
    B,
    _contains,
    _FileBm25,
    _fixed,
    _gaps,
    _in_roots,
    _needed_coverage,
    _snippet,
    _sorted_postings,
    score_parts,
)
from ledger.usecases.ranking_v3 import (
    FILE_WEIGHT_V3,
    add_document_coverage,
    family_postings,
    needed_document_coverage,
    query_forms,
)
from ledger.usecases.ranking_v4 import fused_file_weight, needed_document_coverage_v4
from ledger.usecases.ranking_v8 import PageEvidence
from ledger.usecases.search_run import (
    ENGINE,
    ENGINE_V1,
    ENGINE_V2,
    ENGINE_V3,
    ENGINE_V4,
    ENGINE_V5,
    ENGINE_V6,
    ENGINES,
    SearchHit,
    SearchRun,
    SearchStatus,
    context_hash_of,
    empty_run,
)
from ledger.usecases.visibility import visible_corpus
from ledger.writing.sealing import KeyDestroyed, SealBroken

# Where callers and tests have always found these (they live in `search_run` and `ranking_steps`).
__all__ = [
    "ENGINE",
    "ENGINES",
    "ENGINE_V1",
    "ENGINE_V2",
    "ENGINE_V3",
    "ENGINE_V4",
    "ENGINE_V5",
    "ENGINE_V6",
    "FILE_WEIGHT",
    "K1",
    "MIN_COVERAGE",
    "SNIPPET_CHARS",
    "B",
    "SearchHit",
    "SearchRun",
    "SearchStatus",
    "context_hash_of",
    "empty_run",
    "rank",
]


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
    v1, v3, v4 = (
        engine == ENGINE_V1,
        engine in (ENGINE_V3, *v10.FUSED_ENGINES),
        engine in v10.FUSED_ENGINES,
    )

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
    document_idf = np.zeros(int(view.document_numbers.max(initial=-1)) + 1) if v3 else None
    for query_term in wanted:
        term = query_term.text
        if v3:  # @3: the term and its word forms, one term (`ranking_v3`)
            rows, tf, field_rows, codes = family_postings(view, query_forms(query, query_term))
        else:
            rows, tf = view.body_postings(term)
            field_rows, codes = view.field_postings(term)
        df = len(rows)
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        # What the no-hit rule counts: the scored postings, or @5's / @6's (`ranking_v6`).
        gate_rows, gate_fields, gate_idf = v10.no_hit_evidence(
            engine, view, query, query_term, (rows, field_rows, idf)
        )
        if query_term.cover:
            total_idf += gate_idf
            cover_idf.append(gate_idf)
            cover_terms.append(term)
        if len(gate_rows) == 0 and len(gate_fields) == 0:
            if query_term.cover:
                missing.append(term)
            continue
        matches = np.zeros(size, dtype=bool)
        matches[gate_rows] = True
        matches[gate_fields] = True
        if query_term.cover:
            matched_idf[np.flatnonzero(matches)] += gate_idf  # the rows, not a mask over all
            if document_idf is not None:
                add_document_coverage(document_idf, view, gate_rows, gate_fields, gate_idf)
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
    touched = np.flatnonzero(matched_idf > 0)
    seen = np.zeros(int(view.document_numbers.max(initial=0)) + 1, dtype=bool)
    seen[view.document_numbers[touched]] = True
    files_scanned = int(seen.sum())
    # From here on over the touched rows only (the same sums, element by element).
    bm25_of, fields_of = bm25[touched], (title[touched], heading[touched], filename[touched])
    fields_of = v10.field_boosts(engine, *fields_of)  # @7 (`ranking_v7`)
    evidence = bm25_of + fields_of[0] + fields_of[1] + fields_of[2]
    scored = evidence > 0
    known = [idf for idf, term in zip(cover_idf, cover_terms, strict=True) if term not in missing]
    covering = None
    if document_idf is not None:  # @3: some document must cover enough; then any match ranks
        needed = (needed_document_coverage_v4 if v4 else needed_document_coverage)(known, missing)
        covering = document_idf >= v10.gate_bar(engine, needed) - 1e-12  # @8: near ones too
        chosen = np.flatnonzero(scored) if covering.any() else touched[:0]  # indexes into `touched`
    else:
        needed = MIN_COVERAGE * total_idf if v1 else _needed_coverage(known, missing, total_idf)
        chosen = np.flatnonzero((matched_idf[touched] >= needed - 1e-12) & scored)
    roots = request.target_roots
    prefixes = request.filters.path_prefixes
    sensitivities = set(request.filters.sensitivity)
    if roots or prefixes or sensitivities:
        root_sources = request.root_sources or []
        source_of = ctx.lookups.documents_of_sources(tenant_id, root_sources) if root_sources else {}
        inside = [
            _in_roots(chunk, roots, root_sources, source_of)
            and (not prefixes or any(chunk.path.startswith(p) for p in prefixes))
            and (not sensitivities or chunk.sensitivity in sensitivities)
            for chunk in map(view.chunk, touched[chosen].tolist())
        ]
        chosen = chosen[np.array(inside, dtype=bool)]
    if not len(chosen):
        return empty_run(
            "no_hit",
            position,
            _gaps([t.text for t in wanted], missing, bool(len(touched)), roots),
            files=files_scanned,
        )
    rows_array = touched[chosen]
    position_bonus = POSITION_WEIGHT / (1 + view.ordinals[rows_array])
    base = evidence[chosen] + position_bonus
    file_score = np.zeros(len(rows_array))
    if files is not None:
        whole_files = files.scores[view.document_numbers[rows_array]]
        weight = fused_file_weight(base, whole_files) if v4 else FILE_WEIGHT_V3 if v3 else FILE_WEIGHT
        file_score = weight * whole_files
        base = base + file_score
    top_k = min(request.top_k, policy.max_top_k)
    window_size = top_k * FILTER_WINDOW  # candidates the policy judges
    change_log = v10.change_log_parts(engine, view, query, rows_array, base)  # @9 (`ranking_v9`)
    at8 = None  # @9: `@8`'s order, by which the page is shown or not (`ranking_v9.page_gaps`)
    if change_log is not None:
        at8 = partial(select_ranked, view, policy, auth_scope, rows_array, base, window_size, v3)
        base = base + change_log
    # @3: each file's best parts only, the policy window then spans files (`ranking_select`).
    ranked, kept = select_ranked(view, policy, auth_scope, rows_array, base, window_size, v3)
    rows_array, position_bonus, file_score = rows_array[kept], position_bonus[kept], file_score[kept]
    change_log = None if change_log is None else change_log[kept]
    if late():
        return empty_run("timeout", position, files=files_scanned)
    window = ranked[:window_size]
    allowed = [item for item in ranked if not item[4].denied][:window_size]
    page = PageEvidence((ctx, index, tenant_id), query, view, (covering, document_idf, needed), allowed)
    why = v10.page_gaps(engine, page, window_size, at8)
    allowed = allowed if why is None else []  # @3: a page only when a covering document answers
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
        gaps = why or _gaps([t.text for t in wanted], missing, True, roots)  # @8 may say why
        return empty_run("no_hit", position, gaps, files=files_scanned)
    term_sets = {t.text for t in wanted if t.score}
    sorted_postings = _sorted_postings(per_term)  # once, not per hit
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
        idx = int(np.searchsorted(rows_array, row))  # rows ascend (np.nonzero order), each once
        at = int(np.searchsorted(touched, row))
        components = score_parts(
            [float(bm25[row]), *(float(part[at]) for part in fields_of), float(position_bonus[idx])],
            None if v1 else float(file_score[idx]),
            0.0 if change_log is None else float(change_log[idx]),
            None if verdict.factor == 1 else float(score) - base_score,
        )
        term_scores = tuple(
            (term, _fixed(float(contribution[np.searchsorted(rows_of, row)])))
            for term, rows_of, contribution in sorted_postings
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
            score_breakdown=components,
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
        context_hash="",  # `rank` sets it, by the engine's rule
        files_scanned=files_scanned,
    )
