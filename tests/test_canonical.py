"""The fast canonical encoder is byte-identical to the `rfc8785` reference over
every value the event schemas allow (no floats, ASCII keys, safe integers)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.tlog.canonical import (
    MAX_SAFE_INTEGER,
    NotCanonicalisable,
    canonical_json,
    reference_canonical_json,
)

ascii_keys = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127), max_size=12)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)
    | st.text(max_size=40)  # any unicode except lone surrogates, control chars included
)
schema_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=6) | st.dictionaries(ascii_keys, children, max_size=6),
    max_leaves=40,
)


@settings(max_examples=1500, deadline=None)
@given(schema_values)
def test_fast_encoder_matches_rfc8785(value: Any) -> None:
    assert canonical_json(value) == reference_canonical_json(value)
    assert canonical_json(value, checked=False) == reference_canonical_json(value)


@pytest.mark.parametrize(
    "value",
    [1.5, {"\u00e9": 1}, {"k": [2**53]}, {"k": -(2**53)}, {1: "x"}, b"bytes", {"a": object()}],
)
def test_values_outside_the_proven_domain_are_refused(value: Any) -> None:
    with pytest.raises(NotCanonicalisable):
        canonical_json(value)


def test_known_rfc8785_vector() -> None:
    # RFC 8785 §3.2.2-style ordering and escaping, integer-only subset.
    value = {
        "numbers": [333333333, 4, 20, 0],
        "string": '\u20ac$\u000f\nA\'B"\\\\"/',
        "literals": [None, True, False],
    }
    expected = (
        b'{"literals":[null,true,false],"numbers":[333333333,4,20,0],'
        b'"string":"\xe2\x82\xac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )
    assert canonical_json(value) == expected == reference_canonical_json(value)
