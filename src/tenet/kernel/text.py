"""Text a client sent that Python holds but UTF-8 and PostgreSQL do not.

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
