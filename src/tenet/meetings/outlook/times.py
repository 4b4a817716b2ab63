"""The time model of the sync (spec layer 7; docs/design/outlook.md §4). Stored: UTC instants and an IANA zone.

Tenet never sends `Prefer: outlook.timezone`, so Graph renders `start`/`end` in UTC and `start.timeZone` only names
that rendering zone. The event's own zone, in order: a series' `recurrence.range.recurrenceTimeZone`, then
`originalStartTimeZone` (an occurrence's from its master), then TENET_DEFAULT_TIMEZONE. Windows names map through
icalendar's CLDR table (`WINDOWS_TO_OLSON`, a maintained library table, not a hand list); an IANA name is kept;
anything else (`tzone://Microsoft/Custom`, an unknown name) falls through to the next step."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from icalendar.timezone.windows_to_olson import WINDOWS_TO_OLSON

from tenet.kernel.zones import is_iana_zone, load_zone


def iana(name: Any) -> str | None:
    """The IANA name of a Windows or IANA zone name; None for custom or unknown zones."""
    if not isinstance(name, str) or not name:
        return None
    mapped = WINDOWS_TO_OLSON.get(name)
    if mapped and is_iana_zone(mapped):
        return mapped
    return name if is_iana_zone(name) else None


def event_zone(event: dict[str, Any], *, master: dict[str, Any] | None = None, default: str) -> str:
    """The zone the event lives in, by the spec's order with Graph's real meaning."""
    for source in (event, master or {}):
        recurrence = source.get("recurrence") or {}
        zone = iana((recurrence.get("range") or {}).get("recurrenceTimeZone"))
        if zone:
            return zone
    for source in (event, master or {}):
        zone = iana(source.get("originalStartTimeZone"))
        if zone:
            return zone
    return default


def instant(value: Any) -> datetime | None:
    """A Graph dateTimeTimeZone (`{"dateTime": "2026-01-06T17:00:00.0000000", "timeZone": "UTC"}`) as a UTC instant;
    None when absent or unreadable."""
    if not isinstance(value, dict) or not isinstance(value.get("dateTime"), str):
        return None
    text = value["dateTime"]
    head, _, fraction = text.partition(".")
    try:
        moment = datetime.fromisoformat(head + ("." + fraction[:6] if fraction else ""))
    except ValueError:
        return None
    if moment.tzinfo is None:
        zone = iana(value.get("timeZone")) or "UTC"
        moment = moment.replace(tzinfo=load_zone(zone) if zone != "UTC" else UTC)
    return moment.astimezone(UTC)
