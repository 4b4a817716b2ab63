"""Text a client sent: what Python holds but UTF-8 and PostgreSQL do not, and digits of any length.

A JSON string escape may name a lone surrogate (`"\\ud800"`): the standard library decodes it into a `str`
that cannot be encoded as UTF-8, and PostgreSQL text holds no NUL either. Typed fields refuse such text in
their schemas; free-form JSON (a settings patch, a card payload, a cursor) carries it further, so whatever
echoes or stores client text asks here first.
"""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")


def storable(value: str) -> bool:
    """Whether PostgreSQL text (and UTF-8) can hold `value`: no NUL, no lone surrogate."""
    return "\x00" not in value and _SURROGATE.search(value) is None


def well_formed(value: str) -> str:
    """`value` with each lone surrogate replaced by U+FFFD (the replacement character), so it encodes."""
    return _SURROGATE.sub("\ufffd", value)


def number_at_most(digits: str, ceiling: int) -> int:
    """The number ASCII `digits` spell, or `ceiling` when it is larger: a client chooses how many digits to
    send, and int() of thousands of them costs time (past 4,300 it raises ValueError), so digits longer than
    the ceiling's are never converted."""
    significant = digits.lstrip("0")
    if len(significant) > len(str(ceiling)):
        return ceiling
    return min(int(significant or "0"), ceiling)
