"""What became of each entry of an `external:` receipt: the ledger cannot re-run a foreign
engine, so it reports, from projected state as of a log position, whether the cited chunk is
`unchanged`, `changed`, `superseded`, `removed`, `scrubbed`, `expired` or now
`filtered_by_snapshot_policy`.

- removed: the document was withdrawn or its source deleted;
- scrubbed / expired: the cited text is gone (erasure or governance scrub / retention);
- filtered_by_snapshot_policy: the receipt's own frozen policy denies the chunk (as it
  stands then) to the receipt's scopes;
- superseded: a newer version of the document still contains the cited snippet;
- changed: a newer version no longer contains it;
- unchanged: the cited chunk version is still the live one.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ledger.domain.timestamps import parse_timestamp
from ledger.policy.policy_rules import ChunkFacts, PolicyRules
from ledger.usecases.ports import ChunkVersion, WriteLookups
from ledger.writing.sealing import KeyDestroyed, Sealer

EntryStatus = Literal[
    "unchanged", "changed", "superseded", "removed", "scrubbed", "expired", "filtered_by_snapshot_policy"
]
STATUSES: tuple[EntryStatus, ...] = (
    "unchanged",
    "changed",
    "superseded",
    "removed",
    "scrubbed",
    "expired",
    "filtered_by_snapshot_policy",
)


@dataclass(frozen=True)
class EntryReport:
    status: EntryStatus
    current_chunk_id: str | None = None  # where the snippet is now (superseded)
    current_version_id: str | None = None
    rule_id: str | None = None  # the snapshot rule that filters it
    current_sensitivity: str | None = None  # of the version it is in now (superseded, changed)

    def view(self, entry: Mapping[str, Any], rank: int) -> dict[str, Any]:
        return {
            "rank": rank,
            "citation_id": entry["citation_id"],
            "document_id": entry["document_id"],
            "version_id": entry.get("version_id"),
            "chunk_id": entry["chunk_id"],
            "path": entry["path"],
            "status": self.status,
            "current_version_id": self.current_version_id,
            "current_chunk_id": self.current_chunk_id,
            "rule_id": self.rule_id,
        }


def _gone(chunk: ChunkVersion) -> EntryReport | None:
    if chunk.scrubbed_position is None:
        return None
    return EntryReport("expired" if chunk.scrub_reason == "retention_expired" else "scrubbed")


def _denying_rule(rules: PolicyRules, chunk: ChunkVersion, scopes: frozenset[str]) -> str | None:
    verdict = rules.judge(
        ChunkFacts(chunk.chunk_id, chunk.document_id, chunk.path, chunk.sensitivity), scopes
    )
    if not verdict.denied:
        return None
    return next((rule_id for rule_id, action in verdict.applied if action == "deny"), None)


def entry_report(
    *,
    tenant_id: str,
    entry: Mapping[str, Any],
    versions: list[ChunkVersion],
    rules: PolicyRules,
    scopes: frozenset[str],
    moment: dt.datetime,
    sealer: Sealer,
    keys_now: bool,
) -> EntryReport:
    """The fate of one receipt entry given every chunk version of its document as of a
    position (`moment` is that position's time; `keys_now` says the position is the
    current one, so a destroyed key counts too)."""
    # Chunk ids come from content: an unchanged section has the same id in several versions,
    # so the row cited is the one of the version the entry names.
    same_id = [v for v in versions if v.chunk_id == entry["chunk_id"]]
    cited = next((v for v in same_id if v.version_id == entry.get("version_id")), None) or next(
        iter(same_id), None
    )
    if cited is None:
        return EntryReport("removed")
    gone = _gone(cited)
    if gone is not None:
        return gone
    still_live = next((v for v in same_id if v.live_to is None), None)
    if cited.live_to is not None and still_live is not None:
        cited = still_live  # the same id is the same text: only other sections changed
    expires = entry.get("expires_at")
    if expires and parse_timestamp(expires) <= moment:
        return EntryReport("expired")
    snippet: str | None = None
    if keys_now:
        try:
            snippet = sealer.unseal(entry["snapshot"], tenant_id=tenant_id)
        except KeyDestroyed:
            return EntryReport("scrubbed")
    if cited.live_to is None:
        rule_id = _denying_rule(rules, cited, scopes)
        if rule_id is not None:
            return EntryReport("filtered_by_snapshot_policy", rule_id=rule_id)
        return EntryReport("unchanged")
    if cited.removed_reason != "superseded":
        return EntryReport("removed")
    live = [v for v in versions if v.live_to is None]
    if not live:  # superseded, and later removed
        return EntryReport("removed")
    rule_ids = [_denying_rule(rules, chunk, scopes) for chunk in live]
    if all(rule_ids):
        return EntryReport("filtered_by_snapshot_policy", rule_id=rule_ids[0])
    if snippet is None:
        try:
            snippet = sealer.unseal(entry["snapshot"], tenant_id=tenant_id)
        except KeyDestroyed:
            return EntryReport("scrubbed")
    for chunk, rule_id in zip(live, rule_ids, strict=True):
        if rule_id is not None or chunk.text is None:
            continue
        try:
            text = sealer.unseal(chunk.text, tenant_id=tenant_id)
        except KeyDestroyed:
            continue
        if snippet and snippet in text:
            return EntryReport(
                "superseded",
                current_chunk_id=chunk.chunk_id,
                current_version_id=chunk.version_id,
                current_sensitivity=chunk.sensitivity,
            )
    if any(chunk.scrubbed_position is not None for chunk in live):
        return EntryReport("scrubbed")
    return EntryReport(
        "changed", current_version_id=live[0].version_id, current_sensitivity=live[0].sensitivity
    )


def entry_reports(
    lookups: WriteLookups,
    sealer: Sealer,
    *,
    tenant_id: str,
    entries: Sequence[Mapping[str, Any]],
    position: int,
    rules: PolicyRules,
    scopes: frozenset[str],
    moment: dt.datetime,
    keys_now: bool,
) -> list[EntryReport]:
    by_document: dict[str, list[ChunkVersion]] = {}
    reports = []
    for entry in entries:
        document_id = str(entry["document_id"])
        if document_id not in by_document:
            by_document[document_id] = lookups.document_chunks(tenant_id, document_id, position)
        reports.append(
            entry_report(
                tenant_id=tenant_id,
                entry=entry,
                versions=by_document[document_id],
                rules=rules,
                scopes=scopes,
                moment=moment,
                sealer=sealer,
                keys_now=keys_now,
            )
        )
    return reports
