"""IANA time zone names: the one check every domain makes before it stores or uses a zone.

`zoneinfo` loads more than the IANA names in use: any TZif file under the host's zone directory, so
`right/UTC` (leap seconds counted: times shift by 27 s), `posix/Europe/Paris`, `localtime` (whatever the host
is set to) and tzdata's placeholder `Factory` all load. PostgreSQL does not know the first ones
(`pg_timezone_names`), calendar clients do not either, and a stored `localtime` changes meaning with the host.
The names accepted are those of the `tzdata` package (a dependency; the IANA release it carries, zones and
their backward-compatible links such as `Asia/Calcutta`), read once, minus `Factory`. The check is a set lookup:
nothing scans the disk per request (`zoneinfo.available_timezones()` does, on every call).
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

# In tzdata's list but not a zone anyone lives in: "local time zone must be set".
_NOT_ZONES = frozenset({"Factory"})


@cache
def zone_names() -> frozenset[str]:
    """Every accepted zone name (read from the tzdata package once per process)."""
    listed = resources.files("tzdata").joinpath("zones").read_text(encoding="utf-8")
    return frozenset(name for name in (line.strip() for line in listed.splitlines())
                     if name and name not in _NOT_ZONES)


def is_iana_zone(name: str) -> bool:
    return name in zone_names()


def load_zone(name: str) -> ZoneInfo:
    """The zone named `name`; ValueError when it is not an IANA zone name (map it to your domain's code)."""
    if not is_iana_zone(name):
        raise ValueError(f"{name[:64]!r} is not an IANA time zone name")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(f"{name[:64]!r} has no zone data on this server") from None
