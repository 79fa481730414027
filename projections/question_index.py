"""question_index: the words of each receipt's question, for `q` searches of the receipts.

Tables (rebuildable from the log like every read model):

- `citeledger_rm_question_words`: posting lists, one row per (tenant, word, receipt
  position), clustered on that key (SQLite WITHOUT ROWID, a PostgreSQL primary key): a
  word's receipts are one index range in log order, and "does receipt p have word w" is
  one probe.
- `citeledger_rm_question_keys`: for each data key a question is sealed under that an
  erasure or the retention sweep can destroy (a data subject's, an expiry day's), the
  receipt's position, those key refs and its word hashes, so that destroying any of them
  finds and deletes every row derived from that question.

Words are never stored: only keyed hashes, HMAC-SHA256 under a per-tenant key derived from
the ledger's master key (the key directory, never the database), cut to 64 bits. The
question is opened here through the data keys of the ledger whose log is projected and
never written anywhere; for the receipts the writer signs itself, it hands the question's
word hashes over for the batch instead (`ledger.writing.question_handover`), and the question
is neither opened nor tokenized here (its keys are still checked, as opening would). A
question whose key is gone (erased, expired) is never indexed,
so a rebuild and the incremental model end the same; `RetentionScrubbed` deletes the rows
of the questions sealed under a destroyed key. The query side is
`projections/question_query.py`.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any, ClassVar

from ledger.domain.entries import RecordedEvent
from ledger.retrieval.question_words import question_words
from ledger.retrieval.search_text import forget_words
from ledger.storage.store import Store, in_batches
from ledger.tlog.signing import KeyDirectory
from ledger.writing.question_handover import WordHasher, handed_over_hashes, tenant_word_key, word_hash
from ledger.writing.sealing import KeyDestroyed, SealBroken, Sealer, shared_data_keys
from projections.base import Projection, TableSpec, declare_table, payload_field

__all__ = ["QuestionIndexProjection", "QuestionKeys", "question_keys", "tenant_word_key", "word_hash"]

QUESTION_WORDS_TABLE = "citeledger_rm_question_words"
QUESTION_KEYS_TABLE = "citeledger_rm_question_keys"
PROJECTION_NAME = "question_index"
_WORDS = declare_table(
    QUESTION_WORDS_TABLE,
    "word_tenant_id TEXT NOT NULL, word_hash BIGINT NOT NULL, receipt_position BIGINT NOT NULL",
    key=("word_tenant_id", "word_hash", "receipt_position"),
    position_column="receipt_position",
)
_KEYS = declare_table(
    QUESTION_KEYS_TABLE,
    "tenant_id TEXT NOT NULL, key_ref TEXT NOT NULL, position BIGINT NOT NULL, "
    "key_refs TEXT NOT NULL, word_hashes TEXT NOT NULL",
    key=("tenant_id", "key_ref", "position"),
    position_column="position",
)
_WORD_COLUMNS = _WORDS.insert_columns
_KEY_COLUMNS = _KEYS.insert_columns


class QuestionKeys:
    """Per-tenant word hashers and the sealer that opens questions, from the key material
    of the ledger whose log is projected (shared by the projection and its queries)."""

    CACHE_MAX = 100_000

    def __init__(self, store: Store) -> None:
        master = KeyDirectory(store.config.keys_dir).master_key()
        self.sealer = Sealer(shared_data_keys(store, master))
        self._hasher = WordHasher(master)
        # Per tenant, word -> hash: a lookup builds no (tenant, word) tuple.
        self._hashes: dict[str, dict[str, int]] = {}
        self._cached = 0
        self._lock = threading.Lock()

    def word_hash(self, tenant_id: str, word: str) -> int:
        """A signed 64-bit keyed hash of `word` (BIGINT on both stores)."""
        return self.word_hashes(tenant_id, [word])[0]

    def word_hashes(self, tenant_id: str, words: Sequence[str]) -> list[int]:
        """`word_hash` of each of `words`, in order; each word is hashed once per process
        (until the cache is full or an erasure drops it)."""
        table = self._hashes.get(tenant_id)
        if table is not None:
            try:
                return [table[word] for word in words]
            except KeyError:
                pass  # a word not hashed yet
        key = self._hasher.key(tenant_id)
        hashes = []
        with self._lock:
            if self._cached >= self.CACHE_MAX:
                self._hashes.clear()
                self._cached = 0
            table = self._hashes.setdefault(tenant_id, {})
            for word in words:
                value = table.get(word)
                if value is None:
                    value = table[word] = word_hash(key, word)
                    self._cached += 1
                hashes.append(value)
        return hashes

    def forget(self) -> None:
        """Drop the cached plaintext words (after an erasure)."""
        with self._lock:
            self._hashes.clear()
            self._cached = 0
        forget_words()


_shared: weakref.WeakKeyDictionary[Store, QuestionKeys] = weakref.WeakKeyDictionary()
_shared_lock = threading.Lock()


def question_keys(store: Store) -> QuestionKeys:
    """This process's `QuestionKeys` for an open store: the projection and the queries share
    its cache, and an erasure applied here drops the cached words for both."""
    with _shared_lock:
        keys = _shared.get(store)
        if keys is None:
            keys = _shared[store] = QuestionKeys(store)
        return keys


class QuestionIndexProjection(Projection):
    name: ClassVar[str] = PROJECTION_NAME
    version: ClassVar[int] = 1
    # Rows of erased questions are deleted, so an as-of digest of the past is not reproducible.
    as_of_digest: ClassVar[bool] = False
    tables: ClassVar[tuple[TableSpec, ...]] = (_WORDS, _KEYS)

    def __init__(self) -> None:
        self._keys: QuestionKeys | None = None
        self._log_store: Store | None = None
        self.handed_over = 0  # receipts indexed from the writer's hand-over (not unsealed)

    def bind_log(self, store: Store) -> None:
        """The store whose log (and data keys) this model follows (as `search_index`)."""
        self._log_store = store

    def keys(self, store: Store) -> QuestionKeys:
        if self._keys is None:
            self._keys = question_keys(self._log_store or store)
        return self._keys

    def table_ddl(self, store: Store) -> list[str]:
        self.keys(store)  # opens the data-key table now, never inside an apply's transaction
        # The word postings live in their primary key's b-tree (SQLite: WITHOUT ROWID).
        return [spec.create(store) + store.adapter.clustered_table for spec in self.tables]

    def apply(self, cursor: Any, store: Store, events: Sequence[RecordedEvent]) -> None:
        words: list[tuple[Any, ...]] = []
        keys: list[tuple[Any, ...]] = []
        for event in events:
            event_type = self.check_known(event)
            if event_type == "RetrievalRecorded":
                self._index(store, event, words, keys)
            elif event_type == "RetentionScrubbed":
                self._flush(cursor, store, words, keys)
                self._erase(cursor, store, event)
        self._flush(cursor, store, words, keys)

    def _index(
        self, store: Store, event: RecordedEvent, words: list[tuple[Any, ...]], keys: list[tuple[Any, ...]]
    ) -> None:
        sealed = payload_field(event, "query")
        question_keys_ = self.keys(store)
        tenant = event.tenant_id
        handed = handed_over_hashes(tenant, sealed.get("nonce"))
        try:
            if handed is not None:  # signed by this batch: its words were hashed before sealing
                question_keys_.sealer.require_keys(sealed, tenant_id=tenant)
                self.handed_over += 1
                hashes: Sequence[int] = handed
            else:
                question = question_keys_.sealer.unseal(sealed, tenant_id=tenant)
                hashes = sorted(set(question_keys_.word_hashes(tenant, question_words(question))))
        except (KeyDestroyed, SealBroken):
            return  # erased (or unreadable): never indexed, as a rebuild would find it
        if not hashes:
            return
        words.extend((tenant, h, event.position) for h in hashes)
        refs = list(dict.fromkeys([sealed["key_ref"], *sealed.get("extra_key_refs", [])]))
        # Rows only under the keys that can be destroyed (a subject's, an expiry day's): no
        # erasure destroys a tenant's own key, and a row fewer per receipt is write time saved.
        # A question sealed under the tenant's key alone (older receipts) keeps that one row.
        doomed = [ref for ref in refs if not ref.startswith("tenant/")] or refs
        joined_refs, joined_hashes = " ".join(doomed), ",".join(map(str, hashes))
        keys.extend((tenant, ref, event.position, joined_refs, joined_hashes) for ref in doomed)

    def _erase(self, cursor: Any, store: Store, event: RecordedEvent) -> None:
        """Delete every row derived from a question sealed under one of the destroyed keys."""
        keys_table = store.table(QUESTION_KEYS_TABLE)
        found: dict[int, tuple[str, str]] = {}
        for batch, marks in in_batches(list(payload_field(event, "key_refs"))):
            cursor.execute(
                store.sql(
                    f"SELECT position, key_refs, word_hashes FROM {keys_table} "
                    f"WHERE tenant_id=? AND key_ref IN ({marks})"
                ),
                (event.tenant_id, *batch),
            )
            for row in cursor.fetchall():
                found[int(row["position"])] = (row["key_refs"], row["word_hashes"])
        words = [
            (event.tenant_id, int(h), position)
            for position, (_, hashes) in found.items()
            for h in hashes.split(",")
        ]
        refs = [
            (event.tenant_id, ref, position)
            for position, (joined, _) in found.items()
            for ref in joined.split()
        ]
        if words:
            cursor.executemany(
                store.sql(
                    f"DELETE FROM {store.table(QUESTION_WORDS_TABLE)} "
                    "WHERE word_tenant_id=? AND word_hash=? AND receipt_position=?"
                ),
                words,
            )
        if refs:
            cursor.executemany(
                store.sql(f"DELETE FROM {keys_table} WHERE tenant_id=? AND key_ref=? AND position=?"), refs
            )
        self.keys(store).forget()

    def _flush(
        self, cursor: Any, store: Store, words: list[tuple[Any, ...]], keys: list[tuple[Any, ...]]
    ) -> None:
        # A receipt's position is new to this model, so its rows never meet an existing key
        # (a rebuild starts empty); on a retried batch the runner rolled the earlier one back.
        store.adapter.insert_many(cursor, store.table(QUESTION_WORDS_TABLE), _WORD_COLUMNS, words)
        store.adapter.insert_many(cursor, store.table(QUESTION_KEYS_TABLE), _KEY_COLUMNS, keys)
        words.clear()
        keys.clear()
