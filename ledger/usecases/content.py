"""Use case: sealed fields read in plain by an auditor (`audit.content`), every read recorded.

A receipt's query, its citations' snippets and heading paths, a document's title and
heading paths are sealed in the log. A caller holding `audit.content` may read them in
plain while their keys live; once a key is gone the field says why and since when
(`erased` / `expired`, `at`) instead of showing ciphertext. A restricted document's
fields still need `knowledge.restricted.read`. Every read is appended as one signed
`ContentRead` (ids and positions only, never text) *before* the text is returned: no
plain text leaves the ledger unrecorded.

Fields come back as `{"state": "plain", "text": ...}`, `{"state": "erased" | "expired",
"at": ..., "reason": ...}` or `{"state": "restricted", "required_scope": ...}`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from ledger.domain.entries import RecordedEvent
from ledger.domain.events import ContentRead
from ledger.domain.fields import MAX_CONTENT_READ
from ledger.domain.timestamps import ONE_DAY, format_timestamp, parse_timestamp
from ledger.usecases.context import Caller, UseCaseContext, record
from ledger.usecases.errors import AccessDenied, NotFound
from ledger.usecases.scopes import CONTENT_SCOPE, RESTRICTED_SCOPE
from ledger.writing.sealing import KeyDestroyed, SealBroken, parse_expiry_key_ref

Field = dict[str, Any]
# Types whose payload holds sealed fields an auditor reads.
CONTENT_TYPES = frozenset(
    {"RetrievalRecorded", "RetrievalContinued", "DocumentIngested", "DocumentContinued"}
)


def require_content_scope(caller: Caller) -> None:
    if CONTENT_SCOPE not in caller.scopes:
        raise AccessDenied(
            f"reading content in plain requires the {CONTENT_SCOPE} scope", reason="content_scope_required"
        )


def read_content(
    ctx: UseCaseContext, caller: Caller, events: Sequence[RecordedEvent]
) -> dict[int, dict[str, Any]]:
    """The plain content of the caller's tenant's `events` (by position; entries without
    sealed fields are left out), after recording the read. Raises AccessDenied without
    `audit.content`."""
    require_content_scope(caller)
    mine = [e for e in events if e.tenant_id == caller.tenant_id and e.type in CONTENT_TYPES]
    if not mine:
        return {}
    reader = _FieldReader(ctx, caller)
    contents = {event.position: reader.content_of(event) for event in mine}
    reads = []
    for start in range(0, len(mine), MAX_CONTENT_READ):
        part = mine[start : start + MAX_CONTENT_READ]
        reads.append(
            ContentRead(
                positions=[e.position for e in part],
                receipt_ids=[e.payload["receipt_id"] for e in part if e.type == "RetrievalRecorded"],
            )
        )
    record(ctx, caller, reads, lambda _events: {})
    return contents


def record_question_search(ctx: UseCaseContext, caller: Caller, found: Sequence[Any], words: int) -> None:
    """Record a question search (`q`) as a read before its page is returned: the receipts it
    found on the page (`found`: rows of the receipt index) and how many words it named."""
    require_content_scope(caller)
    read = ContentRead(
        positions=[view.position for view in found],
        receipt_ids=[view.receipt_id for view in found],
        searched_words=words,
    )
    record(ctx, caller, [read], lambda _events: {})


def read_citation_content(
    ctx: UseCaseContext, caller: Caller, receipt_id: str, citation_id: str
) -> dict[str, Any]:
    """One citation's snippet and heading path in plain (the read recorded with the citation's
    id alone, not its receipt's: only that entry was opened)."""
    require_content_scope(caller)
    event = ctx.lookups.receipt(caller.tenant_id, receipt_id)
    entries = (
        [e for e in event.payload["selected_entries"] if e["citation_id"] == citation_id] if event else []
    )
    if event is None or not entries:
        raise NotFound("citation")
    reader = _FieldReader(ctx, caller)
    [content] = reader.entries_content(entries)
    read = ContentRead(positions=[event.position], citation_ids=[citation_id])
    record(ctx, caller, [read], lambda _events: {})
    return content


class _FieldReader:
    """Opens sealed fields for one caller, telling apart live, erased and expired text."""

    def __init__(self, ctx: UseCaseContext, caller: Caller) -> None:
        self.ctx = ctx
        self.tenant = caller.tenant_id
        self.restricted_ok = RESTRICTED_SCOPE in caller.scopes
        self.now = ctx.clock()

    def content_of(self, event: RecordedEvent) -> dict[str, Any]:
        payload = event.payload
        if event.type == "RetrievalContinued":  # more citations of the receipt before it
            return {"citations": self.entries_content(payload["selected_entries"])}
        if event.type == "RetrievalRecorded":
            return {
                "query": self.field(payload["query"]),
                "citations": self.entries_content(payload["selected_entries"]),
            }
        sensitivity = payload["sensitivity"]
        return {
            "title": self.optional(payload.get("title"), sensitivity),
            "chunks": [
                {
                    "chunk_id": chunk["chunk_id"],
                    "heading_path": self.optional(chunk["locator"].get("heading_path"), sensitivity),
                }
                for chunk in payload["chunks"]
            ],
        }

    def entries_content(self, entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        headings = self._chunk_headings(entries)
        return [
            {
                "citation_id": entry["citation_id"],
                "snippet": self.field(entry["snapshot"], entry["sensitivity"]),
                "heading_path": self.optional(
                    entry["locator"].get("heading_path")
                    or headings.get((entry["document_id"], entry["chunk_id"])),
                    entry["sensitivity"],
                ),
            }
            for entry in entries
        ]

    def _chunk_headings(self, entries: Sequence[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
        """The sealed heading path of each cited chunk whose entry does not carry one (a
        posted retrieval's): the chunk's, the same in every version that holds its id."""
        refs = [(e["document_id"], e["chunk_id"]) for e in entries if not e["locator"].get("heading_path")]
        if not refs:
            return {}
        chunks = self.ctx.lookups.chunks(self.tenant, refs)
        return {ref: chunk.heading_path for ref, chunk in chunks.items() if chunk.heading_path is not None}

    def optional(self, sealed: dict[str, Any] | None, sensitivity: str = "internal") -> Field | None:
        return None if sealed is None else self.field(sealed, sensitivity)

    def field(self, sealed: dict[str, Any], sensitivity: str = "internal") -> Field:
        if sensitivity == "restricted" and not self.restricted_ok:
            return {"state": "restricted", "required_scope": RESTRICTED_SCOPE}
        refs = [sealed["key_ref"], *sealed.get("extra_key_refs", [])]
        gone = self._gone(refs)
        if gone is not None:
            return gone
        try:
            return {"state": "plain", "text": self.ctx.sealer.unseal(sealed, tenant_id=self.tenant)}
        except KeyDestroyed:
            # Destroyed between the check and the read.
            return self._gone(refs) or {"state": "erased", "at": None, "reason": None}
        except SealBroken:
            return {"state": "unreadable", "reason": "seal_broken"}

    def _gone(self, refs: Sequence[str]) -> Field | None:
        """The earliest reason the text is unreadable: a key destroyed (erasure, or the
        retention sweep) or an expiry day already over (before the sweep ran)."""
        facts: list[tuple[str, Field]] = []
        for ref, (destroyed_at, reason) in self.ctx.sealer.keys.destructions(refs).items():
            state = "expired" if reason == "retention_expired" or parse_expiry_key_ref(ref) else "erased"
            at = _expiry_moment(ref) if state == "expired" else None
            when = at or format_timestamp(parse_timestamp(destroyed_at), timespec="seconds")
            facts.append((when, {"state": state, "at": when, "reason": reason or None}))
        for ref in refs:
            moment = _expiry_moment(ref)
            if moment is not None and parse_timestamp(moment) <= self.now:
                facts.append((moment, {"state": "expired", "at": moment, "reason": "retention_expired"}))
        return min(facts, key=lambda fact: fact[0])[1] if facts else None


def _expiry_moment(ref: str) -> str | None:
    """When the values under an expiry key expire: the end of the key's day (UTC)."""
    parsed = parse_expiry_key_ref(ref)
    if parsed is None:
        return None
    day = dt.datetime.strptime(parsed[1], "%Y-%m-%d").replace(tzinfo=dt.UTC)
    return format_timestamp(day + ONE_DAY, timespec="seconds")
