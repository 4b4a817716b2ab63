"""What a mail is made of, independent of any domain: the settings of the SMTP server, header text that
cannot break or disguise a header, and addresses in the form the wire needs.

The boundary (API lifespan, worker job, CLI) builds `MailSettings` from the service's settings and hands
them to the outbox; nothing in the kernel reads the all-domain settings object.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from email.utils import parseaddr

from email_validator import EmailNotValidError, validate_email


@dataclass(frozen=True)
class MailSettings:
    """How this process reaches its SMTP server. `smtp_host` None means no server: mail is only logged."""

    smtp_host: str | None = None
    smtp_port: int = 25
    smtp_username: str | None = None
    smtp_password: str | None = field(default=None, repr=False)
    smtp_starttls: bool = False
    mail_from: str = "Tenet <no-reply@tenet.example>"

    @property
    def smtp_configured(self) -> bool:
        return bool(self.smtp_host)


class UndeliverableMail(Exception):
    """The mail itself cannot be sent (a bad address, an address the server cannot take): retrying the same
    row can never help, so it is marked failed at once."""


# Zero-width non-joiner and joiner are format characters (Cf) that belong to ordinary spelling: Persian and
# Indic words and emoji sequences need them, and they neither move text nor end a line. Every other Cf
# (bidi embeddings, overrides and isolates U+202A..E and U+2066..9, the marks U+200E/F and U+061C, BOM)
# can make a header read differently from what it says.
_KEPT_FORMAT = frozenset("\u200c\u200d")


def header_text(value: str, limit: int | None = None) -> str:
    """`value` as one line of plain text, safe in a mail header (the subject) and beside other text.

    Whitespace of any kind, line breaks included (CR, LF, NEL, U+2028/9), becomes one space, so a name can
    never start a new header. Control characters (Cc: C0 and C1, U+0080..U+009F), format characters (Cf:
    bidi overrides, isolates and marks) and lone surrogates are removed, so a user-supplied name cannot turn
    the rest of the subject around or hide in it. Longer than `limit` characters, it is cut with an ellipsis.
    """
    kept = []
    for char in value:
        if char.isspace():
            kept.append(" ")
            continue
        category = unicodedata.category(char)
        if category in ("Cc", "Cs") or (category == "Cf" and char not in _KEPT_FORMAT):
            continue
        kept.append(char)
    flat = " ".join("".join(kept).split())
    if limit is not None and len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return flat


def wire_address(address: str) -> str:
    """The address as SMTP and the To header carry it: an internationalised domain in its ASCII form
    (punycode, `user@xn--bcher-kva.example`), the local part exactly as typed.

    A non-ASCII local part stays as it is; sending it needs a server that offers SMTPUTF8. Raises
    UndeliverableMail for something that is not an address.
    """
    local, at, domain = address.rpartition("@")
    if not at or not local or not domain or any(char.isspace() for char in address):
        raise UndeliverableMail("not an email address")
    if domain.isascii():
        return address
    try:
        # The same IDNA 2008 / UTS 46 conversion as the validation the address passed when it was typed.
        ascii_domain = validate_email(address, check_deliverability=False, test_environment=True).ascii_domain
    except EmailNotValidError as exc:
        raise UndeliverableMail(f"not a deliverable address: {exc}") from None
    return f"{local}@{ascii_domain}"


def address_domain(mailbox: str) -> str:
    """The ASCII domain of a `Name <addr>` or bare address (for Message-IDs); `localhost` when it has none."""
    _, address = parseaddr(mailbox)
    try:
        return wire_address(address).rpartition("@")[2]
    except UndeliverableMail:
        return "localhost"
