"""Realistic legacy dev.db files for trying the import and for its tests (`tenet meetings legacy-sample`).

`generate` writes a file with the legacy schema (tenet.meetings.legacy.schema): users of the four legacy roles,
weekly series with their occurrences, standalone meetings around `around` (mostly past, some ahead, one
cancelled), required attendees, check-ins on time and late, absences, excuses, guests, templates with attendees
and audit rows. `dirty=True` adds what real legacy files hold and the import must refuse or repair, each one
listed in `Sample.refused` ((table, legacy id) pairs the import must refuse). `evolve` turns a file into "the
newer dev.db of next week": rows changed, added and removed, audit rows only appended (the legacy log is
append-only too). Deterministic for a seed.
"""

from __future__ import annotations

import json
import random
import sqlite3
import string
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tenet.meetings.legacy.schema import DDL

FIRST = ("Alice", "Bo", "Chen", "Dana", "Emeka", "Fatima", "Gao", "Hiro", "Ines", "Jun", "Karin", "Li", "Mateo",
         "Nadia", "Omar", "Priya", "Qiang", "Rosa", "Sven", "Tao", "Uma", "Wei", "Xin", "Yara", "Zhang")
LAST = ("Wong", "Li", "Smith", "Garcia", "Okafor", "Khan", "Tanaka", "Silva", "Muller", "Zhao", "Liu", "Chen")
TOPICS = ("Weekly sync", "Sales review", "Safety briefing", "Quarterly planning", "Design critique",
          "Budget committee", "All hands", "Onboarding", "Incident review", "Roadmap")
ZONES = ("Asia/Shanghai", "America/Los_Angeles", "Europe/Berlin")
CITIES = {"Asia/Shanghai": "Shanghai", "America/Los_Angeles": "Seattle", "Europe/Berlin": "Berlin"}


@dataclass
class Sample:
    path: Path
    counts: dict[str, int] = field(default_factory=dict)
    refused: set[tuple[str, str]] = field(default_factory=set)


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


class _Writer:
    def __init__(self, connection: sqlite3.Connection, rng: random.Random, around: datetime, *,
                 invited: tuple[int, int] = (3, 5)) -> None:
        self.db, self.rng, self.around = connection, rng, around
        self.sample_counts: dict[str, int] = {}
        self.invited = invited  # required attendees of a meeting, at least and at most

    def cuid(self) -> str:
        return "c" + "".join(self.rng.choices(string.ascii_lowercase + string.digits, k=24))

    def insert(self, table: str, **values: Any) -> None:
        columns = ", ".join(f'"{c}"' for c in values)
        marks = ", ".join("?" for _ in values)
        statement = f'INSERT INTO "{table}" ({columns}) VALUES ({marks})'  # noqa: S608 (schema names, ? values)
        self.db.execute(statement, tuple(values.values()))
        self.sample_counts[table] = self.sample_counts.get(table, 0) + 1

    def user(self, index: int, role: str) -> tuple[str, str]:
        first, last = FIRST[index % len(FIRST)], LAST[(index // len(FIRST) + index) % len(LAST)]
        suffix = "" if index < len(FIRST) else str(index)
        email = f"{first}.{last}{suffix}@example.com".lower()
        user_id = self.cuid()
        created = _ms(self.around - timedelta(days=400 - index))
        self.insert("users", id=user_id, email=email, name=f"{first} {last}", role=role, createdAt=created,
                    updatedAt=created)
        return user_id, email

    def meeting(self, meeting_id: str, start: datetime, zone: str, organizer: str, **extra: Any) -> str:
        created = _ms(start - timedelta(days=10))
        values: dict[str, Any] = {
            "id": meeting_id, "title": self.rng.choice(TOPICS), "location": f"Room {self.rng.randint(100, 520)}",
            "city": CITIES[zone], "startTime": _ms(start), "endTime": _ms(start + timedelta(minutes=60)),
            "timezone": zone, "status": "SCHEDULED" if start > self.around else "COMPLETED", "lateGraceMinutes": 5,
            "organizerId": organizer, "createdById": organizer, "createdAt": created, "updatedAt": created,
            "qrCodeOnline": "data:image/png;base64,legacy", "qrCodeOffline": "data:image/png;base64,legacy",
        }
        values.update(extra)
        self.insert("meetings", **values)
        self.audit("MEETING_CREATE", "MEETING", meeting_id, organizer, meeting_id,
                   {"after": {"title": values["title"]}}, created)
        return meeting_id

    def attend(self, meeting_id: str, start: datetime, user_id: str | None, status: str, **extra: Any) -> str:
        attendance_id = self.cuid()
        at = None
        if status == "PRESENT":
            at = start + timedelta(minutes=self.rng.randint(-20, 4))
        elif status == "LATE":
            at = start + timedelta(minutes=self.rng.randint(8, 40))
        values: dict[str, Any] = {
            "id": attendance_id, "meetingId": meeting_id, "userId": user_id, "status": status,
            "checkInTime": _ms(at) if at else None,
            "checkInMode": self.rng.choice(("ONLINE", "OFFLINE")) if at else None,
            "deviceId": f"dev-{self.rng.getrandbits(48):012x}" if at else None,
            "note": "Travelling to the customer" if status == "EXCUSED" else None,
            "createdAt": _ms(at or start), "updatedAt": _ms(at or start)}
        values.update(extra)
        self.insert("attendances", **values)
        return attendance_id

    def audit(self, action: str, entity: str, entity_id: str, user_id: str | None, meeting_id: str | None,
              changes: dict[str, Any] | str | None, at: int) -> None:
        self.insert("audit_logs", action=action, entityType=entity, entityId=entity_id, userId=user_id,
                    meetingId=meeting_id, changes=changes if isinstance(changes, str) or changes is None
                    else json.dumps(changes), ipAddress="10.0.0.7", userAgent="Mozilla/5.0", createdAt=at)


def _people(writer: _Writer, size: int) -> tuple[list[str], list[str]]:
    count = max(8, size // 2 + 6)
    roles = ["ADMIN", "MANAGER", "MANAGER", "LEADER"] + ["EMPLOYEE"] * (count - 4)
    made = [writer.user(i, role) for i, role in enumerate(roles)]
    return [u for u, _ in made], [e for _, e in made]


def _attendees_and_attendances(writer: _Writer, meeting_id: str, start: datetime, people: list[str]) -> None:
    rng = writer.rng
    invited = rng.sample(people[3:], k=min(len(people) - 3, rng.randint(*writer.invited)))
    for user_id in invited:
        writer.insert("meeting_required_attendees", id=writer.cuid(), meetingId=meeting_id, userId=user_id,
                      createdAt=_ms(start - timedelta(days=9)))
    if start > writer.around:
        return
    for user_id in invited:
        status = rng.choices(("PRESENT", "LATE", "ABSENT", "EXCUSED"), weights=(6, 2, 1, 1))[0]
        writer.attend(meeting_id, start, user_id, status)
    if rng.random() < 0.4:
        writer.attend(meeting_id, start, None, "PRESENT", guestName=f"{rng.choice(FIRST)} Visitor",
                      guestEmail=f"visitor{rng.randint(1, 999)}@partner.example", guestOrganization="Partner Co")


def _series(writer: _Writer, people: list[str], count: int) -> None:
    for index in range(count):
        zone = ZONES[index % len(ZONES)]
        first = (writer.around - timedelta(days=21 + 7 * (index % 8) + index // 8)).replace(
            hour=1 + index % 20, minute=0, second=0, microsecond=0)
        series_id = writer.cuid()
        occurrences = 6
        writer.insert("meeting_series", id=series_id, title=f"Team {TOPICS[index % len(TOPICS)]}", location="Room 301",
                      city=CITIES[zone], timezone=zone, recurrenceRule=f"FREQ=WEEKLY;COUNT={occurrences}",
                      startTime=_ms(first), endTime=_ms(first + timedelta(minutes=60)), lateGraceMinutes=5,
                      organizerId=people[1], createdById=people[1], createdAt=_ms(first - timedelta(days=3)),
                      updatedAt=_ms(first - timedelta(days=3)))
        for week in range(occurrences):
            start = first + timedelta(days=7 * week)
            meeting_id = writer.meeting(writer.cuid(), start, zone, people[1], seriesId=series_id)
            _attendees_and_attendances(writer, meeting_id, start, people)


def _templates(writer: _Writer, people: list[str]) -> None:
    for index, label in enumerate(("Weekly sync (default)", "Board meeting")):
        template_id = writer.cuid()
        writer.insert("templates", id=template_id, name=label, title=label.split(" (")[0], location="Room 200",
                      city="Shanghai", timezone="Asia/Shanghai", durationMinutes=60 + 30 * index, lateGraceMinutes=5,
                      createdById=people[1], createdAt=_ms(writer.around - timedelta(days=90)),
                      updatedAt=_ms(writer.around - timedelta(days=90)))
        for user_id in people[4 + index:7 + index]:
            writer.insert("template_attendees", id=writer.cuid(), templateId=template_id, userId=user_id,
                          createdAt=_ms(writer.around - timedelta(days=90)))


def generate(path: Path, *, size: int = 20, dirty: bool = False, seed: int = 1,
             around: datetime | None = None, invited: tuple[int, int] = (3, 5)) -> Sample:
    """Write a new legacy file at `path` (replaced if present) with about `size` meetings, each with between
    `invited` required attendees (and as many attendance rows, once it has taken place)."""
    around = (around or datetime.now(UTC)).astimezone(UTC)
    path.unlink(missing_ok=True)
    connection = sqlite3.connect(path)
    try:
        connection.executescript(DDL)
        writer = _Writer(connection, random.Random(seed), around, invited=invited)
        people, _ = _people(writer, size)
        series_count = max(1, size // 12)
        _series(writer, people, series_count)
        standalone = max(1, size - 6 * series_count)
        for index in range(standalone):
            zone = ZONES[index % len(ZONES)]
            start = (around - timedelta(days=60) + timedelta(days=74 * index / standalone)).replace(
                minute=0, second=0, microsecond=0)
            extra: dict[str, Any] = {}
            if index == standalone - 2:
                extra = {"status": "CANCELLED", "cancelledAt": _ms(start - timedelta(days=2)),
                         "cancelReason": "Room unavailable"}
            meeting_id = writer.meeting(writer.cuid() if index else "5f0c" + "a1" * 14, start, zone,
                                        people[1 + index % 2], **extra)
            _attendees_and_attendances(writer, meeting_id, start, people)
        _templates(writer, people)
        sample = Sample(path)
        if dirty:
            from tenet.meetings.legacy.dirty import add_dirty_rows

            sample.refused = add_dirty_rows(writer, people)
        connection.commit()
        sample.counts = dict(writer.sample_counts)
        return sample
    finally:
        connection.close()


def evolve(path: Path, *, seed: int = 2) -> dict[str, int]:
    """The next week's dev.db: meeting titles and a start changed, a future meeting cancelled, a meeting and an
    attendance removed, a user renamed, a new user with a new meeting and check-ins, a template attendee removed,
    audit rows appended. Answers what changed, by kind."""
    from tenet.meetings.legacy.dirty import evolve_rows

    connection = sqlite3.connect(path)
    try:
        changed = evolve_rows(connection, random.Random(seed))
        connection.commit()
        return changed
    finally:
        connection.close()
