"""The parts of `ranking._rank`: its tuning constants, the snippet window, the policy verdict
cache, `@2`'s whole-file BM25 and no-hit rule, the top-candidates cut, and the gap hints.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ledger.policy.policy_rules import ChunkFacts, PolicyRules, Verdict
from ledger.retrieval.search_text import matching_terms, stem_word
from ledger.usecases.ports import CorpusView, IndexedChunk

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


SCORE_PARTS = ("bm25", "title_boost", "heading_boost", "filename_boost", "position")


def _fixed(value: float) -> str:
    text = f"{value:.{SCORE_PLACES}f}"
    return "0." + "0" * SCORE_PLACES if text.startswith("-0.") and float(text) == 0 else text


def score_parts(
    parts: Sequence[float], file_part: float | None, change_log: float, policy: float | None
) -> tuple[tuple[str, str], ...]:
    """A citation's `reason`: the parts its score sums, `SCORE_PARTS` in order, then `file_bm25`
    (from `@2`), `change_log` (`@9`, when it discounted the chunk) and `policy` (when a rule
    changed the score)."""
    named = [
        *zip(SCORE_PARTS, parts, strict=True),
        ("file_bm25", file_part),
        ("change_log", change_log or None),
        ("policy", policy),
    ]
    return tuple((name, _fixed(value)) for name, value in named if value is not None)


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
    found = matching_terms(text, wanted)
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


class _FileBm25:
    """`@2`: BM25 of whole files (a file's text is its live chunks': term counts and lengths
    summed per document), the same k1 and b, N and df counted in files."""

    # The files' lengths, count and mean length of the last few views: the same for every query
    # at one position (the arrays are replaced, never changed in place, so identity names them).
    _stats: tuple[tuple[Any, Any, Any, tuple[Any, int, float]], ...] = ()

    def __init__(self, view: CorpusView) -> None:
        self.numbers = view.document_numbers
        live = np.asarray(view.live, dtype=bool)
        for seen_live, seen_lengths, seen_numbers, stats in _FileBm25._stats:
            if seen_numbers is self.numbers and seen_lengths is view.lengths:
                if seen_live is live or (seen_live.shape == live.shape and np.array_equal(seen_live, live)):
                    self.lengths, self.count, self.avgdl = stats
                    break
        else:
            size = int(self.numbers.max(initial=-1)) + 1
            numbers = self.numbers[: len(live)][live]
            self.lengths = np.bincount(numbers, weights=view.lengths[: len(live)][live], minlength=size)
            self.count = int((np.bincount(numbers, minlength=size) > 0).sum())
            self.avgdl = float(self.lengths.sum()) / max(self.count, 1)
            entry = (live, view.lengths, self.numbers, (self.lengths, self.count, self.avgdl))
            _FileBm25._stats = (entry, *_FileBm25._stats[:3])
        self.scores = np.zeros(len(self.lengths))

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
    complete: bool = True,
) -> list[Ranked] | None:
    """The best candidates in final order (score, then path, then place in the file), enough
    of them to hold `window` of all and `window` of the allowed ones: judged in order of their
    score before policy, stopping once no unjudged one could still climb past (its base score
    times the largest boost is below the window's last score). Cost follows the window, not
    the number of matches. `complete` False: `candidates` are the best-scored ones of more
    (a prefix of their order, `ranking_select`); None when the walk would pass their end."""
    ceiling = math.prod((float(r.factor) for r in policy.rules if r.action == "boost"), start=1.0)
    verdicts = _verdict_cache(policy, scopes)
    order = np.argsort(-base, kind="stable")
    judged: list[Ranked] = []
    # Scores are 6-place decimal strings; below 1e8 their floats keep their order and tell
    # apart any two (spacing 1e-6, float steps under 1.5e-8), cheaper than `Decimal`.
    value: Any = float if float(base.max(initial=0.0)) * max(ceiling, 1.0) < 1e8 else decimal.Decimal
    take = max(window * 4, 64)
    done = 0
    while True:
        if not complete and take >= len(order):
            return None
        take = min(len(order), take)
        batch = order[done:take]
        for i, score in zip(batch.tolist(), base[batch].tolist(), strict=True):
            row = candidates[i]
            chunk = view.chunk(row)
            verdict = _judge(policy, scopes, verdicts, chunk)
            final = score * float(verdict.factor) if verdict.factor != 1 else score
            judged.append((_fixed(final), chunk.path, chunk.ordinal, row, verdict, score))
        done = take
        judged.sort(key=lambda item: (-value(item[0]), item[1], item[2]))
        if done >= len(order):
            return judged
        bound = value(_fixed(float(base[order[done]]) * ceiling))
        safe = [item for item in judged if value(item[0]) > bound]
        if len(safe) >= window and sum(not item[4].denied for item in safe) >= window:
            return judged
        take = take * 4


def _sorted_postings(
    per_term: list[tuple[str, np.ndarray[Any, Any], np.ndarray[Any, Any]]],
) -> list[tuple[str, np.ndarray[Any, Any], np.ndarray[Any, Any]]]:
    out = []
    for term, rows, contribution in per_term:
        if len(rows) < 2 or bool((rows[1:] >= rows[:-1]).all()):  # already in order: nothing to sort
            out.append((term, rows, contribution))
            continue
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
