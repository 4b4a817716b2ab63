"""The user settings document (spec 000 §C.3), version 1: what a PATCH may carry and what a stored document
may hold (SOC-INV-02).

The stored document is sparse: only what the user set. Defaults apply on read (`effective`), so a default can
change without rewriting rows. `document_problems` mirrors the SQL function `social.settings_valid` (the
database CHECK, the arbiter); `TestSettings` in tests/social/test_profiles.py feeds both the same
documents. A PATCH is an RFC 7396 merge patch (`null` removes a key, restoring its default), checked by
`patch_problems` before the one UPDATE that applies it; the cross-key rule (quiet hours: both ends or neither) is
checked on the merged row by the CHECK itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tenet.kernel.zones import is_iana_zone

CURRENT_VERSION = 1

_LANGUAGE = re.compile(r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8}){0,3}\Z")
_ZONE_SHAPE = re.compile(r"^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+){0,2}\Z")
_CLOCK = re.compile(r"^([01][0-9]|2[0-3]):[0-5][0-9]\Z")
_AUDIENCE = ("everyone", "friends", "nobody")


def _string_in(*allowed: str) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, str) and value in allowed


def _matching(pattern: re.Pattern[str]) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, str) and pattern.match(value) is not None


def _boolean(value: Any) -> bool:
    return isinstance(value, bool)


# section -> key -> (shape check, description for errors)
SCHEMA: dict[str, dict[str, tuple[Callable[[Any], bool], str]]] = {
    "preferences": {
        "theme": (_string_in("light", "dark", "system"), "one of light, dark, system"),
        "language": (_matching(_LANGUAGE), "a BCP 47 language tag such as en or zh-CN"),
        "timezone": (_matching(_ZONE_SHAPE), "an IANA time zone such as Asia/Shanghai"),
    },
    "privacy": {
        "profile_visible_to": (_string_in(*_AUDIENCE), "one of everyone, friends, nobody"),
        "activity_visible_to": (_string_in(*_AUDIENCE), "one of everyone, friends, nobody"),
        "allow_friend_requests": (_boolean, "a boolean"),
    },
    "notification": {
        "enabled": (_boolean, "a boolean"),
        "push_enabled": (_boolean, "a boolean"),
        "email_enabled": (_boolean, "a boolean"),
        "quiet_hours_start": (_matching(_CLOCK), "a time HH:MM"),
        "quiet_hours_end": (_matching(_CLOCK), "a time HH:MM"),
    },
}


def defaults(default_timezone: str) -> dict[str, dict[str, Any]]:
    return {
        "preferences": {"theme": "system", "language": "en", "timezone": default_timezone},
        "privacy": {"profile_visible_to": "friends", "activity_visible_to": "friends", "allow_friend_requests": True},
        "notification": {"enabled": True, "push_enabled": True, "email_enabled": False,
                         "quiet_hours_start": None, "quiet_hours_end": None},
    }


def effective(stored: dict[str, Any], default_timezone: str) -> dict[str, dict[str, Any]]:
    """The stored (sparse) document over the defaults."""
    merged = defaults(default_timezone)
    for section, values in (stored or {}).items():
        merged.setdefault(section, {}).update(values)
    return merged


def _issue(loc: list[str], msg: str) -> dict[str, Any]:
    return {"loc": ["body", *loc], "msg": msg, "type": "value_error"}


def patch_problems(patch: Any) -> list[dict[str, Any]]:
    """Why a merge patch cannot apply: unknown sections or keys, wrong types, unknown time zones. A `null`
    value removes the key (or the whole section)."""
    if not isinstance(patch, dict):
        return [_issue([], "the settings patch must be a JSON object")]
    issues = []
    for section, values in patch.items():
        known = SCHEMA.get(section)
        if known is None:
            issues.append(_issue([section], f"unknown section; expected one of {', '.join(SCHEMA)}"))
            continue
        if values is None:
            continue
        if not isinstance(values, dict):
            issues.append(_issue([section], "must be an object (or null to reset the section)"))
            continue
        for key, value in values.items():
            if key not in known:
                issues.append(_issue([section, key], f"unknown setting; expected one of {', '.join(known)}"))
            elif value is not None:
                check, wanted = known[key]
                if not check(value):
                    issues.append(_issue([section, key], f"must be {wanted}"))
                elif section == "preferences" and key == "timezone" and not is_iana_zone(value):
                    issues.append(_issue([section, key], "not an IANA time zone this server knows"))
    return issues


def document_problems(document: Any) -> list[str]:
    """Why a stored document is not valid version-1 settings (what `social.settings_valid` refuses)."""
    if not isinstance(document, dict):
        return ["not an object"]
    problems = []
    for section, values in document.items():
        known = SCHEMA.get(section)
        if known is None or not isinstance(values, dict):
            problems.append(f"{section}: unknown section or not an object")
            continue
        for key, value in values.items():
            if key not in known or not known[key][0](value):
                problems.append(f"{section}.{key}: unknown or of the wrong shape")
    notification = document.get("notification")
    if isinstance(notification, dict) and (("quiet_hours_start" in notification)
                                           != ("quiet_hours_end" in notification)):
        problems.append("notification: quiet hours need both ends")
    return problems


def touches_timezone(patch: dict[str, Any]) -> bool:
    preferences = patch.get("preferences", "absent")
    return preferences is None or (isinstance(preferences, dict) and "timezone" in preferences)
