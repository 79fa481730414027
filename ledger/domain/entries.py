"""Signed log entries: building an envelope from a draft, and reading one back.

An entry's bytes are the RFC 8785 canonical JSON of its envelope, signature
included; those exact bytes are what the store keeps and what the Merkle
tree hashes as the leaf. The signature covers the same JSON without the
`signature` member. Each envelope commits to its predecessor's leaf hash
(`prev_hash`), so a deleted row is told apart from a storage-level id gap.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import ValidationError

from ledger.domain.entry_limit import check_size, envelope_bytes
from ledger.domain.events import CONTINUATION_OF, CONTINUED_LISTS, Schema
from ledger.domain.fields import MAX_ENVELOPE_BYTES, SYSTEM_TENANT, EnvelopeTenantId, Identifier, TenantId
from ledger.domain.payloads import PAYLOAD_MODELS, EncodedPayload, EventRejected, PlainPayload, encode_payload
from ledger.domain.timestamps import utc_now
from ledger.tlog.canonical import canonical_json
from ledger.tlog.merkle import leaf_hash
from ledger.tlog.signing import SigningKey

# The topic each stored entry carries (prefix + event type); verification checks it, so it lives
# with the entry format rather than with the store that writes it.
EVENT_TOPIC_PREFIX = "citeledger:event:"
GENESIS_PREV_HASH = "0" * 64


class _DraftHeader(Schema):
    tenant_id: EnvelopeTenantId
    actor: Identifier
    run_id: Identifier | None
    trace_id: Identifier | None


class _UserTenant(Schema):
    tenant_id: TenantId


@dataclass(frozen=True)
class EventDraft:
    """An event as a caller asks for it; position, time and signature come at append.

    Built with `EventDraft.of(payload, ...)` (callers: `ledger.usecases.context.draft`),
    never by hand: an event's type is its payload's class."""

    type: str
    tenant_id: str
    actor: str
    payload: Schema | dict[str, Any]
    run_id: str | None = None
    trace_id: str | None = None
    # 128 random bits as uuid4().hex spells them, without building a UUID (a hot path).
    event_id: str = field(default_factory=lambda: os.urandom(16).hex())
    # The payload's `encode_payload`, where building the draft made it already (a receipt
    # measured for its split): `prepare` signs these bytes instead of encoding it again.
    encoded: EncodedPayload | None = field(default=None, compare=False, repr=False)

    def size_bound(self, payload_bytes: int) -> int:
        """An upper bound of the signed entry's size with a payload of `payload_bytes`."""
        return envelope_bytes(
            payload_bytes,
            event_id=self.event_id,
            event_type=self.type,
            tenant_id=self.tenant_id,
            actor=self.actor,
            run_id=self.run_id,
            trace_id=self.trace_id,
        )

    @classmethod
    def of(
        cls,
        payload: Schema | PlainPayload,
        *,
        tenant_id: str,
        actor: str,
        run_id: str | None = None,
        trace_id: str | None = None,
        encoded: EncodedPayload | None = None,
    ) -> EventDraft:
        """The one way to build a draft: its type is its payload's class
        (`ledger.usecases.context.draft` for a caller, the ledger's own key entries).
        `encoded`: `encode_payload(type, payload)` when the caller made it already."""
        value: Schema | dict[str, Any] = payload.json if isinstance(payload, PlainPayload) else payload
        # A JSON form (`PlainPayload`) names its type; a model is its class.
        event_type = payload.event_type if isinstance(payload, PlainPayload) else type(payload).__name__
        model = PAYLOAD_MODELS.get(event_type)
        if model is None or not (isinstance(payload, PlainPayload) or type(payload) is model):
            raise TypeError(f"{event_type} is not an event payload")
        return cls(
            type=event_type,
            tenant_id=tenant_id,
            actor=actor,
            payload=value,
            run_id=run_id,
            trace_id=trace_id,
            encoded=encoded,
        )


@dataclass(frozen=True)
class PreparedDraft:
    """A validated draft whose payload is already canonical JSON bytes (and, from `prepare`,
    the JSON form they encode, which the signed entry's envelope reads without parsing)."""

    draft: EventDraft
    payload_json: bytes
    payload: dict[str, Any] | None = None


# Token entries too: only the token commands write them (`api.token_admin`), never a use case.
_SYSTEM_ONLY = frozenset({"SigningKeyRotated", "IntegrityRepaired", "TokenIssued", "TokenRevoked"})


@lru_cache(maxsize=4096)
def _check_header(tenant_id: str, actor: str, run_id: str | None, trace_id: str | None, system: bool) -> None:
    """Raise EventRejected naming the field; a header once found valid is not parsed again
    (a batch's drafts share their caller's)."""
    try:
        _DraftHeader(tenant_id=tenant_id, actor=actor, run_id=run_id, trace_id=trace_id)
        if not system:
            _UserTenant(tenant_id=tenant_id)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise EventRejected(str(first["loc"][0]), first["msg"]) from None


def prepare(draft: EventDraft, *, system: bool = False) -> PreparedDraft:
    """Validate everything that does not depend on the log position. The payload is encoded
    here unless the draft carries its encoding already (`EventDraft.encoded`: a receipt
    measured for its split).

    Raises EventRejected naming the field; nothing has been written.
    """
    _check_header(draft.tenant_id, draft.actor, draft.run_id, draft.trace_id, system)
    if draft.type in _SYSTEM_ONLY and not system:
        raise EventRejected("type", f"{draft.type} is written only by the ledger itself")
    payload, payload_json = draft.encoded or encode_payload(draft.type, draft.payload)
    if len(payload_json) > MAX_ENVELOPE_BYTES - 2048:
        raise EventRejected("payload", f"event larger than the {MAX_ENVELOPE_BYTES} byte limit")
    check_size(draft.size_bound(len(payload_json)))
    return PreparedDraft(draft=draft, payload_json=payload_json, payload=payload)


def _header(
    prepared: PreparedDraft, position: int, prev_hash: str, kid: str, recorded_at: str
) -> dict[str, Any]:
    draft = prepared.draft
    return {
        "v": 1,
        "event_id": draft.event_id,
        "type": draft.type,
        "tenant_id": draft.tenant_id,
        "position": position,
        "prev_hash": prev_hash,
        "recorded_at": recorded_at,
        "actor": draft.actor,
        "run_id": draft.run_id,
        "trace_id": draft.trace_id,
        "payload": orjson.Fragment(prepared.payload_json),
        "kid": kid,
    }


def _signed(header: dict[str, Any], key: SigningKey) -> bytes:
    signing_input = orjson.dumps(header, option=orjson.OPT_SORT_KEYS)
    header["signature"] = key.sign(signing_input)
    entry = orjson.dumps(header, option=orjson.OPT_SORT_KEYS)
    check_size(len(entry))  # the last word before any write: no entry over the bound, ever
    return entry


def sign_entry(
    prepared: PreparedDraft, *, position: int, prev_hash: str, key: SigningKey, recorded_at: str
) -> bytes:
    """Sign a prepared draft at `position`; returns the entry bytes."""
    return _signed(_header(prepared, position, prev_hash, key.kid, recorded_at), key)


def sign_event(
    prepared: PreparedDraft, *, position: int, prev_hash: str, key: SigningKey, recorded_at: str
) -> RecordedEvent:
    """`sign_entry` as the recorded event, its envelope the one the signer built (the
    payload's JSON form in place of its bytes): equal to parsing the entry, without the parse."""
    header = _header(prepared, position, prev_hash, key.kid, recorded_at)
    event = RecordedEvent(position=position, entry=_signed(header, key))
    if prepared.payload is not None:
        header["payload"] = prepared.payload
        event.__dict__["envelope"] = header  # the cached_property's slot
    return event


def signing_input_of(envelope: Mapping[str, Any]) -> bytes:
    """What an entry's signature covers: the canonical JSON of its envelope without `signature`."""
    unsigned = {k: v for k, v in envelope.items() if k != "signature"}
    return canonical_json(unsigned)


_SIGNATURE_MEMBER = b',"signature":"'
_SIGNATURE_B64_CHARS = 88  # an Ed25519 signature, base64


def entry_signature_ok(entry: bytes | Mapping[str, Any], public_key: bytes | Ed25519PublicKey) -> bool:
    """Does `public_key` sign this entry (its bytes, or its envelope)?

    Checks the signature over the entry's own bytes minus the signature member,
    without re-encoding: keys are sorted, so that member sits between `run_id`
    and `tenant_id`, and cutting it out leaves exactly `signing_input_of`
    (proven equal in tests/test_ledger.py). An envelope is encoded once first.
    """
    if not isinstance(entry, bytes):
        try:
            entry = canonical_json(entry)
        except ValueError:
            return False
    at = entry.rfind(_SIGNATURE_MEMBER)
    if at < 0:
        return False
    start = at + len(_SIGNATURE_MEMBER)
    end = start + _SIGNATURE_B64_CHARS
    if entry[end : end + 1] != b'"':
        return False
    try:
        if isinstance(public_key, bytes):
            public_key = Ed25519PublicKey.from_public_bytes(public_key)
        public_key.verify(base64.b64decode(entry[start:end], validate=True), entry[:at] + entry[end + 1 :])
    except (InvalidSignature, ValueError):
        return False
    return True


class _EnvelopeText:
    """A string member of a recorded entry's envelope, read like a cached property of the
    same name (the entry never changes; later reads are plain attribute lookups)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, event: RecordedEvent, owner: type | None = None) -> str:
        value = event.__dict__[self.name] = str(event.envelope[self.name])
        return value


@dataclass(frozen=True)
class RecordedEvent:
    """One committed, signed entry of the log; with `continuations` (`with_continuations`),
    a head whose `payload` reads as the whole document version or receipt."""

    position: int
    entry: bytes
    continuations: tuple[RecordedEvent, ...] = ()

    @cached_property
    def envelope(self) -> dict[str, Any]:
        value: dict[str, Any] = orjson.loads(self.entry)
        return value

    @cached_property
    def leaf_hash(self) -> bytes:
        return leaf_hash(self.entry)

    # The envelope's string members, read as they are signed.
    type = _EnvelopeText()
    tenant_id = _EnvelopeText()
    event_id = _EnvelopeText()
    kid = _EnvelopeText()
    signature = _EnvelopeText()

    @property
    def payload(self) -> dict[str, Any]:
        if self.continuations:
            return self._merged_payload
        payload: dict[str, Any] = self.envelope["payload"]
        return payload

    @cached_property
    def _merged_payload(self) -> dict[str, Any]:
        merged = dict(self.envelope["payload"])
        for part in self.continuations:
            for name in CONTINUED_LISTS:
                if name in part.envelope["payload"]:
                    merged[name] = [*merged.get(name, []), *part.envelope["payload"][name]]
        return merged

    @property
    def parts(self) -> int:
        """How many entries this head's document version or receipt takes (1: itself)."""
        return int(self.envelope["payload"].get("parts") or 1) if self.type in HEAD_TYPES else 1


HEAD_TYPES = frozenset(CONTINUATION_OF.values())


class BrokenContinuation(ValueError):
    """The entries after a head are not its continuations (a damaged or forged store)."""


def with_continuations(
    event: RecordedEvent, read: Callable[[int, int], Iterable[RecordedEvent]]
) -> RecordedEvent:
    """`event` with the continuation entries it names attached (`read(first, last)` reads
    log positions); the event itself when it takes one entry."""
    parts = event.parts
    if parts == 1:
        return event
    following = list(read(event.position + 1, event.position + parts - 1))
    key = "receipt_id" if event.type == "RetrievalRecorded" else "version_id"
    for part, continued in enumerate(following, start=2):
        if (
            CONTINUATION_OF.get(continued.type) != event.type
            or continued.tenant_id != event.tenant_id
            or continued.envelope["payload"].get(key) != event.envelope["payload"][key]
            or continued.envelope["payload"].get("part") != part
        ):
            raise BrokenContinuation(f"position {continued.position} is not part {part} of {event.position}")
    if len(following) != parts - 1:
        raise BrokenContinuation(f"the entry at {event.position} names {parts} parts; the log holds fewer")
    return RecordedEvent(event.position, event.entry, tuple(following))


__all__ = [
    "GENESIS_PREV_HASH",
    "SYSTEM_TENANT",
    "EventDraft",
    "PreparedDraft",
    "RecordedEvent",
    "entry_signature_ok",
    "prepare",
    "sign_entry",
    "sign_event",
    "signing_input_of",
    "utc_now",
    "with_continuations",
]
