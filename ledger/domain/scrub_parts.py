"""A scrub record (`RetentionScrubbed`) as entries that each fit the entry bound
(`ledger.domain.entry_limit`): its key refs, document ids and citation ids packed in order. Each
part is a scrub of its own (read models scrub by what an entry names), so no head is
needed; they are appended in one transaction."""

from __future__ import annotations

from collections.abc import Sequence

from ledger.domain.document_parts import PAYLOAD_BUDGET
from ledger.domain.events import RetentionScrubbed
from ledger.domain.fields import ScrubReason

_FIXED_ROOM = 256  # the reason and the three list names, brackets and braces
_LISTS = ("key_refs", "document_ids", "citation_ids")


def scrub_payloads(
    reason: ScrubReason,
    key_refs: Sequence[str],
    document_ids: Sequence[str] = (),
    citation_ids: Sequence[str] = (),
) -> list[RetentionScrubbed]:
    """One payload when everything fits, else several; ids are ASCII (their patterns), so
    an id takes its length plus its quotes and a comma."""
    parts: list[dict[str, list[str]]] = [{name: [] for name in _LISTS}]
    used = 0
    for name, values in zip(_LISTS, (key_refs, document_ids, citation_ids), strict=True):
        for value in values:
            cost = len(value) + 3
            if used + cost > PAYLOAD_BUDGET - _FIXED_ROOM:
                parts.append({n: [] for n in _LISTS})
                used = 0
            parts[-1][name].append(value)
            used += cost
    return [RetentionScrubbed(reason=reason, **part) for part in parts]
