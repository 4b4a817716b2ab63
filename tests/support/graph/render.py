"""Events as Graph's JSON, under the request's preferences (ImmutableId, outlook.timezone) and `$select`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from tests.support.graph.calendar import Event, Instance, graph_datetime, graph_timestamp
from tests.support.graph.mailbox import Item, Mailbox

UTC_ZONE = ZoneInfo("UTC")
# What calendarView delta gives for an occurrence of a series (Graph's own documented shape).
OCCURRENCE_DELTA_FIELDS = ("id", "type", "seriesMasterId", "start", "end")


@dataclass(frozen=True)
class View:
    """How one request wants events rendered."""

    immutable_ids: bool = False
    zone_name: str = "UTC"  # the name echoed in start/end.timeZone
    zone: ZoneInfo = UTC_ZONE
    select: frozenset[str] | None = None
    original_start_requires_select: bool = False


def _when(instant: Any, view: View) -> dict[str, str]:
    return {"dateTime": graph_datetime(instant, view.zone), "timeZone": view.zone_name}


def _location(name: str | None) -> dict[str, Any]:
    if not name:
        return {"displayName": "", "locationType": "default", "uniqueIdType": "unknown", "address": {},
                "coordinates": {}}
    return {"displayName": name, "locationType": "default", "uniqueId": name, "uniqueIdType": "private",
            "address": {}, "coordinates": {}}


def _attendee(person: dict[str, Any]) -> dict[str, Any]:
    return {"type": person.get("type", "required"),
            "status": {"response": person.get("response", "none"), "time": "0001-01-01T00:00:00Z"},
            "emailAddress": {"name": person.get("name", ""), "address": person["address"]}}


def event_json(mailbox: Mailbox, item: Item, view: View) -> dict[str, Any]:
    """The full event resource (or the `$select`ed part of it) for a single event, master, occurrence or exception."""
    master = item.master if isinstance(item, Instance) else item
    override = item.override if isinstance(item, Instance) else None
    event_id = mailbox.id_of(item, immutable=view.immutable_ids)
    version = master.version if override is None else override.version
    change_key = master.change_key if override is None else f"{master.change_key}{version:04d}"
    subject = (override.subject if override and override.subject is not None else master.subject)
    body = (override.body if override and override.body is not None else master.body)
    location = (override.location if override and override.location is not None else master.location)
    cancelled = master.is_cancelled or bool(override and override.is_cancelled)
    zone = master.original_start_time_zone or master.zone
    body_html = f"<html><body>{body}</body></html>" if body else ""
    data: dict[str, Any] = {
        "@odata.etag": f'W/"{change_key}"', "id": event_id,
        "createdDateTime": graph_timestamp(master.created),
        "lastModifiedDateTime": graph_timestamp(override.last_modified if override and override.last_modified
                                                else master.last_modified),
        "changeKey": change_key, "categories": [], "transactionId": None,
        "originalStartTimeZone": zone, "originalEndTimeZone": zone,
        "iCalUId": master.ical_uid if not isinstance(item, Instance)
        else master.ical_uid + item.original_start.strftime("%Y%m%dT%H%M%S"),
        "uid": master.ical_uid, "reminderMinutesBeforeStart": 15, "isReminderOn": True, "hasAttachments": False,
        "subject": subject, "bodyPreview": body[:255], "importance": "normal", "sensitivity": "normal",
        "isAllDay": master.is_all_day, "isCancelled": cancelled, "isOrganizer": True, "responseRequested": True,
        "seriesMasterId": mailbox.id_of(master, immutable=view.immutable_ids) if isinstance(item, Instance)
        else None,
        "showAs": "busy", "type": item.type if isinstance(item, Instance)
        else ("seriesMaster" if master.is_series else "singleInstance"),
        "webLink": f"https://outlook.office365.com/owa/?itemid={event_id.replace('=', '%3D')}&exvsurl=1"
                   "&path=/calendar/item",
        "onlineMeetingUrl": None, "isOnlineMeeting": master.online_meeting_url is not None,
        "onlineMeetingProvider": "teamsForBusiness" if master.online_meeting_url else "unknown",
        "allowNewTimeProposals": True, "isDraft": False, "hideAttendees": False,
        "responseStatus": {"response": "organizer", "time": "0001-01-01T00:00:00Z"},
        "body": {"contentType": "html", "content": body_html},
        "start": _when(item.start, view), "end": _when(item.end, view),
        "location": _location(location), "locations": [_location(location)] if location else [],
        "recurrence": master.recurrence if not isinstance(item, Instance) else None,
        "attendees": [_attendee(p) for p in master.attendees],
        "organizer": {"emailAddress": {"name": master.organizer.get("name", ""),
                                       "address": master.organizer.get("address", "")}},
        "onlineMeeting": {"joinUrl": master.online_meeting_url} if master.online_meeting_url else None,
    }
    if isinstance(item, Instance) and (not view.original_start_requires_select
                                       or (view.select and "originalStart" in view.select)):
        data["originalStart"] = graph_timestamp(item.original_start)
    if view.select:
        keep = {"@odata.etag", "id"} | view.select
        data = {k: v for k, v in data.items() if k in keep}
    return data


def delta_json(mailbox: Mailbox, item: Item, view: View) -> dict[str, Any]:
    """An item of calendarView delta: occurrences carry only id, type, seriesMasterId, start and end."""
    data = event_json(mailbox, item, View(view.immutable_ids, view.zone_name, view.zone))
    if isinstance(item, Instance) and item.override is None:
        data = {k: data[k] for k in OCCURRENCE_DELTA_FIELDS}
    return {"@odata.type": "#microsoft.graph.event", **data}


def removed_json(item_id: str) -> dict[str, Any]:
    return {"@odata.type": "#microsoft.graph.event", "id": item_id, "@removed": {"reason": "deleted"}}


def master_of(item: Item) -> Event:
    return item.master if isinstance(item, Instance) else item
