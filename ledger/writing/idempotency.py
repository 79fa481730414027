"""Idempotency records: the answer a write gave, stored atomically with its entries.

A write that carries an idempotency key (tenant, key, fingerprint of the
request) is committed together with one row holding the answer it produced,
in the same transaction as its log entries. So after any crash a retry with
the same key either finds the row (the entries exist: answer it again,
`dedup: true`) or does not (nothing was written: run it again) — there is no
"pending" state to wait out, and no entry is ever written twice.

The stored copy holds no text a data key protects. A use case marks such parts
of its answer `Protected` (a query, a snippet, a heading path, the query's
terms): the answer it returns shows them in plain, the row holds them sealed
(the entry's own sealed value, or one under the same keys), and a retry opens
them again. Once a key is shredded a retry still gets the answer (`dedup:
true`) with those parts withheld and named under `withheld` with the reason,
never the old text.

Neither does the record's fingerprint of the request, when the request quotes such text
(a query, snippets, a document): it is kept as a MAC under the data keys of that text
(`bound`), so once one is shredded it confirms no guess of the request, and a retry with
the key is refused (409 `idempotency_key_erased`) instead of being matched blindly.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ledger.domain.entries import RecordedEvent
from ledger.domain.events import Sealed
from ledger.schemas.requests import KEY_PATTERN as KEY_PATTERN  # re-exported for api.routes.common
from ledger.storage import adapters
from ledger.storage.adapters import IdempotencyRecord, IdempotencyRow
from ledger.storage.store import Store
from ledger.writing.sealing import KeyDestroyed, SealBroken, Sealer

IDEMPOTENCY_TABLE = adapters.IDEMPOTENCY_TABLE

Answer = tuple[int, dict[str, Any]]  # (status, body)


class IdempotencyKeyReused(ValueError):
    """The key was already used for a different request."""


class IdempotencyRecordErased(IdempotencyKeyReused):
    """The key's record can no longer be matched: the text its request quoted was erased."""


_MAC_PREFIX = "mac1:"  # a stored fingerprint bound to data keys (else the bare fingerprint)


@dataclass(frozen=True)
class IdempotencyKey:
    tenant_id: str
    key: str
    fingerprint: str  # what makes two requests "the same request"
    stored: str | None = None  # what the record keeps of it when bound to data keys

    def __post_init__(self) -> None:
        if not KEY_PATTERN.match(self.key):
            raise ValueError("Idempotency-Key must be 1-255 visible ASCII characters")


def bound(key: IdempotencyKey | None, sealer: Sealer, key_refs: Iterable[str]) -> IdempotencyKey | None:
    """The key of a request that quotes text sealed under `key_refs`: its record keeps a MAC
    of the fingerprint under those keys, never the bare hash of the text (a guess of an
    erased query or snippet could be confirmed against it)."""
    refs = sorted(set(key_refs))
    if key is None or not refs:
        return key
    mac = sealer.mac(key.fingerprint.encode(), tenant_id=key.tenant_id, key_refs=refs)
    stored = _MAC_PREFIX + orjson.dumps({"refs": refs, "mac": mac}).decode()
    return IdempotencyKey(key.tenant_id, key.key, key.fingerprint, stored)  # `replace`, minus introspection


def sealed_refs(*values: Sealed | None) -> list[str]:
    """Every key ref the sealed values are under."""
    return [ref for value in values if value is not None for ref in (value.key_ref, *value.extra_key_refs)]


@dataclass(frozen=True)
class Protected:
    """A part of an answer that data keys protect: `plain` in the answer a write returns,
    `sealed` in its stored copy, `withheld` in a retry's answer once a key is shredded.
    `encoded`: `sealed` holds the JSON of `plain` (a list), not the text itself."""

    plain: Any
    sealed: Sealed
    withheld: Any = None
    encoded: bool = False


def protect_json(
    sealer: Sealer, value: Any, *, tenant_id: str, key_refs: Sequence[str], withheld: Any
) -> Protected:
    """`value` (JSON) sealed under `key_refs` (gone when any one is shredded)."""
    sealed = sealer.seal(
        orjson.dumps(value).decode(), tenant_id=tenant_id, key_ref=key_refs[0], extra_key_refs=key_refs[1:]
    )
    return Protected(value, sealed, withheld, encoded=True)


_SEALED, _WITHHELD, _ENCODED = "$sealed", "$withheld", "$json"
KEY_DESTROYED = "text_erased"  # why a part is withheld: its key was shredded (erasure or retention)
UNREADABLE = "text_unreadable"  # the stored seal does not authenticate


# Values an answer holds that no walk needs to enter (most of an answer's leaves).
_LEAVES = frozenset({str, int, bool, float, type(None)})


def reveal(value: Any) -> Any:
    """The answer as the write returns it: protected parts in plain."""
    if isinstance(value, Protected):
        return value.plain
    if isinstance(value, dict):
        return {key: item if item.__class__ in _LEAVES else reveal(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [item if item.__class__ in _LEAVES else reveal(item) for item in value]
    return value


def _stored_form(value: Any) -> Any:
    """The answer as its record stores it: protected parts sealed, never in plain."""
    if isinstance(value, Protected):
        return {
            _SEALED: value.sealed.model_dump(mode="json"),
            _WITHHELD: value.withheld,
            _ENCODED: value.encoded,
        }
    if isinstance(value, dict):
        return {key: item if item.__class__ in _LEAVES else _stored_form(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [item if item.__class__ in _LEAVES else _stored_form(item) for item in value]
    return value


def _opened(value: Any, where: str, sealer: Sealer, tenant_id: str, withheld: list[dict[str, str]]) -> Any:
    """A stored answer as it stands now: each sealed part opened, or withheld (and listed
    with the reason) when its key is gone."""
    if isinstance(value, Protected):
        return value.plain  # a repeat within the batch that wrote it
    if isinstance(value, dict):
        if _SEALED in value:
            try:
                text = sealer.unseal(value[_SEALED], tenant_id=tenant_id)
            except (KeyDestroyed, SealBroken) as exc:
                reason = KEY_DESTROYED if isinstance(exc, KeyDestroyed) else UNREADABLE
                withheld.append({"field": where, "reason": reason})
                return value.get(_WITHHELD)
            return orjson.loads(text) if value.get(_ENCODED) else text
        return {
            key: _opened(item, f"{where}.{key}" if where else key, sealer, tenant_id, withheld)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_opened(item, f"{where}[{i}]", sealer, tenant_id, withheld) for i, item in enumerate(value)]
    return value


@dataclass(frozen=True)
class StoredAnswer:
    fingerprint: str
    status: int
    body: dict[str, Any]

    def replay(self, idempotency: IdempotencyKey, sealer: Sealer) -> Answer:
        """The first answer again, marked as a repeat, its protected parts opened through
        `sealer` (withheld, with the reason, when shredded); a different request is refused."""
        if not self._matches(idempotency, sealer):
            raise IdempotencyKeyReused(idempotency.key)
        withheld: list[dict[str, str]] = []
        body = _opened(self.body, "", sealer, idempotency.tenant_id, withheld)
        if withheld:
            body["withheld"] = withheld
        return self.status, {**body, "dedup": True}

    def _matches(self, idempotency: IdempotencyKey, sealer: Sealer) -> bool:
        if not self.fingerprint.startswith(_MAC_PREFIX):
            return hmac.compare_digest(self.fingerprint, idempotency.fingerprint)
        stored = orjson.loads(self.fingerprint[len(_MAC_PREFIX) :])
        try:
            mac = sealer.mac(
                idempotency.fingerprint.encode(), tenant_id=idempotency.tenant_id, key_refs=stored["refs"]
            )
        except KeyDestroyed:
            raise IdempotencyRecordErased(idempotency.key) from None
        return hmac.compare_digest(mac, stored["mac"])


@dataclass(frozen=True)
class IdempotentWrite:
    """What a write asks to be recorded with its entries: its key, and how to
    turn its committed entries into the answer (run inside the transaction)."""

    key: IdempotencyKey
    answer: Callable[[Sequence[RecordedEvent]], Answer]
    # The answer holds no `Protected` part (`Pending.plain_answer`): stored as it is, not walked.
    plain: bool = False


def ddl(store: Store) -> list[str]:
    return store.adapter.idempotency_ddl()


def _row_answer(row: IdempotencyRow) -> StoredAnswer:
    return StoredAnswer(fingerprint=row.fingerprint, status=row.status_code, body=orjson.loads(row.response))


def find(cursor: Any, store: Store, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], StoredAnswer]:
    """Stored answers for (tenant, key) pairs, read through the caller's transaction."""
    return {ident: _row_answer(row) for ident, row in store.adapter.idempotency_find(cursor, keys).items()}


def lookup(store: Store, tenant_id: str, key: str) -> StoredAnswer | None:
    """One stored answer, in a read-only transaction (the fast path before any work)."""
    row = store.adapter.idempotency_lookup(tenant_id, key)
    return None if row is None else _row_answer(row)


def lookup_many(store: Store, tenant_id: str, keys: Sequence[str]) -> dict[str, StoredAnswer]:
    """Stored answers of many keys of one tenant, in one read-only transaction (a batch's fast path)."""
    with store.transaction(commit=False) as cursor:
        found = find(cursor, store, [(tenant_id, key) for key in keys])
    return {key: answer for (_, key), answer in found.items()}


def records(
    rows: Sequence[tuple[IdempotencyKey, Answer, int]], plain: Sequence[bool] = ()
) -> list[IdempotencyRecord]:
    """The stored form of answers (built before the sequencer is taken; inserted under it).
    `plain[i]`: row i's answer holds no `Protected` part, so its stored form is the answer
    itself (the same bytes; were one there after all, orjson refuses its `Sealed`: nothing
    is stored in plain)."""
    now = time.time()
    return [
        IdempotencyRecord(
            key.tenant_id,
            key.key,
            key.stored or key.fingerprint,
            status,
            orjson.dumps(body if index < len(plain) and plain[index] else _stored_form(body)),
            position,
            now,
        )
        for index, (key, (status, body), position) in enumerate(rows)
    ]


RETENTION_S = 24 * 3600.0  # how long a retry is answered from its record


def purge(store: Store, older_than_s: float = RETENTION_S) -> int:
    """Forget answers older than `older_than_s`: a retry later than that runs afresh."""
    with store.transaction(commit=True) as cursor:
        cursor.execute(
            store.sql(f"DELETE FROM {store.table(IDEMPOTENCY_TABLE)} WHERE created_at < ?"),
            (time.time() - older_than_s,),
        )
        return store.rowcount(cursor)
