"""Email addresses: one named, versioned normalisation (the comparison key) beside the typed form.

`email-v1`: Unicode NFKC, trim surrounding whitespace, then lower-case the *whole* address, local part
included. RFC 5321 lets a mail server treat the local part case-sensitively, but no provider our users
meet does, and two accounts differing only in case are a support incident, not a feature (decision
recorded in docs/decisions.md). The typed form is stored unchanged for display and for sending.
A future algorithm gets a new version name; rows keep the version that produced their key.
"""

from __future__ import annotations

import unicodedata

from email_validator import EmailNotValidError, validate_email

EMAIL_NORMALIZATION_VERSION = "email-v1"
MAX_EMAIL_LENGTH = 320


class InvalidEmail(ValueError):
    pass


def clean_email(typed: str) -> str:
    """The display form: NFKC and trimmed, otherwise as typed. Raises InvalidEmail."""
    candidate = unicodedata.normalize("NFKC", typed).strip()
    if not candidate or len(candidate) > MAX_EMAIL_LENGTH:
        raise InvalidEmail("an email address of 1 to 320 characters is required")
    try:
        validate_email(candidate, check_deliverability=False)
    except EmailNotValidError as exc:
        raise InvalidEmail(str(exc)) from None
    return candidate


def normalize_email(typed: str) -> str:
    """The comparison key of `email-v1`."""
    return unicodedata.normalize("NFKC", typed).strip().lower()
