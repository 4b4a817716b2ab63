"""The emulator's calendar model: events, series with a Graph `recurrence`, their occurrences and exceptions,
and how Graph renders them as JSON.

Instants are kept as aware UTC datetimes. A series expands in its own zone (`recurrence.range.recurrenceTimeZone`,
a Windows name mapped to IANA through icalendar's maintained WINDOWS_TO_OLSON table), so a weekly 09:00 series in
Pacific Standard Time stays at 09:00 local across a DST change, as Exchange does.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import struct
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dateutil import rrule
from icalendar.timezone.windows_to_olson import WINDOWS_TO_OLSON

CUSTOM_ZONE = "tzone://Microsoft/Custom"
_WEEKDAYS = {"monday": rrule.MO, "tuesday": rrule.TU, "wednesday": rrule.WE, "thursday": rrule.TH,
             "friday": rrule.FR, "saturday": rrule.SA, "sunday": rrule.SU}
_INDEX = {"first": 1, "second": 2, "third": 3, "fourth": 4, "last": -1}
_IMMUTABLE_PREFIX, _REST_PREFIX = "AAkALgAAAAAAHYQDEapmEc2byACqAC-EWg0A", "AAMkAGVmMDEzMTM4LTZmYWUtNDdkNC1hMDZi"


def zone_info(name: str | None) -> ZoneInfo | None:
    """The IANA zone for a Windows or IANA zone name; None for unknown names (and for Outlook's custom zones)."""
    if not name or name == CUSTOM_ZONE:
        return None
    if name.upper() in ("UTC", "Z"):
        return ZoneInfo("UTC")
    iana = WINDOWS_TO_OLSON.get(name, name)
    try:
        return ZoneInfo(iana)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def graph_datetime(instant: datetime, zone: ZoneInfo) -> str:
    """Graph's dateTimeTimeZone.dateTime: local wall time, seven fractional digits, no offset."""
    return instant.astimezone(zone).replace(tzinfo=None).isoformat(timespec="microseconds") + "0"


def graph_timestamp(instant: datetime) -> str:
    """A DateTimeOffset as Graph writes it (createdDateTime, originalStart...): UTC with a Z."""
    text = instant.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds")
    return text.rstrip("0").rstrip(".") + "Z"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class ParsedId:
    key: bytes  # the event's own 16 bytes
    immutable: bool
    generation: int  # REST ids change when the item moves between folders; immutable ids never do
    original_start: datetime | None  # set for an occurrence's id


def make_id(key: bytes, *, immutable: bool, generation: int, original_start: datetime | None = None) -> str:
    """An id in the style of Graph's (base64, with `-`, `_` and `=`); an occurrence's id embeds its original start."""
    tail = b"" if original_start is None else struct.pack(">q", int(original_start.timestamp()))
    if immutable:
        return _IMMUTABLE_PREFIX + _b64(b"I" + key + tail)
    return _REST_PREFIX + _b64(b"R" + key + struct.pack(">H", generation) + tail)


def parse_id(text: str) -> ParsedId | None:
    for prefix, immutable in ((_IMMUTABLE_PREFIX, True), (_REST_PREFIX, False)):
        if not text.startswith(prefix):
            continue
        try:
            raw = _unb64(text[len(prefix):])
        except ValueError:
            return None
        if raw[:1] != (b"I" if immutable else b"R"):
            return None
        body = raw[1:]
        key, body = body[:16], body[16:]
        generation = 0
        if not immutable:
            if len(body) < 2:
                return None
            generation, body = struct.unpack(">H", body[:2])[0], body[2:]
        if len(key) != 16 or len(body) not in (0, 8):
            return None
        start = datetime.fromtimestamp(struct.unpack(">q", body)[0], UTC) if body else None
        return ParsedId(key, immutable, generation, start)
    return None


@dataclass
class Override:
    """What an exception changes in one occurrence (None: as the master says)."""

    subject: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    location: str | None = None
    body: str | None = None
    is_cancelled: bool = False
    version: int = 1
    last_modified: datetime | None = None


@dataclass
class Event:
    """A single event or a series master, as the mailbox stores it."""

    key: bytes
    ical_uid: str
    subject: str
    start: datetime
    end: datetime
    zone: str  # Windows name: the zone the event was made in (originalStartTimeZone unless overridden)
    created: datetime
    last_modified: datetime
    body: str = ""
    location: str | None = None
    is_all_day: bool = False
    is_cancelled: bool = False
    organizer: dict[str, str] = field(default_factory=dict)
    attendees: list[dict[str, Any]] = field(default_factory=list)
    online_meeting_url: str | None = None
    recurrence: dict[str, Any] | None = None
    original_start_time_zone: str | None = None  # e.g. tzone://Microsoft/Custom; None: `zone`
    generation: int = 0
    version: int = 1
    changed_seq: int = 0
    exceptions: dict[datetime, Override] = field(default_factory=dict)
    deleted_occurrences: dict[datetime, bool] = field(default_factory=dict)  # original start -> silently
    _expansion: dict[tuple[Any, ...], list[datetime]] = field(default_factory=dict, repr=False)

    @property
    def is_series(self) -> bool:
        return self.recurrence is not None

    @property
    def duration(self) -> timedelta:
        return self.end - self.start

    @property
    def change_key(self) -> str:
        return _change_key(self.key, self.version)

    def touch(self, now: datetime, seq: int) -> None:
        self.version += 1
        self.last_modified = now
        self.changed_seq = seq
        self._expansion.clear()

    def series_zone(self) -> ZoneInfo:
        assert self.recurrence is not None
        name = self.recurrence["range"].get("recurrenceTimeZone") or self.zone
        return zone_info(name) or ZoneInfo("UTC")

    def original_starts(self, window_start: datetime, window_end: datetime) -> list[datetime]:
        """Original starts (UTC) of the pattern's occurrences overlapping [window_start, window_end), deleted
        ones included (the caller filters them): one rrule walk per window and master version, cached."""
        cache_key = (self.version, window_start, window_end)
        if cache_key not in self._expansion:
            if len(self._expansion) > 64:  # point look-ups (occurs_at) each add a window
                self._expansion.clear()
            self._expansion[cache_key] = self._expand(window_start, window_end)
        return self._expansion[cache_key]

    def _expand(self, window_start: datetime, window_end: datetime) -> list[datetime]:
        zone = self.series_zone()
        rule = recurrence_rule(self.recurrence or {}, self.start.astimezone(zone).replace(tzinfo=None))
        # Search a day wider on both sides in wall time, then keep the exact UTC overlaps.
        low = (window_start - self.duration).astimezone(zone).replace(tzinfo=None) - timedelta(days=1)
        high = window_end.astimezone(zone).replace(tzinfo=None) + timedelta(days=1)
        starts = []
        for local in rule.between(low, high, inc=True):
            instant = local.replace(tzinfo=zone).astimezone(UTC)
            if instant < window_end and instant + self.duration > window_start:
                starts.append(instant)
        return starts

    def occurs_at(self, original_start: datetime) -> bool:
        """Whether the pattern has an occurrence starting at this instant (deleted or not)."""
        return original_start in self.original_starts(original_start, original_start + timedelta(seconds=1))


@functools.lru_cache(maxsize=65536)
def _change_key(key: bytes, version: int) -> str:
    return _b64(hashlib.sha256(key + struct.pack(">I", version)).digest()[:16])


def recurrence_rule(recurrence: dict[str, Any], first_local: datetime) -> rrule.rrule:
    """Graph's patternedRecurrence as a dateutil rule over wall times of the series' zone."""
    pattern, range_ = recurrence["pattern"], recurrence["range"]
    kind = pattern["type"]
    start_date = date.fromisoformat(range_["startDate"])
    dtstart = datetime.combine(start_date, first_local.time())
    options: dict[str, Any] = {"dtstart": dtstart, "interval": int(pattern.get("interval") or 1)}
    days = [_WEEKDAYS[d.lower()] for d in pattern.get("daysOfWeek") or []]
    if kind == "daily":
        freq = rrule.DAILY
    elif kind == "weekly":
        freq = rrule.WEEKLY
        options["byweekday"] = days or [dtstart.weekday()]
        options["wkst"] = _WEEKDAYS[(pattern.get("firstDayOfWeek") or "sunday").lower()]
    elif kind in ("absoluteMonthly", "absoluteYearly"):
        freq = rrule.MONTHLY if kind == "absoluteMonthly" else rrule.YEARLY
        options["bymonthday"] = int(pattern["dayOfMonth"])
    elif kind in ("relativeMonthly", "relativeYearly"):
        freq = rrule.MONTHLY if kind == "relativeMonthly" else rrule.YEARLY
        options["byweekday"] = days
        options["bysetpos"] = _INDEX[(pattern.get("index") or "first").lower()]
    else:
        raise ValueError(f"unknown recurrence pattern type {kind!r}")
    if kind.endswith("Yearly"):
        options["bymonth"] = int(pattern["month"])
    if range_["type"] == "endDate":
        options["until"] = datetime.combine(date.fromisoformat(range_["endDate"]), time.max)
    elif range_["type"] == "numbered":
        options["count"] = int(range_["numberOfOccurrences"])
    return rrule.rrule(freq, **options)


@dataclass(frozen=True)
class Instance:
    """One occurrence of a series: as the pattern has it, or an exception when an override exists."""

    master: Event
    original_start: datetime
    override: Override | None

    @property
    def type(self) -> str:
        return "exception" if self.override is not None else "occurrence"

    @property
    def start(self) -> datetime:
        return (self.override.start if self.override and self.override.start else None) or self.original_start

    @property
    def end(self) -> datetime:
        if self.override and self.override.end:
            return self.override.end
        return self.start + self.master.duration

    def fingerprint(self) -> tuple[Any, ...]:
        """What makes delta report the instance again: an occurrence carries only its times there, so a change
        of the master's subject alone does not show up in calendarView delta (Graph reports the master only)."""
        if self.override is None:
            return ("occurrence", self.start, self.end)
        return ("exception", self.override.version, self.start, self.end)
