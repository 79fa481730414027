"""The snippet's term scan (`matching_terms`) finds exactly the terms the full tokenizer
would, in the same order with the same offsets: snippets are in receipts' context hashes, so
`@2`/`@3` receipts replay byte for byte only if the faster scan cuts the same windows (the
rest of `ranking_steps._snippet` is unchanged)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.retrieval.search_text import matching_terms, terms

# ASCII words and stopwords, accented and full-width letters (NFKC changes them), ligatures,
# digits, CJK runs of one and several characters, punctuation and line breaks.
PIECES = st.sampled_from(
    [
        "verify",
        "Verification",
        "the",
        "and",
        "a",
        "I",
        "x",
        "42",
        "7",
        "café",
        "Ｃａｆé",
        "ﬁle",
        "naïve",
        "tokens",
        "token's",
        "検索",
        "索",
        "監査ログ",
        "한국어",
        "日",
        "-",
        "_",
        ".",
        ",",
        " ",
        "\n",
        "  ",
        "über",
        "ÉCOLE",
        "a" * 70,
        "rotation",
        "rotate",
    ]
)
TEXTS = st.lists(PIECES, max_size=60).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=TEXTS, extra=st.lists(PIECES, max_size=4), pick=st.integers(0, 2**16))
def test_matching_terms_equals_the_filtered_full_scan(text: str, extra: list[str], pick: int) -> None:
    every = terms(text)
    # Some of the text's own terms (so there are matches), and words it may not hold.
    wanted = {t.text for i, t in enumerate(every) if (pick >> (i % 16)) & 1}
    wanted |= {t.text for word in extra for t in terms(word)}
    assert matching_terms(text, wanted) == [t for t in every if t.text in wanted]
