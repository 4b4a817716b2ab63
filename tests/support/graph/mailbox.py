"""A mailbox of the emulator and the test API that changes it, as a user in Outlook would.

Every change bumps the mailbox's sequence (delta states compare against it) and queues change notifications for
the subscriptions on `/users/{id}/events` (delivered only when a test asks: `GraphEmulator.deliver_notifications`).
"""

from __future__ import annotations

import copy
import secrets
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime, timedelta
from typing import Any

from tests.support.graph.calendar import Event, Instance, Override, make_id, parse_id, zone_info

ChangeHook = Callable[["Mailbox", str, str], None]  # (mailbox, changeType, immutable id of the changed item)
Item = Event | Instance


def _aware(value: datetime | str, zone: str) -> datetime:
    """A naive datetime (or ISO text) is wall time in `zone`; an aware one is taken as is. Returns UTC."""
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    if moment.tzinfo is None:
        tz = zone_info(zone)
        if tz is None:
            raise ValueError(f"unknown zone {zone!r}")
        moment = moment.replace(tzinfo=tz)
    return moment.astimezone(UTC)


class Mailbox:
    """Events of one user or shared mailbox. Get one with `GraphEmulator.add_mailbox`; change it only through
    these methods (they take the emulator's lock, bump versions and queue notifications)."""

    def __init__(self, *, user_id: str, upn: str, display_name: str, lock: threading.RLock,
                 clock: Callable[[], datetime], on_change: ChangeHook) -> None:
        self.id, self.upn, self.display_name = user_id, upn, display_name
        self.denied = False  # RBAC for Applications / access policy: every mailbox route answers 403
        self.rest_enabled = True  # False: MailboxNotEnabledForRESTAPI (no Exchange Online mailbox)
        self.events: dict[bytes, Event] = {}
        self.seq = 0
        self.delta_duplicates = False  # each changed item twice in a round (on different pages)
        self.removed_for_changes_outside_window = True  # Graph's `@removed` for events made outside the window
        self._lock, self._clock, self._on_change = lock, clock, on_change

    # ---- reading (for the routes and for assertions) -------------------------------------------------------

    def find(self, text: str) -> Item | None:
        """The event, occurrence or exception an id names (REST ids of a moved event no longer do)."""
        parsed = parse_id(text)
        event = self.events.get(parsed.key) if parsed else None
        if parsed is None or event is None or (not parsed.immutable and parsed.generation != event.generation):
            return None
        if parsed.original_start is None:
            return event
        start = parsed.original_start
        if not event.is_series or start in event.deleted_occurrences or not event.occurs_at(start):
            return None
        return Instance(event, start, event.exceptions.get(start))

    def id_of(self, item: Item, *, immutable: bool = True) -> str:
        event = item.master if isinstance(item, Instance) else item
        start = item.original_start if isinstance(item, Instance) else None
        return make_id(event.key, immutable=immutable, generation=event.generation, original_start=start)

    def listing(self) -> list[Event]:
        """What `GET /users/{id}/events` lists: single events and series masters, oldest first."""
        return sorted(self.events.values(), key=lambda e: (e.created, e.key))

    def instances(self, master: Event, start: datetime, end: datetime) -> list[Instance]:
        """Occurrences and exceptions overlapping [start, end), deleted occurrences left out."""
        originals = set(master.original_starts(start, end)) | set(master.exceptions)
        found = []
        for original in originals:
            if original in master.deleted_occurrences:
                continue
            instance = Instance(master, original, master.exceptions.get(original))
            if instance.start < end and instance.end > start:
                found.append(instance)
        return sorted(found, key=lambda i: (i.start, i.original_start))

    def window(self, start: datetime, end: datetime) -> list[Item]:
        """The calendar view: single events and the series' instances overlapping [start, end)."""
        items: list[Item] = []
        for event in self.events.values():
            if event.is_series:
                items.extend(self.instances(event, start, end))
            elif event.start < end and event.end > start:
                items.append(event)
        return sorted(items, key=lambda i: (i.start, self.id_of(i)))

    # ---- changing, as a user in Outlook would ---------------------------------------------------------------

    def create_event(self, subject: str, start: datetime | str, end: datetime | str, *,
                     zone: str = "Pacific Standard Time", recurrence: dict[str, Any] | None = None,
                     ical_uid: str | None = None, **fields: Any) -> Event:
        """A single event (or, with `recurrence`, a series master). Naive times are wall times in `zone` (a Windows
        or IANA name). `fields`: body, location, is_all_day, organizer, attendees, online_meeting_url,
        original_start_time_zone (e.g. "tzone://Microsoft/Custom"). `ical_uid`: the iCalendar UID of a meeting
        this mailbox holds a copy of (see `copy_event`); by default a new one."""
        with self._lock:
            now = self._clock()
            self.seq += 1
            key = secrets.token_bytes(16)
            event = Event(key=key, ical_uid=ical_uid or "040000008200E00074C5B7101A82E008" + key.hex().upper(),
                          subject=subject, start=_aware(start, zone), end=_aware(end, zone), zone=zone,
                          created=now, last_modified=now, changed_seq=self.seq, recurrence=recurrence,
                          organizer=fields.pop("organizer", {"name": self.display_name, "address": self.upn}),
                          **fields)
            self.events[key] = event
            self._on_change(self, "created", self.id_of(event))
            return event

    def create_series(self, subject: str, start: datetime | str, end: datetime | str, *, pattern: dict[str, Any],
                      until: date | None = None, count: int | None = None, zone: str = "Pacific Standard Time",
                      **fields: Any) -> Event:
        """A series master: `start`/`end` are the first occurrence's; `pattern` is Graph's recurrencePattern
        (e.g. {"type": "weekly", "interval": 1, "daysOfWeek": ["monday"]}); the range ends on `until` (a date,
        inclusive), after `count` occurrences, or never; its recurrenceTimeZone is `zone`."""
        first = _aware(start, zone)
        tz = zone_info(zone)
        assert tz is not None, zone
        range_: dict[str, Any] = {"type": "noEnd", "startDate": first.astimezone(tz).date().isoformat(),
                                  "endDate": "0001-01-01", "recurrenceTimeZone": zone, "numberOfOccurrences": 0}
        if until is not None:
            range_.update(type="endDate", endDate=until.isoformat())
        elif count is not None:
            range_.update(type="numbered", numberOfOccurrences=count)
        full_pattern = {"type": "daily", "interval": 1, "month": 0, "dayOfMonth": 0, "firstDayOfWeek": "sunday",
                        "index": "first", "daysOfWeek": [], **pattern}
        return self.create_event(subject, start, end, zone=zone,
                                 recurrence={"pattern": full_pattern, "range": range_}, **fields)

    def copy_event(self, source: Event, **changes: Any) -> Event:
        """This mailbox's copy of a meeting another mailbox holds (an attendee's, a delegate's): its own ids (each
        mailbox's ImmutableIds are its own), the same `iCalUId` (Graph: "a unique identifier for an event across
        calendars"; for a single event or a series master it is the same in every mailbox's copy), the same
        subject, times, zone, recurrence, organizer and attendees unless `changes` says otherwise."""
        fields: dict[str, Any] = {
            "zone": source.zone, "recurrence": copy.deepcopy(source.recurrence), "organizer": dict(source.organizer),
            "attendees": [dict(a) for a in source.attendees], "location": source.location, "body": source.body,
            "online_meeting_url": source.online_meeting_url, **changes}
        return self.create_event(fields.pop("subject", source.subject), fields.pop("start", source.start),
                                 fields.pop("end", source.end), ical_uid=source.ical_uid, **fields)

    def update_event(self, event: Event, **changes: Any) -> Event:
        """Change a single event or a series master (subject, start, end, location, body, recurrence, zone,
        is_cancelled, attendees...). Moving a series' times or pattern drops its exceptions and deletions, as
        Outlook does; its occurrences then get new ids (they embed the original start)."""
        with self._lock:
            zone = changes.get("zone", event.zone)
            for name in ("start", "end"):
                if name in changes:
                    changes[name] = _aware(changes[name], zone)
            reschedules = event.is_series and any(n in changes for n in ("start", "end", "recurrence", "zone"))
            for name, value in changes.items():
                if not hasattr(event, name) or name.startswith("_"):
                    raise AttributeError(f"an event has no field {name!r}")
                setattr(event, name, value)
            if reschedules:
                event.exceptions.clear()
                event.deleted_occurrences.clear()
            self.seq += 1
            event.touch(self._clock(), self.seq)
            self._on_change(self, "updated", self.id_of(event))
            return event

    def delete_event(self, event: Event) -> None:
        """Delete a single event or a whole series."""
        with self._lock:
            del self.events[event.key]
            self.seq += 1
            self._on_change(self, "deleted", self.id_of(event))

    def move_event(self, event: Event) -> None:
        """Move the event to another folder and back: its REST id changes, its ImmutableId does not."""
        with self._lock:
            event.generation += 1
            self.seq += 1
            event.touch(self._clock(), self.seq)

    def edit_occurrence(self, master: Event, original_start: datetime, **changes: Any) -> Instance:
        """Turn an occurrence into an exception (or change an exception): subject, start, end, location, body,
        is_cancelled. It keeps its id and gets `originalStart`. Graph notifies an update of the master."""
        with self._lock:
            original = original_start.astimezone(UTC)
            if not master.occurs_at(original) or original in master.deleted_occurrences:
                raise KeyError(f"no occurrence of the series at {original}")
            for name in ("start", "end"):
                if name in changes:
                    changes[name] = _aware(changes[name], master.zone)
            override = master.exceptions.get(original) or Override(version=0)
            for name, value in changes.items():
                setattr(override, name, value)
            self.seq += 1
            override.version += 1
            override.last_modified = self._clock()
            master.exceptions[original] = override
            master.changed_seq = self.seq
            instance = Instance(master, original, override)
            self._on_change(self, "updated", self.id_of(instance))
            self._on_change(self, "updated", self.id_of(master))
            return instance

    def delete_occurrence(self, master: Event, original_start: datetime, *, silent: bool = True) -> None:
        """Delete one occurrence in Outlook. `silent` (the default, as Graph often behaves): calendarView delta never
        mentions it; only `/events/{master}/instances` shows it gone, and the notification is an update of the
        master. `silent=False`: the next delta round carries `@removed` for it."""
        with self._lock:
            original = original_start.astimezone(UTC)
            if not master.occurs_at(original) and original not in master.exceptions:
                raise KeyError(f"no occurrence of the series at {original}")
            master.deleted_occurrences[original] = silent
            master.exceptions.pop(original, None)
            self.seq += 1
            master.changed_seq = self.seq
            self._on_change(self, "updated", self.id_of(master))

    def occurrence(self, master: Event, original_start: datetime) -> Instance:
        """The instance of the series at this original start (for ids and assertions)."""
        original = original_start.astimezone(UTC)
        return Instance(master, original, master.exceptions.get(original))

    def occurrences(self, master: Event, start: datetime, end: datetime) -> list[Instance]:
        return self.instances(master, start.astimezone(UTC), end.astimezone(UTC))

    def fill(self, count: int, *, start: datetime, spacing: timedelta = timedelta(hours=1),
             duration: timedelta = timedelta(minutes=30), subject: str = "Event {n}") -> list[Event]:
        """Many single events at once (a bench's mailbox), one notification each not queued: bulk data."""
        made = []
        with self._lock:
            hook, self._on_change = self._on_change, lambda *_: None
            try:
                for n in range(count):
                    at = start + n * spacing
                    made.append(self.create_event(subject.format(n=n), at, at + duration, zone="UTC"))
            finally:
                self._on_change = hook
        return made

    def changed_since(self, seq: int) -> Iterable[Event]:
        return (e for e in self.events.values() if e.changed_seq > seq)
