"""Verification of the split form (`ledger.domain.document_parts`, `ledger.domain.receipt_parts`): a head
naming `parts` is followed, at the next positions, by exactly its continuations in order,
and no continuation appears anywhere else. Entries are signed, so only a faulty writer or
the signing key's holder could break this; `verify` names the position if one did."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ledger.domain.events import CONTINUATION_OF

_KEY = {"DocumentIngested": "version_id", "RetrievalRecorded": "receipt_id"}


@dataclass
class PartsTracker:
    """What the next entry must be: part `next_part` of the head (type, tenant, id) until
    `last_part`; nothing expected when `head` is None."""

    head: tuple[str, str, Any] | None = None
    next_part: int = 0
    last_part: int = 0

    def copy(self) -> PartsTracker:
        return PartsTracker(self.head, self.next_part, self.last_part)

    def see(self, envelope: dict[str, Any]) -> str | None:
        """The problem with this entry as the next one, or None."""
        kind = str(envelope.get("type"))
        payload = envelope.get("payload")
        payload = payload if isinstance(payload, dict) else {}
        if self.head is not None:
            head_type, tenant, key = self.head
            if (
                CONTINUATION_OF.get(kind) != head_type
                or envelope.get("tenant_id") != tenant
                or payload.get(_KEY[head_type]) != key
                or payload.get("part") != self.next_part
            ):
                return f"part {self.next_part} of the {head_type} before it is missing here"
            self.next_part += 1
            if self.next_part > self.last_part:
                self.head = None
            return None
        if kind in CONTINUATION_OF:
            return f"{kind} without the head it continues"
        parts = payload.get("parts")
        if kind in _KEY and isinstance(parts, int) and parts > 1:
            self.head = (kind, str(envelope.get("tenant_id")), payload.get(_KEY[kind]))
            self.next_part, self.last_part = 2, parts
        return None
