"""Edited sections in a replay diff: a chunk the receipt cited that is gone, and a chunk of
the same document cited in its place, shown as the changed lines (a short unified diff of
the two sealed chunk texts) instead of only two chunk ids.

The text is shown only to a caller who may read both chunks (`ledger.usecases.visibility`),
only when no policy redacted either, and only while both texts exist (erased or expired
text is not diffed): otherwise `diff_withheld` says why. The diff is cut to
`MAX_DIFF_LINES` lines of at most `MAX_LINE_CHARS` characters each.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ledger.usecases.context import UseCaseContext
from ledger.usecases.ports import ChunkVersion
from ledger.usecases.visibility import may_see
from ledger.writing.sealing import KeyDestroyed, SealBroken

MAX_EDITS = 20
MAX_DIFF_LINES = 40
MAX_LINE_CHARS = 300
CONTEXT_LINES = 1


def _pairs(envelope: Mapping[str, Any]) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """(removed, added) entries of one document, in rank order, paired one to one."""
    entries = envelope["selected_entries"]
    added: dict[str, list[Mapping[str, Any]]] = {}
    for entry in entries["added"]:
        added.setdefault(str(entry["document_id"]), []).append(entry)
    pairs = []
    for old in entries["removed"]:
        candidates = added.get(str(old["document_id"]))
        if candidates:
            pairs.append((old, candidates.pop(0)))
    return pairs[:MAX_EDITS]


def unified_diff(old: str, new: str) -> list[str]:
    lines = list(
        difflib.unified_diff(
            old.splitlines(), new.splitlines(), "recorded", "now", lineterm="", n=CONTEXT_LINES
        )
    )
    cut = [line[:MAX_LINE_CHARS] for line in lines[:MAX_DIFF_LINES]]
    if len(lines) > MAX_DIFF_LINES:
        cut.append(f"... {len(lines) - MAX_DIFF_LINES} more lines")
    return cut


def edited_sections(
    ctx: UseCaseContext,
    tenant_id: str,
    scopes: Collection[str],
    envelope: Mapping[str, Any],
    position: int,
    redacted: Collection[str] = (),
) -> list[dict[str, Any]]:
    """The edited sections of a diff envelope whose replay ran at `position` (`redacted`:
    chunk ids a policy redacted in either answer: their text is not shown either)."""
    out: list[dict[str, Any]] = []
    versions: dict[str, dict[str, ChunkVersion]] = {}
    for old, new in _pairs(envelope):
        document_id = str(old["document_id"])
        if document_id not in versions:
            versions[document_id] = {
                v.chunk_id: v for v in ctx.lookups.document_chunks(tenant_id, document_id, position)
            }
        item: dict[str, Any] = {
            "document_id": document_id,
            "path": new["path"],
            "old_chunk_id": old["chunk_id"],
            "new_chunk_id": new["chunk_id"],
            "old_rank": old["rank"],
            "new_rank": new["rank"],
            "diff": None,
            "diff_withheld": None,
        }
        before, after = versions[document_id].get(old["chunk_id"]), versions[document_id].get(new["chunk_id"])
        if old["chunk_id"] in redacted or new["chunk_id"] in redacted:
            item["diff_withheld"] = "redacted"
        else:
            item["diff"], item["diff_withheld"] = _diff(ctx, tenant_id, scopes, before, after)
        out.append(item)
    return out


def _diff(
    ctx: UseCaseContext,
    tenant_id: str,
    scopes: Collection[str],
    before: ChunkVersion | None,
    after: ChunkVersion | None,
) -> tuple[list[str] | None, str | None]:
    if before is None or after is None:
        return None, "chunk_not_found"
    if not (may_see(scopes, before.sensitivity) and may_see(scopes, after.sensitivity)):
        return None, "restricted_scope_required"
    if before.text is None or after.text is None:
        return None, "erased"
    try:
        texts: Sequence[str] = [ctx.sealer.unseal(v.text, tenant_id=tenant_id) for v in (before, after)]  # type: ignore[arg-type]
    except (KeyDestroyed, SealBroken):
        return None, "erased"
    return unified_diff(texts[0], texts[1]), None
