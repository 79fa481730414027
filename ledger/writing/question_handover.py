"""The keyed hashes of a receipt's question words, handed by the writer to the question index
for the receipts it signs itself, for one commit only.

The index (`projections/question_index.py`) would otherwise unseal each question the writer
sealed a moment earlier and tokenize it again. The use case hashes the words while the plain
question is in hand (every path that records a receipt: one retrieval, a batch, a search, a
replay), and its `Write` carries only those hashes (HMAC-SHA256 under the tenant's word key, cut
to 64 bits), keyed by (tenant, nonce of the sealed question): a nonce is fresh for each seal, so
a hand-over names exactly one sealed question (a replay's receipt keeps its original's sealed
question, the same words). `Ledger.commit_writes`
makes them visible to the read models for the duration of its call (the transaction and its
commit listeners) in a context variable, reset when the call returns or raises. Entries read
back from the log (a rebuild, another worker's entries) find nothing here and are unsealed.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

from ledger.retrieval.question_words import question_words
from ledger.writing.sealing import KeyedMac

# (tenant, nonce of the sealed question) -> its distinct word hashes, sorted.
QuestionHashes = Mapping[tuple[str, str], tuple[int, ...]]

_handed_over: ContextVar[QuestionHashes | None] = ContextVar("citeledger_question_hashes", default=None)


def tenant_word_key(master_key: bytes, tenant_id: str) -> bytes:
    """The tenant's key for question word hashes, derived from the ledger's master key."""
    return hmac.digest(master_key, f"citeledger/question-words/v1|{tenant_id}".encode(), hashlib.sha256)


def word_hash(tenant_key: bytes | KeyedMac, word: str) -> int:
    """HMAC-SHA256 of a word under the tenant's key, as a signed 64-bit integer."""
    data = word.encode("utf-8")
    mac = (
        tenant_key.digest(data)
        if isinstance(tenant_key, KeyedMac)
        else hmac.digest(tenant_key, data, "sha256")
    )
    return int.from_bytes(mac[:8], "big", signed=True)


class WordHasher:
    """Per-tenant word keys from one ledger's master key; keeps keys, never words."""

    def __init__(self, master_key: bytes) -> None:
        self._master = master_key
        self._keys: dict[str, KeyedMac] = {}

    def key(self, tenant_id: str) -> KeyedMac:
        key = self._keys.get(tenant_id)
        if key is None:
            key = self._keys[tenant_id] = KeyedMac(tenant_word_key(self._master, tenant_id))
        return key

    def hand_over(
        self, tenant_id: str, question: str, nonce: str, memo: dict[str, int] | None = None
    ) -> QuestionHashes:
        """The hand-over of one question sealed with `nonce`: its words' distinct hashes,
        sorted (the index's rows). `memo`: the words a batch hashed already, owned by the
        caller and cleared when its batch ends (plain words never outlive a batch); None for
        a question alone."""
        key = self.key(tenant_id)
        if memo is None:
            memo = {}
        hashes = set()
        for word in question_words(question):
            value = memo.get(word)
            if value is None:
                value = memo[word] = word_hash(key, word)
            hashes.add(value)
        return {(tenant_id, nonce): tuple(sorted(hashes))}


@contextmanager
def handed_over(hand_overs: Iterable[QuestionHashes | None]) -> Iterator[None]:
    """The batch's hand-overs, visible to `handed_over_hashes` in this thread until the block
    ends (normally or by an exception)."""
    merged: dict[tuple[str, str], tuple[int, ...]] = {}
    for each in hand_overs:
        if each:
            merged.update(each)
    if not merged:
        yield
        return
    token = _handed_over.set(merged)
    try:
        yield
    finally:
        _handed_over.reset(token)
        merged.clear()


def handed_over_hashes(tenant_id: str, nonce: object) -> tuple[int, ...] | None:
    """The word hashes the writer handed over for the question sealed with `nonce`, or None
    (not signed by this batch: the index unseals it)."""
    current = _handed_over.get()
    if current is None or not isinstance(nonce, str):
        return None
    return current.get((tenant_id, nonce))
