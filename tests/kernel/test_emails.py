"""Email addresses (tenet.kernel.emails): the shortcut for the common shape never accepts what email_validator
refuses, and everything else still gets email_validator's verdict."""

from __future__ import annotations

import pytest
from email_validator import EmailNotValidError, validate_email
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tenet.kernel.emails import _PLAIN_ADDRESS, InvalidEmail, _plainly_valid, clean_email


def _validator_accepts(address: str) -> bool:
    try:
        validate_email(address, check_deliverability=False)
    except EmailNotValidError:
        return False
    return True


@settings(max_examples=600, deadline=None)
@given(st.from_regex(_PLAIN_ADDRESS, fullmatch=True) | st.text(max_size=80))
@example("ana@example.org")
@example("a@xn--abc.com")  # IDNA's reserved form: refused by email_validator, so never taken by the shortcut
@example("a@b.local")
@example("a@b.onion")
@example("x" * 65 + "@a.io")
@example("a@" + "b" * 63 + "." + "c" * 63 + "." + "d" * 63 + "." + "e" * 61 + ".io")
def test_the_shortcut_accepts_only_what_email_validator_accepts(address):
    if _plainly_valid(address):
        assert _validator_accepts(address), address


@pytest.mark.parametrize("address", ["ana@example.org", "First.Last+tag@mail.example.com", "g-7_x@bench.example",
                                     "x" * 64 + "@a.io"])
def test_common_addresses_take_the_shortcut(address):
    assert _plainly_valid(address)  # the shortcut is used at all (else the property above says nothing)
    assert clean_email(address) == address


@pytest.mark.parametrize("address", ["Ana@Bücher.de", "a@b.c0m", '"quoted"@example.org'])
def test_other_shapes_get_email_validator_s_verdict(address):
    assert not _plainly_valid(address)
    if _validator_accepts(address):
        assert clean_email(address) == address
    else:
        with pytest.raises(InvalidEmail):
            clean_email(address)


@pytest.mark.parametrize("address", ["a@b.local", "a..b@example.org", "a@-b.com", "a@b.com.", "a@xn--abc.com",
                                     "no-at-sign", ""])
def test_invalid_addresses_are_refused(address):
    with pytest.raises(InvalidEmail):
        clean_email(address)
