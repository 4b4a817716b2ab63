"""The ICS calendar feed (RFC 5545): owned and subscribed items with their RRULE, readable by `icalendar`.

Rendering is CPU work that grows with the items a user has (over a second for the 2,000 a feed holds, most of it
icalendar's serialisation): it runs in a worker thread, so the event loop answers other requests meanwhile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import anyio
from icalendar import Calendar, Event

from tenet.kernel.reads import Reads
from tenet.social import errors, queries

MAX_FEED_ITEMS = 2000
HISTORY = timedelta(days=90)


async def feed(reads: Reads, *, feed_id: str, now: datetime) -> bytes:
    owner = await reads.value(queries.FEED_OWNER_SQL, {"feed": feed_id})
    if owner is None:
        raise errors.CalendarFeedNotFound()
    rows = await reads.all(queries.window_sql(scope="all", status=None, after="TRUE"),
                           {"me": owner, "from": now - HISTORY, "to": datetime.max.replace(tzinfo=now.tzinfo),
                            "status": None, "limit": MAX_FEED_ITEMS})
    return await anyio.to_thread.run_sync(_render, rows)


def _render(rows: Sequence[Mapping[str, Any]]) -> bytes:
    calendar = Calendar()
    calendar.add("prodid", "-//Tenet//Social//EN")
    calendar.add("version", "2.0")
    calendar.add("x-wr-calname", "Tenet")
    for row in rows:
        tz = ZoneInfo(row["timezone"])
        event = Event()
        event.add("uid", f"{row['id']}@tenet")
        event.add("summary", row["title"])
        if row["description"]:
            event.add("description", row["description"])
        event.add("dtstart", row["start_at"].astimezone(tz))
        event.add("dtend", row["end_at"].astimezone(tz))
        event.add("dtstamp", row["updated_at"])
        event.add("sequence", row["version"] - 1)
        event.add("status", {"canceled": "CANCELLED", "completed": "CONFIRMED", "active": "CONFIRMED"}[row["status"]])
        if row["recurrence_rule"]:
            event.add("rrule", dict(part.split("=", 1) for part in row["recurrence_rule"].split(";")))
        calendar.add_component(event)
    calendar.add_missing_timezones()
    return calendar.to_ical()
