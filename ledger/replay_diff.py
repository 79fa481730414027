"""The replay diff envelope (seed `003`): what differs between two retrieval outcomes.

Pure functions over plain values. Entries are matched by chunk id, so an entry
that is still selected at another rank or score is `common` (its old and new
rank and score are listed), never removed and added. Filters are matched by
`(rule_id, chunk_id, action)`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.events import ReplaySummary

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


def entry_view(entry: Mapping[str, Any], rank: int) -> dict[str, Any]:
    """What the envelope shows of an entry: references and ranking, never text."""
    locator = entry.get("locator") or {}
    view: dict[str, Any] = {
        "chunk_id": entry["chunk_id"],
        "document_id": entry["document_id"],
        "version_id": entry.get("version_id"),
        "path": entry["path"],
        "rank": rank,
        "score": str(entry["score"]),
    }
    if "start_line" in locator:
        view["locator"] = {"start_line": locator["start_line"], "end_line": locator["end_line"]}
    if entry.get("citation_id"):
        view["citation_id"] = entry["citation_id"]
    return view


def filter_view(key: FilterKey) -> dict[str, str]:
    return {"rule_id": key[0], "chunk_id": key[1], "action": key[2]}


def diff(original: Outcome, replay: Outcome) -> dict[str, Any]:
    """The seed's envelope: `context_hash`, `selected_entries`, `filters_applied`.
    `common` stays the seed's count; `common_entries` tells how each one moved."""
    before = {str(e["chunk_id"]): (rank, e) for rank, e in enumerate(original.entries, start=1)}
    after = {str(e["chunk_id"]): (rank, e) for rank, e in enumerate(replay.entries, start=1)}
    added = [entry_view(e, rank) for chunk, (rank, e) in after.items() if chunk not in before]
    removed = [entry_view(e, rank) for chunk, (rank, e) in before.items() if chunk not in after]
    common = []
    for chunk, (old_rank, old) in before.items():
        if chunk not in after:
            continue
        new_rank, new = after[chunk]
        common.append(
            {
                "chunk_id": chunk,
                "path": new["path"],
                "old_rank": old_rank,
                "new_rank": new_rank,
                "old_score": str(old["score"]),
                "new_score": str(new["score"]),
                "moved": old_rank != new_rank or str(old["score"]) != str(new["score"]),
            }
        )
    old_filters, new_filters = set(original.filters), set(replay.filters)
    return {
        "context_hash": {
            "original": original.context_hash,
            "replay": replay.context_hash,
            "changed": original.context_hash != replay.context_hash,
        },
        "selected_entries": {
            "added": added,
            "removed": removed,
            "common": len(common),
            "common_entries": common,
        },
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
    return {
        **envelope,
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
