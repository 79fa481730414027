"""Text to search terms: the one tokenizer the index and the queries share.

Latin-script (and any other space-separated) text: NFKC-folded, lowercased
words of letters and digits, English stopwords dropped, Snowball-stemmed
(PyStemmer). Text written without spaces — Han, Hiragana, Katakana, Hangul —
becomes overlapping character bigrams of each run (a one-character run stays
one term), the usual answer for Chinese and Japanese without a dictionary.

Every term keeps its character offsets in the original text, so a snippet
can be cut around the matched terms and still occur verbatim in the chunk.

Terms are document text: the index stores them only as keyed hashes
(`TermHasher`: keyed BLAKE2b, a MAC, under a per-tenant key derived from
the ledger's master key), so its tables reveal nothing without that key.
"""

from __future__ import annotations

import hashlib
import re
import threading
import unicodedata
from collections.abc import Callable, Collection, Iterable
from typing import NamedTuple

import Stemmer
from bm25s.stopwords import STOPWORDS_EN_PLUS

_CJK = "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u1100-\u11ff\uac00-\ud7af"
_TOKEN = re.compile(rf"([{_CJK}]+)|([^\W_{_CJK}]+)")

# bm25s's larger English list, plus the words questions are made of: a question's
# "how many ... can I get" must not count against the documents that answer it.
STOPWORDS: frozenset[str] = frozenset(STOPWORDS_EN_PLUS) | frozenset(
    "many much get gets could would may might must please tell need want know".split()
)
MAX_QUERY_TERMS = 64
MAX_WORD_CHARS = 64  # longer "words" (hashes, base64) are not search terms
_stemmer_lock = threading.Lock()
_stemmer = Stemmer.Stemmer("english")
_stemmer.maxCacheSize = 0  # no second cache of plaintext words beside `_stems` (which an erasure drops)


class Term(NamedTuple):
    """A term and its offsets. CJK runs give bigrams that score (`cover` False) and
    single characters that only measure how much of a query a chunk covers (`score`
    False): bigrams across word boundaries are noise for coverage, characters are
    noise for ranking. Words do both. (A tuple: every chunk is tokenized at ingest and
    every cited chunk again for its snippet, and a tuple is much cheaper to build.)"""

    text: str
    start: int
    end: int
    score: bool = True
    cover: bool = True


_CJK_CHAR = re.compile(f"[{_CJK}]")
_stems: dict[str, str] = {}
_STEM_CACHE_MAX = 500_000


def stem_word(word: str) -> str:
    """English stem of a lowercase word; CJK bigrams and digits pass unchanged."""
    stem = _stems.get(word)
    if stem is not None:
        return stem
    if not word or _CJK_CHAR.match(word) or word.isdigit():
        return word
    with _stemmer_lock:  # PyStemmer objects are not thread-safe
        stem = str(_stemmer.stemWord(word))
        if len(_stems) >= _STEM_CACHE_MAX:
            _stems.clear()
        _stems[word] = stem
    return stem


_forget_hooks: list[Callable[[], None]] = []


def on_forget_words(hook: Callable[[], None]) -> None:
    """Have `forget_words` also run `hook` (another cache of words, `word_forms`'s)."""
    _forget_hooks.append(hook)


def forget_words() -> None:
    """Drop the cached words (plaintext of documents and queries) after an erasure: no
    word of erased text outlives its key in this process's memory."""
    with _stemmer_lock:
        _stems.clear()
    for hook in _forget_hooks:
        hook()


def split_words(text: str) -> list[str]:
    """The scoring tokens of `text` before stemming (lowercased words and CJK bigrams):
    also the splitter handed to bm25s's Tokenizer, so the reference ranker sees the same terms."""
    return [term.text for term in _raw_terms(text) if term.score]


def _raw_terms(text: str) -> Iterable[Term]:
    for match in _TOKEN.finditer(text):
        run, word = match.group(1), match.group(2)
        if run is not None:
            start = match.start(1)
            for offset in range(len(run) - 1):
                yield Term(run[offset : offset + 2], start + offset, start + offset + 2, cover=False)
            for offset, char in enumerate(run):
                yield Term(char, start + offset, start + offset + 1, score=len(run) == 1)
        else:
            folded = _folded(word)
            if folded is not None:
                yield Term(folded, match.start(2), match.end(2))


def _folded(word: str) -> str | None:
    """A word of text as a term's surface form (NFKC, lowercase; NFKC leaves ASCII as it is),
    None when it is too short or too long to be a term."""
    folded = word.lower() if word.isascii() else unicodedata.normalize("NFKC", word).lower()
    if (len(folded) < 2 and not folded.isdigit()) or len(folded) > MAX_WORD_CHARS:
        return None
    return folded


def scoring_stem(word: str) -> str | None:
    """The scoring term a (non-CJK) word of text gives, as `terms` makes it: its stem; None for
    a stopword or a word no term is made of."""
    folded = _folded(word)
    if folded is None or folded in STOPWORDS:
        return None
    return stem_word(folded)


def scoring_grams(run: str) -> list[str]:
    """The scoring terms of a run of CJK characters, as `terms` makes them: its bigrams, or
    the character itself when the run is one character (stopwords left in)."""
    return [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]


def terms(text: str) -> list[Term]:
    """Search terms of `text` with their offsets (stopwords dropped, words stemmed)."""
    out = []
    for term in _raw_terms(text):
        word = term.text
        if word in STOPWORDS:
            continue
        if term.score and term.cover:  # a word (CJK terms stay as they are)
            stem = stem_word(word)
            if stem != word:
                term = Term(stem, term.start, term.end)
        out.append(term)
    return out


def matching_terms(text: str, wanted: Collection[str]) -> list[Term]:
    """`[t for t in terms(text) if t.text in wanted]`, term for term, without building the
    terms that cannot match: a cited chunk is scanned for the query's terms to cut its
    snippet, and most of its words are not among them. (ASCII words skip NFKC, which
    leaves ASCII as it is.)"""
    out: list[Term] = []
    # Each distinct word once per call (words repeat): its stem when wanted, else None.
    decided: dict[str, str | None] = {}
    for match in _TOKEN.finditer(text):
        run, word = match.groups()
        if run is not None:
            start = match.start(1)
            for offset in range(len(run) - 1):
                bigram = run[offset : offset + 2]
                if bigram in wanted:
                    out.append(Term(bigram, start + offset, start + offset + 2, cover=False))
            for offset, char in enumerate(run):
                if char in wanted:
                    out.append(Term(char, start + offset, start + offset + 1, score=len(run) == 1))
            continue
        if word in decided:
            stem = decided[word]
        else:
            stem = decided[word] = _wanted_stem(word, wanted)
        if stem is not None:
            out.append(Term(stem, match.start(2), match.end(2)))
    return out


def _wanted_stem(word: str, wanted: Collection[str]) -> str | None:
    """The search term a word of text gives (as `terms`) when it is in `wanted`, else None."""
    stem = scoring_stem(word)
    return stem if stem is not None and stem in wanted else None


def term_counts(text: str) -> tuple[dict[str, int], int]:
    """(count per distinct term, length in scoring terms) of a text."""
    counts: dict[str, int] = {}
    length = 0
    for term in terms(text):
        counts[term.text] = counts.get(term.text, 0) + 1
        length += term.score
    return counts, length


def query_terms(text: str) -> list[Term]:
    """The distinct terms of a query (offsets of their first occurrence), bounded."""
    seen: dict[str, Term] = {}
    for term in terms(text):
        if term.text not in seen:
            seen[term.text] = term
            if len(seen) >= MAX_QUERY_TERMS:
                break
    return list(seen.values())


def filename_words(path: str) -> str:
    """A file's name as words: `eng/on-call_rotation.md` -> `on call rotation`."""
    name = path.rsplit("/", 1)[-1]
    stem = name.rsplit(".", 1)[0] if "." in name else name
    return re.sub(r"[-_.]+", " ", stem)


def term_key(master_key: bytes, tenant_id: str) -> bytes:
    """The tenant's key for term hashes, derived from the ledger's master key."""
    return hashlib.blake2b(
        f"citeledger/search-terms/v1|{tenant_id}".encode(), key=master_key, digest_size=32
    ).digest()


class TermHasher:
    """Keyed 64-bit hashes of terms for one tenant (a bounded cache: vocabularies repeat)."""

    CACHE_MAX = 200_000

    def __init__(self, key: bytes) -> None:
        self._key = key
        self._cache: dict[str, int] = {}

    def __call__(self, term: str) -> int:
        cached = self._cache.get(term)
        if cached is not None:
            return cached
        value = int.from_bytes(
            hashlib.blake2b(term.encode("utf-8"), key=self._key, digest_size=8).digest(), "little"
        )
        if len(self._cache) >= self.CACHE_MAX:
            self._cache.clear()
        self._cache[term] = value
        return value

    def forget(self) -> None:
        """Drop cached plaintext terms (after an erasure)."""
        self._cache.clear()
