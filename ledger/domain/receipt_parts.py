"""One receipt as log entries that each fit the entry bound (`ledger.domain.entry_limit`): a
`RetrievalRecorded` head with every scalar field and as many selected entries (then
filters) as fit, and `RetrievalContinued` entries carrying the rest in order, written at
the positions right after it in the same commit. A receipt that fits one entry is written
exactly as before (no `parts`). `context_hash` is computed over the whole receipt first, so
replay and verification see one receipt whatever its entries."""

from __future__ import annotations

from ledger.domain.document_parts import PAYLOAD_BUDGET, ItemTooLarge, pack
from ledger.domain.entry_limit import EntryTooLarge
from ledger.domain.events import FilterApplied, RetrievalContinued, RetrievalRecorded, Schema, SelectedEntry
from ledger.domain.fields import MAX_FILTERS_APPLIED, MAX_SELECTED_ENTRIES
from ledger.domain.payloads import EncodedPayload, PlainPayload, encode_payload, payload_to_json
from ledger.tlog.canonical import canonical_json

_MOST_PARTS = MAX_SELECTED_ENTRIES + MAX_FILTERS_APPLIED


def _size(payload: Schema) -> int:
    return len(canonical_json(payload_to_json(type(payload).__name__, payload), checked=False))


def split_receipt(receipt: RetrievalRecorded) -> list[RetrievalRecorded | RetrievalContinued]:
    return [part for part, _ in _split(receipt)]


def _split(
    receipt: RetrievalRecorded,
) -> list[tuple[RetrievalRecorded | RetrievalContinued, EncodedPayload | None]]:
    """The receipt's entries, each with its encoding when measuring it already made it (a
    receipt that fits one entry: the encoding that is signed and stored)."""
    encoded = encode_payload(type(receipt).__name__, receipt)
    whole = len(encoded[1])
    if whole <= PAYLOAD_BUDGET:
        return [(receipt, encoded)]
    entries, filters = receipt.selected_entries, receipt.filters_applied
    items: list[Schema] = [*entries, *filters]
    sizes = [len(canonical_json(item.model_dump(mode="json"), checked=False)) for item in items]
    empty: dict[str, list[object]] = {"selected_entries": [], "filters_applied": []}
    head_room = PAYLOAD_BUDGET - _size(receipt.model_copy(update={**empty, "parts": _MOST_PARTS}))
    continuation = RetrievalContinued.model_construct(
        receipt_id=receipt.receipt_id, part=_MOST_PARTS, selected_entries=[], filters_applied=[]
    )
    room = PAYLOAD_BUDGET - _size(continuation)
    try:
        counts = pack(sizes, head_room, room)
    except ItemTooLarge:
        raise EntryTooLarge(whole) from None  # the receipt's fixed fields alone are too large
    groups: list[list[Schema]] = []
    start = 0
    for count in counts:
        groups.append(items[start : start + count])
        start += count

    def lists(group: list[Schema]) -> dict[str, list[Schema]]:
        return {
            "selected_entries": [item for item in group if isinstance(item, SelectedEntry)],
            "filters_applied": [item for item in group if isinstance(item, FilterApplied)],
        }

    head = receipt.model_copy(update={**lists(groups[0]), "parts": len(groups)})
    return [
        (head, None),
        *(
            (RetrievalContinued(receipt_id=receipt.receipt_id, part=part, **lists(group)), None)  # type: ignore[arg-type]
            for part, group in enumerate(groups[1:], start=2)
        ),
    ]


def entry_parts(payload: Schema) -> list[Schema]:
    """The entries one payload is written as (a receipt may take several)."""
    return [part for part, _ in _split(payload)] if isinstance(payload, RetrievalRecorded) else [payload]


def encoded_parts(
    payload: Schema | PlainPayload,
) -> list[tuple[Schema | PlainPayload, EncodedPayload | None]]:
    """`entry_parts`, each with its encoding where splitting already made it (None: not yet).
    A plain payload that fits one entry is encoded as it is; one that does not is split as
    its model is."""
    if isinstance(payload, PlainPayload):
        encoded = canonical_json(payload.json, checked=False)  # values checked where they were built
        if len(encoded) <= PAYLOAD_BUDGET:
            return [(payload, (payload.json, encoded))]
        payload = payload.model()
    if isinstance(payload, RetrievalRecorded):
        return list(_split(payload))
    return [(payload, None)]
