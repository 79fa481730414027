"""Sealed values: AES-256-GCM under data keys that live outside the log.

A sealed value carries the ciphertext and a salted commitment (HMAC-SHA256
keyed by a per-key salt). Signatures and Merkle leaves cover only this form.
Destroying a data key (and its salt) makes the text unrecoverable and the
commitment unguessable, while every signature and proof still verifies.

Key refs: `tenant/<tenant>` (default), `document/<tenant>/<document_id>`,
`subject/<tenant>/<subject_id>`, `expiry/<tenant>/<YYYY-MM-DD>` (retention
buckets: one key per expiry day, destroyed when the day has passed). A value
sealed under several refs uses an AES key derived from all of them (HKDF), so
it is gone as soon as any one is destroyed.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ledger.domain.events import Sealed
from ledger.domain.fields import MAX_SEALED_CIPHERTEXT_B64
from ledger.domain.timestamps import utc_now
from ledger.storage import adapters
from ledger.storage.store import Store
from ledger.tlog.signing import b64, unb64

KEYS_TABLE = adapters.KEYS_TABLE
_CACHE_TTL_S = 2.0  # bounds how long another process may still read a shredded key
_COMBINED_MAX = 10_000  # derived keys kept (cleared, not evicted one by one, when full)


class KeyDestroyed(LookupError):
    """The data key was shredded: the text is gone for good."""


class SealBroken(ValueError):
    """Ciphertext, key ref or tenant binding does not authenticate."""


def tenant_key_ref(tenant_id: str) -> str:
    return f"tenant/{tenant_id}"


def document_key_ref(tenant_id: str, document_id: str) -> str:
    return f"document/{tenant_id}/{document_id}"


def subject_key_ref(tenant_id: str, subject_id: str) -> str:
    return f"subject/{tenant_id}/{subject_id}"


def expiry_key_ref(tenant_id: str, day: str, scope: str) -> str:
    """Values of one `scope` expiring on `day` (YYYY-MM-DD, UTC) share a key.

    The scope is what a legal hold can protect: a document id for citation
    snapshots, `subject.<id>` or `queries` for retrieval queries. The day has a
    fixed width, so the first ':' after it ends it unambiguously.
    """
    return f"expiry/{tenant_id}/{day}:{scope}"


def parse_expiry_key_ref(key_ref: str) -> tuple[str, str, str] | None:
    """(tenant_id, day, scope) of an expiry key ref, else None."""
    kind, _, rest = key_ref.partition("/")
    tenant_id, _, bucket = rest.partition("/")
    if kind != "expiry" or len(bucket) < 12 or bucket[10] != ":":
        return None
    return tenant_id, bucket[:10], bucket[11:]


def _aad(tenant_id: str, refs: tuple[str, ...]) -> bytes:
    return f"citeledger/sealed/v1|{tenant_id}|{'|'.join(refs)}".encode()


class KeyedMac:
    """HMAC-SHA256 under one key with its padded key states hashed once (RFC 2104): each
    MAC copies two SHA-256 states instead of setting up a fresh HMAC (half the time)."""

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        block = (hashlib.sha256(key).digest() if len(key) > 64 else key).ljust(64, b"\0")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in block))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in block))

    def digest(self, data: bytes) -> bytes:
        """`hmac.digest(key, data, "sha256")`."""
        inner = self._inner.copy()
        inner.update(data)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()

    def hexdigest(self, data: bytes) -> str:
        return self.digest(data).hex()


@dataclass(frozen=True)
class _DataKey:
    aead: AESGCM
    salt: bytes
    tenant_id: str
    loaded_at: float
    secret: bytes = b""

    @cached_property
    def mac(self) -> KeyedMac:
        return KeyedMac(self.salt)


def _combine(tenant_id: str, refs: tuple[str, ...], keys: list[_DataKey]) -> _DataKey:
    """One AES key and salt from several data keys; each is needed to rebuild them."""
    derived = HKDF(algorithm=hashes.SHA256(), length=64, salt=None, info=_aad(tenant_id, refs)).derive(
        b"".join(key.secret + key.salt for key in keys)
    )
    return _DataKey(AESGCM(derived[:32]), derived[32:], tenant_id, min(k.loaded_at for k in keys))


class DataKeyStore:
    """Data keys in a side table (the store adapter's `data_key_*` primitives), each
    wrapped (AES-GCM) by the master key, so the database alone never yields a key."""

    def __init__(self, store: Store, master_key: bytes) -> None:
        self.adapter = store.adapter
        self._wrap = AESGCM(master_key)
        self._cache: dict[str, _DataKey] = {}
        # (tenant, refs) -> (the data keys, the key derived from them) for multi-ref values.
        self._combined: dict[tuple[str, tuple[str, ...]], tuple[tuple[_DataKey, ...], _DataKey]] = {}
        self._lock = threading.Lock()
        store.create_tables(*self.adapter.data_keys_ddl())

    def _wrap_key(self, key_ref: str, dek: bytes, salt: bytes) -> bytes:
        nonce = os.urandom(12)
        return nonce + self._wrap.encrypt(nonce, dek + salt, key_ref.encode())

    def _unwrap(self, key_ref: str, wrapped: bytes) -> tuple[bytes, bytes]:
        plain = self._wrap.decrypt(wrapped[:12], wrapped[12:], key_ref.encode())
        return plain[:32], plain[32:]

    def _load(self, key_ref: str) -> _DataKey | None:
        cached = self._cache.get(key_ref)
        if cached is not None and time.monotonic() - cached.loaded_at < _CACHE_TTL_S:
            return cached
        row = self.adapter.data_key_get(key_ref)
        if row is None:
            return None
        if row.destroyed or row.wrapped is None:
            self._forget(key_ref)
            raise KeyDestroyed(key_ref)
        return self._remember(key_ref, row.tenant_id, row.wrapped)

    def _remember(self, key_ref: str, tenant_id: str, wrapped: bytes) -> _DataKey:
        dek, salt = self._unwrap(key_ref, wrapped)
        key = _DataKey(AESGCM(dek), salt, tenant_id, time.monotonic(), dek)
        with self._lock:
            self._cache[key_ref] = key
        return key

    def _cached(self, key_ref: str) -> bool:
        cached = self._cache.get(key_ref)
        return cached is not None and time.monotonic() - cached.loaded_at < _CACHE_TTL_S

    def get_or_create(self, key_ref: str, tenant_id: str) -> _DataKey:
        key = self._load(key_ref)
        if key is not None:
            return key
        dek, salt = os.urandom(32), os.urandom(32)
        self.adapter.data_key_create(
            key_ref, tenant_id, self._wrap_key(key_ref, dek, salt), utc_now(timespec="seconds")
        )
        key = self._load(key_ref)  # another process may have won the race
        assert key is not None
        return key

    def ensure(self, key_refs: Sequence[str], tenant_id: str) -> None:
        """Create the keys among `key_refs` that were never created, in one transaction (a
        batch of new documents), and cache the live ones (read together, not one query
        each when they are first used); a destroyed or tombstoned ref stays as it is."""
        wanted = [ref for ref in dict.fromkeys(key_refs) if not self._cached(ref)]
        if not wanted:
            return
        found = self.adapter.data_keys_get_many(wanted)
        missing = [ref for ref in wanted if ref not in found]
        if missing:
            rows = [(ref, tenant_id, self._wrap_key(ref, os.urandom(32), os.urandom(32))) for ref in missing]
            made = {ref: adapters.DataKeyRow(tenant_id, wrapped, False) for ref, _, wrapped in rows}
            if self.adapter.data_keys_create_many(rows, utc_now(timespec="seconds")) == len(rows):
                # Every one stored by this call: the keys just made are the stored ones.
                found.update(made)
            else:  # read back: where another process created a ref first, its key is the one stored
                found.update(self.adapter.data_keys_get_many(missing))
        for ref, row in found.items():
            if row.destroyed or row.wrapped is None:
                self._forget(ref)
            else:
                self._remember(ref, row.tenant_id, row.wrapped)

    def combined(self, tenant_id: str, refs: tuple[str, ...], keys: tuple[_DataKey, ...]) -> _DataKey:
        """The key derived from `keys` (loaded for `refs`), reused while they are still the
        cached ones: HKDF and a new AES-GCM object once per refs, not once per value."""
        cached = self._combined.get((tenant_id, refs))
        if cached is not None and cached[0] == keys:  # the same objects (a reloaded key has a new AESGCM)
            return cached[1]
        key = _combine(tenant_id, refs, list(keys))
        with self._lock:
            if len(self._combined) >= _COMBINED_MAX:
                self._combined.clear()
            self._combined[(tenant_id, refs)] = (keys, key)
        return key

    def get(self, key_ref: str) -> _DataKey:
        key = self._load(key_ref)
        if key is None:
            raise KeyDestroyed(key_ref)
        return key

    def destroy(self, key_ref: str, tenant_id: str, reason: str) -> bool:
        """Shred a data key; a ref never used gets a tombstone so it can never be
        created later. Returns False when it was already destroyed (idempotent)."""
        changed = self.adapter.data_key_destroy(key_ref, tenant_id, reason, utc_now(timespec="seconds"))
        self._forget(key_ref)
        return changed

    def _forget(self, key_ref: str) -> None:
        with self._lock:
            self._cache.pop(key_ref, None)
            for derived in [k for k in self._combined if key_ref in k[1]]:
                del self._combined[derived]

    def unrecorded_destructions(self, tenant_id: str | None = None) -> list[tuple[str, str, str]]:
        """(key_ref, tenant_id, reason) destroyed but not yet recorded in the log."""
        return self.adapter.data_keys_unrecorded(tenant_id)

    def destructions(self, key_refs: Sequence[str]) -> dict[str, tuple[str, str]]:
        """When and why each destroyed ref among `key_refs` was destroyed."""
        return self.adapter.data_key_destructions(key_refs)

    def mark_recorded(self, key_refs: Sequence[str], position: int) -> None:
        self.adapter.data_keys_mark_recorded(key_refs, position)

    def live_refs(self, tenant_id: str, prefix: str, below: str) -> list[str]:
        """Undestroyed key refs of a tenant with `prefix <= ref < below` (bounded)."""
        return self.adapter.data_keys_live(tenant_id, prefix, below)

    def known(self, key_ref: str) -> bool:
        """Whether the ref was ever created (or tombstoned)."""
        return self.adapter.data_key_get(key_ref) is not None

    def purge_residue(self) -> None:
        """Push destroyed key bytes out of the database's files: SQLite's WAL still
        holds old page images until a checkpoint, PostgreSQL keeps dead tuples
        until the table is rewritten."""
        self.adapter.purge_data_key_residue()


_shared_keys: weakref.WeakKeyDictionary[Store, DataKeyStore] = weakref.WeakKeyDictionary()
_shared_lock = threading.Lock()


def shared_data_keys(store: Store, master_key: bytes) -> DataKeyStore:
    """This process's one `DataKeyStore` for an open store (`master_key`: the master key
    of that store's key directory). The ledger's sealer and the search index projection,
    which opens each chunk it indexes, share its cache: a key is read and unwrapped once,
    and destroying it drops it from both at once."""
    with _shared_lock:
        keys = _shared_keys.get(store)
        if keys is None:
            keys = _shared_keys[store] = DataKeyStore(store, master_key)
        return keys


_SEALED_FIELDS = frozenset(Sealed.model_fields)


def _unchecked_sealed(fields: dict[str, Any]) -> Sealed:
    """A `Sealed` of what `Sealer.seal` just produced, without validating it field by field
    (~10 µs, two per receipt): base64 of its own nonce and ciphertext, the hex of its own MAC,
    key refs that passed the model's rules when first sealed under (`Sealer._checked_refs`),
    a ciphertext within the model's bound. Equal to the validated model, field for field
    (`tests/test_sealing_unchecked.py`)."""
    value = Sealed.__new__(Sealed)
    object.__setattr__(value, "__dict__", fields)
    object.__setattr__(value, "__pydantic_fields_set__", _SEALED_FIELDS)
    object.__setattr__(value, "__pydantic_extra__", None)
    object.__setattr__(value, "__pydantic_private__", None)
    return value


class Sealer:
    """Seals and unseals text for one ledger; the only place plaintext meets keys."""

    def __init__(self, keys: DataKeyStore) -> None:
        self.keys = keys
        self._checked_refs: set[tuple[str, ...]] = set()

    def _key(self, refs: tuple[str, ...], tenant_id: str, *, create: bool) -> _DataKey:
        # A plain loop: two values per receipt come through here (generators cost more).
        keys = []
        for ref in refs:
            key = self.keys.get_or_create(ref, tenant_id) if create else self.keys.get(ref)
            if key.tenant_id != tenant_id:
                raise SealBroken("key_ref belongs to another tenant")
            keys.append(key)
        return keys[0] if len(keys) == 1 else self.keys.combined(tenant_id, refs, tuple(keys))

    def seal(
        self,
        plaintext: str,
        *,
        tenant_id: str,
        key_ref: str | None = None,
        extra_key_refs: Sequence[str] = (),
    ) -> Sealed:
        ref = key_ref or tenant_key_ref(tenant_id)
        refs = (ref, *extra_key_refs)
        if len(set(refs)) != len(refs):
            raise ValueError("key refs must be distinct")
        key = self._key(refs, tenant_id, create=True)
        data = plaintext.encode("utf-8")
        nonce = os.urandom(12)
        ciphertext = b64(key.aead.encrypt(nonce, data, _aad(tenant_id, refs)))
        fields: dict[str, Any] = {
            "alg": "A256GCM",
            "key_ref": ref,
            "extra_key_refs": list(extra_key_refs),
            "nonce": b64(nonce),
            "ciphertext": ciphertext,
            "commitment": key.mac.hexdigest(data),
        }
        if len(ciphertext) <= MAX_SEALED_CIPHERTEXT_B64 and refs in self._checked_refs:
            return _unchecked_sealed(fields)
        sealed = Sealed(**fields)  # every rule of the model, the key refs' among them
        if len(self._checked_refs) >= _COMBINED_MAX:
            self._checked_refs.clear()
        self._checked_refs.add(refs)
        return sealed

    def mac(self, data: bytes, *, tenant_id: str, key_refs: Sequence[str]) -> str:
        """HMAC-SHA256 of `data` under the salt of the key derived from `key_refs` (all live:
        `KeyDestroyed` once one is shredded): recognises data again while the keys live, and
        confirms no guess of it after."""
        key = self._key(tuple(sorted(set(key_refs))), tenant_id, create=False)
        return key.mac.hexdigest(b"citeledger/mac/v1|" + data)

    def require_keys(self, sealed: dict[str, Any], *, tenant_id: str) -> None:
        """Raise `KeyDestroyed` (or `SealBroken`: another tenant's key) as `unseal` would,
        without opening the value: for a reader handed its plaintext's derivatives."""
        self._key((sealed["key_ref"], *sealed.get("extra_key_refs", ())), tenant_id, create=False)

    def unseal(self, sealed: Sealed | dict[str, Any], *, tenant_id: str) -> str:
        value = sealed if isinstance(sealed, Sealed) else Sealed.model_validate(sealed)
        refs = (value.key_ref, *value.extra_key_refs)
        key = self._key(refs, tenant_id, create=False)
        try:
            data = key.aead.decrypt(unb64(value.nonce), unb64(value.ciphertext), _aad(tenant_id, refs))
        except InvalidTag:
            raise SealBroken("ciphertext does not authenticate") from None
        if not hmac.compare_digest(key.mac.hexdigest(data), value.commitment):
            raise SealBroken("commitment does not match the plaintext")
        return data.decode("utf-8")
