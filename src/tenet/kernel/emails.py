"""Email addresses: one named, versioned normalisation (the comparison key) beside the typed form.

`email-v1`: Unicode NFKC, trim surrounding whitespace, then lower-case the *whole* address, local part
included. RFC 5321 lets a mail server treat the local part case-sensitively, but no provider our users
meet does, and two accounts differing only in case are a support incident, not a feature (decision
recorded in docs/decisions.md). The typed form is stored unchanged for display and for sending.
A future algorithm gets a new version name; rows keep the version that produced their key.
"""

from __future__ import annotations

import re
import unicodedata

from email_validator import SPECIAL_USE_DOMAIN_NAMES, EmailNotValidError, validate_email

EMAIL_NORMALIZATION_VERSION = "email-v1"
MAX_EMAIL_LENGTH = 320

# The shape nearly every address has: an ASCII dot-atom of letters, digits and `_+-` before the @, host-name labels
# after it and an alphabetic top-level label. email_validator accepts every such address unless it breaks one of the
# limits `_plainly_valid` checks (lengths, a special-use name, `--` that IDNA reserves), and it costs some 60 µs a
# call (a tenth of a guest check-in's service time): an address of this shape is accepted without it, anything
# else goes to it. tests/kernel/test_emails.py holds the shortcut to "accepted here => accepted by email_validator".
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_PLAIN_ADDRESS = re.compile(rf"[A-Za-z0-9_+-]+(?:\.[A-Za-z0-9_+-]+)*@((?:{_LABEL}\.)+[A-Za-z]{{2,63}})")
_RESERVED_NAMES = frozenset(SPECIAL_USE_DOMAIN_NAMES)


class InvalidEmail(ValueError):
    pass


def clean_email(typed: str) -> str:
    """The display form: NFKC and trimmed, otherwise as typed. Raises InvalidEmail."""
    candidate = unicodedata.normalize("NFKC", typed).strip()
    if not candidate or len(candidate) > MAX_EMAIL_LENGTH:
        raise InvalidEmail("an email address of 1 to 320 characters is required")
    if _plainly_valid(candidate):
        return candidate
    try:
        validate_email(candidate, check_deliverability=False)
    except EmailNotValidError as exc:
        raise InvalidEmail(str(exc)) from None
    return candidate


def _plainly_valid(candidate: str) -> bool:
    """Whether `candidate` has the common shape (above) within email_validator's limits: the local part at most 64
    characters, the address at most 254, the domain at most 253, no `--` in the domain (IDNA's reserved label
    form, `xn--` included), and no special-use top-level name (`.local`, `.test`, ...)."""
    match = _PLAIN_ADDRESS.fullmatch(candidate)
    if match is None:
        return False
    domain = match[1].lower()
    return (len(candidate) <= 254 and len(candidate) - len(domain) - 1 <= 64 and len(domain) <= 253
            and "--" not in domain and domain.rsplit(".", 1)[1] not in _RESERVED_NAMES)


def normalize_email(typed: str) -> str:
    """The comparison key of `email-v1`."""
    return unicodedata.normalize("NFKC", typed).strip().lower()
