"""Which payload model each event type has, and the one way a payload becomes signed JSON.

The schemas themselves are `ledger.domain.events`; this is the registry the writer and the
readers consult, and the encoding rule that keeps "absent" and "null" apart forever.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from ledger.domain.events import (
    AccessDenied,
    ContentRead,
    DocumentContinued,
    DocumentIngested,
    DocumentRemoved,
    IntegrityRepaired,
    LegalHoldPlaced,
    LegalHoldReleased,
    PolicyBundlePublished,
    ReplayRecorded,
    ReportIssued,
    RetentionScrubbed,
    RetrievalContinued,
    RetrievalRecorded,
    Schema,
    SigningKeyRotated,
    TokenIssued,
    TokenRevoked,
)
from ledger.tlog.canonical import canonical_json

PAYLOAD_MODELS: dict[str, type[Schema]] = {
    "DocumentIngested": DocumentIngested,
    "DocumentRemoved": DocumentRemoved,
    "PolicyBundlePublished": PolicyBundlePublished,
    "RetrievalRecorded": RetrievalRecorded,
    "RetentionScrubbed": RetentionScrubbed,
    "AccessDenied": AccessDenied,
    "ReplayRecorded": ReplayRecorded,
    "SigningKeyRotated": SigningKeyRotated,
    "LegalHoldPlaced": LegalHoldPlaced,
    "LegalHoldReleased": LegalHoldReleased,
    "IntegrityRepaired": IntegrityRepaired,
    "ContentRead": ContentRead,
    "TokenIssued": TokenIssued,
    "TokenRevoked": TokenRevoked,
    "DocumentContinued": DocumentContinued,
    "RetrievalContinued": RetrievalContinued,
    "ReportIssued": ReportIssued,
}
EventType = Literal[
    "DocumentIngested",
    "DocumentRemoved",
    "PolicyBundlePublished",
    "RetrievalRecorded",
    "RetentionScrubbed",
    "AccessDenied",
    "ReplayRecorded",
    "SigningKeyRotated",
    "LegalHoldPlaced",
    "LegalHoldReleased",
    "IntegrityRepaired",
    "ContentRead",
    "TokenIssued",
    "TokenRevoked",
    "DocumentContinued",
    "RetrievalContinued",
    "ReportIssued",
]
# Fields that are left out of the signed JSON when unset, so "absent" and
# "explicitly null" stay distinguishable forever.
OMIT_WHEN_NONE = frozenset(
    {"policy_snapshot", "search", "withheld", "sensitivity_origin", "retention_origin", "parts"}
    | {"unverifiable"}  # receipts of external engines (OTLP spans) may report unverifiable documents
    | {"searched_words"}  # ContentRead of a question search (schema version 4)
)
# The same inside each selected entry: fields added later, so older entries keep their bytes.
ENTRY_OMIT_WHEN_NONE = frozenset({"source", "score"})


class EventRejected(ValueError):
    """An event refused before anything was written; `field` names the culprit."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def payload_to_json(event_type: str, payload: Schema | dict[str, Any]) -> dict[str, Any]:
    """Validate a payload for `event_type` and return its JSON form.

    Raises EventRejected naming the first offending field.
    """
    model = PAYLOAD_MODELS.get(event_type)
    if model is None:
        raise EventRejected("type", f"unknown event type {event_type!r}")
    try:
        if isinstance(payload, Schema):
            if not isinstance(payload, model):
                raise EventRejected("payload", f"expected {model.__name__}, got {type(payload).__name__}")
            parsed = payload
        else:
            parsed = model.model_validate(payload, strict=False)
    except ValidationError as exc:
        first = exc.errors()[0]
        location = ".".join(str(part) for part in first["loc"])
        raise EventRejected(f"payload.{location}" if location else "payload", first["msg"]) from None
    dumped = parsed.model_dump(mode="json")
    for key in OMIT_WHEN_NONE:
        if key in dumped and dumped[key] is None:
            del dumped[key]
    search = dumped.get("search") if event_type == "RetrievalRecorded" else None
    if isinstance(search, dict) and search.get("root_sources", 0) is None:
        del search["root_sources"]
    with_entries = event_type in ("RetrievalRecorded", "RetrievalContinued")
    for entry in dumped.get("selected_entries", ()) if with_entries else ():
        for key in ENTRY_OMIT_WHEN_NONE:
            if entry.get(key, 0) is None:
                del entry[key]
    return dumped


# A payload's JSON form and its canonical bytes: what the entry signs and stores.
EncodedPayload = tuple[dict[str, Any], bytes]


def encode_payload(event_type: str, payload: Schema | dict[str, Any]) -> EncodedPayload:
    """`payload_to_json` and its canonical bytes, computed once for the size check, the
    signature and the stored entry alike."""
    dumped = payload_to_json(event_type, payload)
    return dumped, canonical_json(dumped, checked=False)


@dataclass(frozen=True)
class PlainPayload:
    """A payload given as its JSON form (what `payload_to_json` would return), built by a use
    case from values its request model and the ledger's own records already checked: the hot
    write path encodes it once, with no model built or dumped. `model()` is the same payload
    validated, for the paths that need one (a receipt split over several entries, a single
    write); `tests/test_plain_receipt.py` holds both encodings equal."""

    event_type: str
    json: dict[str, Any]

    def model(self) -> Schema:
        return PAYLOAD_MODELS[self.event_type].model_validate(self.json)
