"""Retention windows and crypto-shredding on the write side.

Text in the log is sealed (see `ledger.writing.sealing`); "deleting" it means
destroying data keys and recording that as a signed `RetentionScrubbed`
entry. Keys are destroyed *first* (the erasure must not wait on anything),
then the entry is appended and the key rows are marked with its position; a
crash in between leaves destroyed-but-unrecorded keys that `record_pending`
(run by every retention pass) records. Signatures and Merkle proofs keep
verifying: they cover ciphertext and salted commitments only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache

from ledger.domain import timestamps
from ledger.domain.entries import EventDraft, RecordedEvent
from ledger.domain.fields import MAX_RETENTION_DAYS, ScrubReason
from ledger.domain.scrub_parts import scrub_payloads
from ledger.domain.timestamps import ONE_DAY, end_of_utc_day, utc_day
from ledger.writing.application import Ledger
from ledger.writing.sealing import expiry_key_ref, parse_expiry_key_ref

DEFAULT_FLOOR_DAYS = 180  # EU AI Act Art. 19: logs of high-risk systems kept at least six months
MAX_REFS_PER_ENTRY = 10_000


@dataclass(frozen=True)
class RetentionRules:
    """Per tenant. Routine retention never scrubs anything younger than the floor."""

    floor_days: int = DEFAULT_FLOOR_DAYS
    default_days: int = 365

    def __post_init__(self) -> None:
        if not 1 <= self.floor_days <= MAX_RETENTION_DAYS or not 1 <= self.default_days <= MAX_RETENTION_DAYS:
            raise ValueError(f"retention days must be between 1 and {MAX_RETENTION_DAYS}")

    def expires_at(self, recorded_at: datetime, document_retention_days: int | None) -> datetime:
        """When a citation recorded at `recorded_at` expires.

        Rounded *up* to the next UTC midnight: every citation of one day shares an
        expiry key, destroyed as soon as that day is over, and no citation is
        ever scrubbed before its window (or the floor) has run out.
        """
        days = max(document_retention_days or self.default_days, self.floor_days)
        if recorded_at.tzinfo is UTC:  # the clock's: only its day matters, computed once per (day, window)
            return _end_of_day_after(recorded_at.date(), days)
        return end_of_utc_day(recorded_at + timedelta(days=days))


@lru_cache(maxsize=4096)
def _end_of_day_after(day: date, days: int) -> datetime:
    """`end_of_utc_day` of any moment of UTC `day` plus `days`: a batch's citations share a few."""
    return end_of_utc_day(datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=days))


# Both are pure, and a batch asks them for the same few expiry days again and again.
@lru_cache(maxsize=4096)
def expiry_key_for(tenant_id: str, expires_at: datetime, scope: str) -> str:
    """The expiry bucket key of `scope`'s values that expire at `expires_at` (a UTC midnight)."""
    return expiry_key_ref(tenant_id, utc_day(expires_at - ONE_DAY), scope)


@lru_cache(maxsize=1024)
def format_timestamp(moment: datetime) -> str:
    """An expiry as the log writes it: to the second (expiries are UTC midnights)."""
    return timestamps.format_timestamp(moment, timespec="seconds")


def shred(
    ledger: Ledger,
    *,
    tenant_id: str,
    key_refs: Sequence[str],
    reason: ScrubReason,
    actor: str,
    document_ids: Sequence[str] = (),
    citation_ids: Sequence[str] = (),
    run_id: str | None = None,
    trace_id: str | None = None,
) -> RecordedEvent | None:
    """Destroy `key_refs` and record it. Idempotent: refs already destroyed and
    recorded are skipped; returns None when there was nothing left to do."""
    refs = list(dict.fromkeys(key_refs))
    if len(refs) > MAX_REFS_PER_ENTRY:
        raise ValueError(f"at most {MAX_REFS_PER_ENTRY} key refs per scrub")
    for ref in refs:
        if not ref.split("/")[1:2] == [tenant_id]:
            raise ValueError(f"key_refs: {ref!r} does not belong to tenant {tenant_id!r}")
    for ref in refs:
        ledger.data_keys.destroy(ref, tenant_id, reason)
    ledger.data_keys.purge_residue()
    pending = {ref for ref, _, _ in ledger.data_keys.unrecorded_destructions(tenant_id)}
    to_record = [ref for ref in refs if ref in pending]
    if not to_record:
        return None
    # Several entries when the ids do not fit one (`ledger.domain.scrub_parts`), in one transaction.
    events = ledger.append_batch(
        [
            EventDraft.of(payload, tenant_id=tenant_id, actor=actor, run_id=run_id, trace_id=trace_id)
            for payload in scrub_payloads(reason, to_record, document_ids, citation_ids)
        ],
        tenant_id=tenant_id,
    )
    for event in events:
        if event.payload["key_refs"]:
            ledger.data_keys.mark_recorded(event.payload["key_refs"], event.position)
    return events[0]


def record_pending(ledger: Ledger, *, actor: str) -> list[RecordedEvent]:
    """Record destructions a crash left unrecorded (one entry per tenant and reason)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for ref, tenant_id, reason in ledger.data_keys.unrecorded_destructions():
        groups.setdefault((tenant_id, reason), []).append(ref)
    recorded = []
    for (tenant_id, reason), refs in sorted(groups.items()):
        events = ledger.append_batch(
            [
                EventDraft.of(payload, tenant_id=tenant_id, actor=actor)
                for payload in scrub_payloads(reason, refs[:MAX_REFS_PER_ENTRY])  # type: ignore[arg-type]
            ],
            tenant_id=tenant_id,
        )
        for event in events:
            ledger.data_keys.mark_recorded(event.payload["key_refs"], event.position)
        recorded.extend(events)
    return recorded


def run_retention(
    ledger: Ledger,
    *,
    tenant_id: str,
    now: datetime,
    held_scopes: frozenset[str] = frozenset(),
    actor: str = "retention",
) -> RecordedEvent | None:
    """Destroy every expiry bucket of the tenant whose day is over, except
    buckets whose scope is under a legal hold. Idempotent; records leftovers
    of an interrupted earlier run first."""
    record_pending(ledger, actor=actor)
    today = utc_day(now)
    prefix = f"expiry/{tenant_id}/"
    expired = []
    for ref in ledger.data_keys.live_refs(tenant_id, prefix, prefix + today):
        parsed = parse_expiry_key_ref(ref)
        if parsed is not None and parsed[1] < today and parsed[2] not in held_scopes:
            expired.append(ref)
    if not expired:
        return None
    return shred(ledger, tenant_id=tenant_id, key_refs=expired, reason="retention_expired", actor=actor)
