"""Business keys (confirmation numbers, group codes) as the system compares them: `rsv-key-v1`.

NFKC (full-width digits and letters become ASCII), every whitespace removed (extraction adds stray spaces
inside numbers), upper case (OPERA compares them case-insensitively). At most 128 characters; control
characters make a key unusable. Orders store the normalised key; the AI's raw text stays in the item.
"""

from __future__ import annotations

import re
import unicodedata

KEY_NORMALIZATION = "rsv-key-v1"
MAX_KEY_LENGTH = 128
_WHITESPACE = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class UnusableKey(ValueError):
    """Empty after normalisation, too long, or holding control characters."""


def normalize_key(raw: str) -> str:
    key = _WHITESPACE.sub("", unicodedata.normalize("NFKC", raw)).upper()
    if not key or _CONTROL.search(key) or len(key) > MAX_KEY_LENGTH or not key.isprintable():
        raise UnusableKey(raw[:0])
    return key
