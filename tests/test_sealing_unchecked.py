"""`Sealer.seal` builds its `Sealed` without pydantic's per-field validation once the key refs
have passed the model's rules: the value must be the validated model's, field for field, and
every value the model refuses must still be refused."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from ledger.domain.events import Sealed
from ledger.domain.fields import MAX_SEALED_CIPHERTEXT_B64
from ledger.writing.application import Ledger
from ledger.writing.sealing import document_key_ref, expiry_key_ref

TENANT = "default"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=st.text(max_size=300), document=st.sampled_from(["d1", "doc-2", "x" * 40]), layers=st.integers(0, 3)
)
def test_a_sealed_value_equals_the_validated_model(
    ledger: Ledger, text: str, document: str, layers: int
) -> None:
    extra = [expiry_key_ref(TENANT, f"2031-01-0{n + 1}", document) for n in range(layers)]
    first = ledger.sealer.seal(
        text, tenant_id=TENANT, key_ref=document_key_ref(TENANT, document), extra_key_refs=extra
    )
    again = ledger.sealer.seal(
        text, tenant_id=TENANT, key_ref=document_key_ref(TENANT, document), extra_key_refs=extra
    )
    for value in (first, again):  # the first seal under these refs validates, the next ones do not
        validated = Sealed.model_validate(value.model_dump())
        assert type(value) is Sealed
        assert value == validated and value.model_dump_json() == validated.model_dump_json()
        assert value.model_fields_set == validated.model_fields_set
        assert ledger.sealer.unseal(value, tenant_id=TENANT) == text
    assert first.nonce != again.nonce


@pytest.mark.parametrize(
    "key_ref, extra",
    [
        ("document/default/bad ref", []),  # a space: not an identifier
        ("vault/default/d1", []),  # no such kind of key
        ("document/default/d1", [f"expiry/default/2031-01-0{n}:d1" for n in range(1, 5)]),  # four layers
    ],
)
def test_refs_the_model_refuses_are_refused_every_time(
    ledger: Ledger, key_ref: str, extra: list[str]
) -> None:
    for _ in range(2):  # a refused ref is never remembered as checked
        with pytest.raises(ValidationError):
            ledger.sealer.seal("text", tenant_id=TENANT, key_ref=key_ref, extra_key_refs=extra)


def test_a_ciphertext_past_the_bound_is_refused_after_the_refs_were_checked(ledger: Ledger) -> None:
    ref = document_key_ref(TENANT, "d1")
    ledger.sealer.seal("short", tenant_id=TENANT, key_ref=ref)
    too_long = "a" * MAX_SEALED_CIPHERTEXT_B64  # its base64 with the tag is past the bound
    with pytest.raises(ValidationError):
        ledger.sealer.seal(too_long, tenant_id=TENANT, key_ref=ref)
