"""The replay diff envelope (seed `003`): what differs between two retrieval outcomes.

Pure functions over plain values. Entries are matched by chunk id, so an entry
that is still selected at another rank or score is `common` (its old and new
rank and score are listed), never removed and added. Filters are matched by
`(rule_id, chunk_id, action)`.

What changed is told apart (`changes`): `membership` (entries added or removed),
`order` (the entries both hold are in another order), `text` (a cited section was
edited: its document is cited by both with another chunk, or the same chunk with
another snippet span) and, apart from these, `scores` (`score_changes`: each common
entry whose score moved, old and new). A context hash of `citeledger-bm25@2` covers
the first three, never scores: corpus-wide statistics move every score on any edit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.domain.events import ReplaySummary

FilterKey = tuple[str, str, str]


@dataclass(frozen=True)
class Outcome:
    """One retrieval's answer as the diff sees it: entries in rank order (plain dicts
    with at least `chunk_id`, `document_id`, `path`, `score`), its filters and hash."""

    context_hash: str
    entries: tuple[Mapping[str, Any], ...]
    filters: tuple[FilterKey, ...]


def outcome_of_receipt(payload: Mapping[str, Any]) -> Outcome:
    """The outcome a receipt recorded (its `RetrievalRecorded` payload)."""
    return Outcome(
        context_hash=str(payload["context_hash"]),
        entries=tuple(payload.get("selected_entries", [])),
        filters=filter_keys(payload.get("filters_applied", [])),
    )


def filter_keys(filters: Iterable[Mapping[str, Any] | Sequence[str]]) -> tuple[FilterKey, ...]:
    keys: list[FilterKey] = []
    for item in filters:
        if isinstance(item, Mapping):
            keys.append((str(item["rule_id"]), str(item["chunk_id"]), str(item["action"])))
        else:
            rule_id, chunk_id, action = item
            keys.append((str(rule_id), str(chunk_id), str(action)))
    return tuple(keys)


def _score(entry: Mapping[str, Any]) -> str | None:
    """An entry's score as text; None when its engine gave none (an OTLP span without scores)."""
    score = entry.get("score")
    return None if score is None else str(score)


def entry_view(entry: Mapping[str, Any], rank: int) -> dict[str, Any]:
    """What the envelope shows of an entry: references and ranking, never text."""
    locator = entry.get("locator") or {}
    view: dict[str, Any] = {
        "chunk_id": entry["chunk_id"],
        "document_id": entry["document_id"],
        "version_id": entry.get("version_id"),
        "path": entry["path"],
        "rank": rank,
        "score": _score(entry),
    }
    if "start_line" in locator:
        view["locator"] = {"start_line": locator["start_line"], "end_line": locator["end_line"]}
    if entry.get("citation_id"):
        view["citation_id"] = entry["citation_id"]
    return view


def filter_view(key: FilterKey) -> dict[str, str]:
    return {"rule_id": key[0], "chunk_id": key[1], "action": key[2]}


def _span(entry: Mapping[str, Any]) -> tuple[int, int] | None:
    span = entry.get("snippet_span")
    if span is None:
        return None
    if isinstance(span, Mapping):
        return int(span["start"]), int(span["end"])
    start, end = span
    return int(start), int(end)


def diff(original: Outcome, replay: Outcome) -> dict[str, Any]:
    """The seed's envelope: `context_hash`, `selected_entries`, `filters_applied`.
    `common` stays the seed's count; `common_entries` tells how each one moved (`moved`:
    its rank; `score_changed`: its score), `score_changes` lists the score movements apart
    and `changes` says which kinds of change there are."""
    before = {str(e["chunk_id"]): (rank, e) for rank, e in enumerate(original.entries, start=1)}
    after = {str(e["chunk_id"]): (rank, e) for rank, e in enumerate(replay.entries, start=1)}
    added = [entry_view(e, rank) for chunk, (rank, e) in after.items() if chunk not in before]
    removed = [entry_view(e, rank) for chunk, (rank, e) in before.items() if chunk not in after]
    common = []
    respanned = False
    for chunk, (old_rank, old) in before.items():
        if chunk not in after:
            continue
        new_rank, new = after[chunk]
        respanned = respanned or _span(old) != _span(new)
        common.append(
            {
                "chunk_id": chunk,
                "path": new["path"],
                "old_rank": old_rank,
                "new_rank": new_rank,
                "old_score": _score(old),
                "new_score": _score(new),
                "moved": old_rank != new_rank,
                "score_changed": _score(old) != _score(new),
            }
        )
    old_filters, new_filters = set(original.filters), set(replay.filters)
    old_order = [chunk for chunk in before if chunk in after]
    new_order = [chunk for chunk in after if chunk in before]
    edited = {e["document_id"] for e in added} & {e["document_id"] for e in removed}
    score_changes = [
        {
            "chunk_id": e["chunk_id"],
            "path": e["path"],
            "old_score": e["old_score"],
            "new_score": e["new_score"],
        }
        for e in common
        if e["score_changed"]
    ]
    return {
        "context_hash": {
            "original": original.context_hash,
            "replay": replay.context_hash,
            "changed": original.context_hash != replay.context_hash,
        },
        "changes": {
            "membership": bool(added or removed),
            "order": old_order != new_order,
            "text": bool(edited) or respanned,
            "scores": bool(score_changes),
        },
        "selected_entries": {
            "added": added,
            "removed": removed,
            "common": len(common),
            "common_entries": common,
        },
        "score_changes": score_changes,
        "filters_applied": {
            "added": [filter_view(k) for k in sorted(new_filters - old_filters)],
            "removed": [filter_view(k) for k in sorted(old_filters - new_filters)],
        },
    }


def without_chunks(envelope: Mapping[str, Any], hidden: frozenset[str]) -> dict[str, Any]:
    """The envelope as shown to a caller who may not see the `hidden` chunks: their entries
    and filters left out, `common` counting what is left. The context hashes stay (they
    commit to the whole answer but reveal nothing of it)."""
    if not hidden:
        return dict(envelope)
    entries, filters = envelope["selected_entries"], envelope["filters_applied"]
    common = [e for e in entries["common_entries"] if e["chunk_id"] not in hidden]
    shown: dict[str, Any] = dict(envelope)
    if "score_changes" in envelope:
        shown["score_changes"] = [e for e in envelope["score_changes"] if e["chunk_id"] not in hidden]
    return {
        **shown,
        "selected_entries": {
            "added": [e for e in entries["added"] if e["chunk_id"] not in hidden],
            "removed": [e for e in entries["removed"] if e["chunk_id"] not in hidden],
            "common": len(common),
            "common_entries": common,
        },
        "filters_applied": {
            "added": [f for f in filters["added"] if f["chunk_id"] not in hidden],
            "removed": [f for f in filters["removed"] if f["chunk_id"] not in hidden],
        },
    }


def summary(envelope: Mapping[str, Any]) -> ReplaySummary:
    """The counts a `ReplayRecorded` entry keeps of an envelope."""
    entries, filters = envelope["selected_entries"], envelope["filters_applied"]
    return ReplaySummary(
        context_hash_changed=bool(envelope["context_hash"]["changed"]),
        entries_added=len(entries["added"]),
        entries_removed=len(entries["removed"]),
        entries_common=int(entries["common"]),
        filters_added=len(filters["added"]),
        filters_removed=len(filters["removed"]),
    )
