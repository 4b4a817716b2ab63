"""What a Graph event says, as the meeting fields Outlook owns (docs/design/outlook.md §4, §7; issue 17): pure
functions, no database and no Graph call, so apply.py and reconcile.py read an event the same way.

- title, description (the body as plain text), location, online link, start and end (UTC instants), cancellation,
  the attendees' addresses; each cut to what a meeting holds (a title of 200, a location of 500 characters...);
- an occurrence's key: its original start (`originalStart`; an occurrence that never moved starts there);
- a series' description: the RRULE derived from Graph's `patternedRecurrence`, only to describe it (Graph's own
  expansion, `/instances`, gives the occurrences); a `noEnd` range is bounded by the window's end."""

from __future__ import annotations

import html.parser
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from tenet.kernel.emails import normalize_email
from tenet.meetings.outlook import times
from tenet.meetings.times import zone as load_zone

UNTITLED = "(no subject)"
# What the sync reads of an event, named: Graph sometimes gives an occurrence's `originalStart` only when selected.
SELECT = ("id,type,seriesMasterId,subject,body,start,end,location,onlineMeeting,onlineMeetingUrl,isCancelled,"
          "attendees,changeKey,originalStart,originalStartTimeZone,recurrence,organizer")
_SPACE = re.compile(r"[ \t\r\f\v]+")
_LINES = re.compile(r"\n{3,}")
_DAYS = {"sunday": "SU", "monday": "MO", "tuesday": "TU", "wednesday": "WE", "thursday": "TH", "friday": "FR",
         "saturday": "SA"}
_WEEK_INDEX = {"first": "1", "second": "2", "third": "3", "fourth": "4", "last": "-1"}


class _Text(html.parser.HTMLParser):
    BREAKS = frozenset({"br", "p", "div", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("style", "script", "head"):
            self.skipping += 1
        elif tag in self.BREAKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script", "head") and self.skipping:
            self.skipping -= 1

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.parts.append(data)


def plain_text(body: Any) -> str | None:
    """An event body (`{"contentType": "html"|"text", "content": ...}`) as plain text, or None when empty."""
    if not isinstance(body, dict) or not isinstance(body.get("content"), str):
        return None
    content = body["content"]
    if str(body.get("contentType", "")).lower() == "html":
        reader = _Text()
        reader.feed(content)
        content = "".join(reader.parts)
    lines = [_SPACE.sub(" ", line).strip() for line in content.replace("\xa0", " ").split("\n")]
    text = _LINES.sub("\n\n", "\n".join(lines)).strip()
    return text[:10_000] or None


def _link(event: dict[str, Any]) -> str | None:
    online = event.get("onlineMeeting") or {}
    for candidate in (online.get("joinUrl") if isinstance(online, dict) else None, event.get("onlineMeetingUrl")):
        if isinstance(candidate, str) and re.match(r"^https?://", candidate) and len(candidate) <= 2000:
            return candidate
    return None


def _location(event: dict[str, Any]) -> str | None:
    name = (event.get("location") or {}).get("displayName")
    return name.strip()[:500] or None if isinstance(name, str) else None


@dataclass(frozen=True)
class Occurrence:
    """One single event or one occurrence of a series as Graph has it now."""

    graph_event_id: str
    original_start: datetime
    change_key: str | None
    fields: dict[str, Any]  # title, description, location, online_link, start_time, end_time
    cancelled: bool
    attendee_emails: tuple[str, ...]


def emails(event: dict[str, Any]) -> tuple[str, ...]:
    found = []
    for person in event.get("attendees") or []:
        address = ((person or {}).get("emailAddress") or {}).get("address")
        if isinstance(address, str) and "@" in address and (person or {}).get("type") != "resource":
            found.append(normalize_email(address))
    return tuple(sorted(set(found)))


def occurrence(event: dict[str, Any], *, master: dict[str, Any] | None = None) -> Occurrence | None:
    """The event's owned fields; None when it has no id or no readable times. An occurrence takes its attendees
    from its master when Graph gives it none (delta-style items carry none)."""
    start, end = times.instant(event.get("start")), times.instant(event.get("end"))
    if not isinstance(event.get("id"), str) or start is None or end is None:
        return None
    original = _original_start(event) or start
    subject = event.get("subject")
    title = subject.strip()[:200] if isinstance(subject, str) and subject.strip() else UNTITLED
    if end <= start:  # Outlook allows a zero-length event; a meeting needs an end after its start
        end = start + timedelta(minutes=1)
    fields = {"title": title, "description": plain_text(event.get("body")), "location": _location(event),
              "online_link": _link(event), "start_time": start, "end_time": end}
    people = emails(event) or (emails(master) if master else ())
    return Occurrence(event["id"], original, event.get("changeKey"), fields, bool(event.get("isCancelled")), people)


def _original_start(event: dict[str, Any]) -> datetime | None:
    value = event.get("originalStart")
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00")[:32])
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)


def describe_rule(recurrence: dict[str, Any], *, zone: str, bound: datetime) -> str:
    """An RRULE describing Graph's pattern (COUNT / UNTIL from the range; `noEnd` bounded by `bound`)."""
    pattern, span = recurrence.get("pattern") or {}, recurrence.get("range") or {}
    kind = str(pattern.get("type") or "daily")
    days = [_DAYS[d.lower()] for d in pattern.get("daysOfWeek") or [] if isinstance(d, str) and d.lower() in _DAYS]
    index = _WEEK_INDEX.get(str(pattern.get("index") or "first").lower(), "1")
    parts = {"daily": ["FREQ=DAILY"], "weekly": ["FREQ=WEEKLY"] + ([f"BYDAY={','.join(days)}"] if days else []),
             "absoluteMonthly": ["FREQ=MONTHLY", f"BYMONTHDAY={int(pattern.get('dayOfMonth') or 1)}"],
             "relativeMonthly": ["FREQ=MONTHLY"] + ([f"BYDAY={','.join(index + d for d in days)}"] if days else []),
             "absoluteYearly": ["FREQ=YEARLY", f"BYMONTH={int(pattern.get('month') or 1)}",
                                f"BYMONTHDAY={int(pattern.get('dayOfMonth') or 1)}"],
             "relativeYearly": ["FREQ=YEARLY", f"BYMONTH={int(pattern.get('month') or 1)}"]
             + ([f"BYDAY={','.join(index + d for d in days)}"] if days else [])}.get(kind, ["FREQ=DAILY"])
    interval = int(pattern.get("interval") or 1)
    if interval > 1:
        parts.append(f"INTERVAL={interval}")
    if span.get("type") == "numbered" and int(span.get("numberOfOccurrences") or 0) > 0:
        parts.append(f"COUNT={int(span['numberOfOccurrences'])}")
    elif span.get("type") == "endDate" and isinstance(span.get("endDate"), str):
        parts.append(f"UNTIL={span['endDate'].replace('-', '')[:8]}")
    else:
        parts.append(f"UNTIL={bound.astimezone(load_zone(zone)).date():%Y%m%d}")
    return ";".join(parts)


def local_date(moment: datetime, zone: str) -> date:
    return moment.astimezone(load_zone(zone)).date()


def series_fields(master: dict[str, Any], *, zone: str, bound: datetime) -> dict[str, Any] | None:
    """The Tenet series row a Graph series master describes; None without readable times."""
    made = occurrence(master)
    if made is None:
        return None
    start, end = made.fields["start_time"], made.fields["end_time"]
    local = start.astimezone(load_zone(zone))
    minutes = max(1, min(10_080, int((end - start).total_seconds() // 60)))
    return {"title": made.fields["title"], "description": made.fields["description"],
            "location": made.fields["location"], "online_link": made.fields["online_link"], "timezone": zone,
            "rrule": describe_rule(master.get("recurrence") or {}, zone=zone, bound=bound),
            "start_date": local.date(), "start_local_time": time(local.hour, local.minute, local.second),
            "duration_minutes": minutes}
