"""The dirty rows of a sample file and the evolution to a newer file (tenet.meetings.legacy.sample).

Each dirty row is something a real dev.db holds: the same person twice with the email typed in another case and
with spaces, an address that is no address, a role the new system does not know, attendees who are not users,
foreign keys into nothing, meetings that end before they start or carry text for a time, a zone abbreviation, an
unbounded recurrence, a check-in hours after the meeting ended. Ids that must sort last (so the row the import
keeps is known) start with "z".
"""

from __future__ import annotations

import json
import random
import sqlite3
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tenet.meetings.legacy.sample import _Writer


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _one(db: sqlite3.Connection, sql: str, params: tuple = ()) -> tuple | None:
    return db.execute(sql, params).fetchone()


def _people_rows(writer: _Writer, people: list[str], refused: set[tuple[str, str]]) -> None:
    db = writer.db
    email = _one(db, 'SELECT "email" FROM "users" WHERE "id" = ?', (people[5],))[0]  # type: ignore[index]
    twin = "zz" + writer.cuid()[2:]
    writer.insert("users", id=twin, email=f"  {email.upper()} ", name="Duplicate typed in capitals", role="EMPLOYEE",
                  createdAt=_ms(writer.around - timedelta(days=30)), updatedAt=_ms(writer.around - timedelta(days=30)))
    taken = _one(db, 'SELECT "meetingId", "checkInTime" FROM "attendances" WHERE "userId" = ? AND '
                     "\"status\" = 'PRESENT' ORDER BY \"id\" LIMIT 1", (people[5],))
    if taken:
        attendance = "zz" + writer.cuid()[2:]
        writer.insert("attendances", id=attendance, meetingId=taken[0], userId=twin, status="PRESENT",
                      checkInTime=taken[1], checkInMode="ONLINE", createdAt=taken[1], updatedAt=taken[1])
        refused.add(("attendances", attendance))
    odd_role = writer.cuid()
    writer.insert("users", id=odd_role, email="supervisor.sam@example.com", name="Sam Supervisor", role="SUPERVISOR",
                  createdAt=_ms(writer.around), updatedAt=_ms(writer.around))
    bad_email = writer.cuid()
    writer.insert("users", id=bad_email, email="not-an-email", name="Broken Address", role="EMPLOYEE",
                  createdAt=_ms(writer.around), updatedAt=_ms(writer.around))
    refused.add(("users", bad_email))


def _meeting_rows(writer: _Writer, people: list[str], refused: set[tuple[str, str]]) -> None:
    start = (writer.around - timedelta(days=5)).replace(minute=0, second=0, microsecond=0)
    backwards = writer.meeting(writer.cuid(), start, "Asia/Shanghai", people[1],
                               endTime=_ms(start - timedelta(hours=1)))
    refused.add(("meetings", backwards))
    attendee, attendance = writer.cuid(), writer.cuid()
    writer.insert("meeting_required_attendees", id=attendee, meetingId=backwards, userId=people[4],
                  createdAt=_ms(start))
    writer.insert("attendances", id=attendance, meetingId=backwards, userId=people[4], status="PRESENT",
                  checkInTime=_ms(start), checkInMode="OFFLINE", createdAt=_ms(start), updatedAt=_ms(start))
    refused |= {("meeting_required_attendees", attendee), ("attendances", attendance)}
    garbled = writer.meeting(writer.cuid(), start, "Asia/Shanghai", people[1], startTime="next tuesday")
    zone = writer.meeting(writer.cuid(), start, "Asia/Shanghai", people[1], timezone="PST")
    refused |= {("meetings", garbled), ("meetings", zone)}
    # Imported: a series id into nothing (the meeting stands alone) and an id Tenet cannot keep (a new one, mapped).
    writer.meeting(writer.cuid(), start + timedelta(days=1), "Europe/Berlin", people[2],
                   seriesId="cnosuchseries0000000000000")
    writer.meeting("legacy-meeting-0001", start + timedelta(days=2), "Europe/Berlin", people[2])
    unbounded = writer.cuid()
    writer.insert("meeting_series", id=unbounded, title="Forever stand-up", timezone="Europe/Berlin",
                  recurrenceRule="RRULE:FREQ=WEEKLY;BYDAY=MO", startTime=_ms(start),
                  endTime=_ms(start + timedelta(minutes=15)),
                  organizerId=people[2], createdById=people[2], createdAt=_ms(start), updatedAt=_ms(start))
    refused.add(("meeting_series", unbounded))
    writer.meeting(writer.cuid(), start + timedelta(days=3), "Europe/Berlin", people[2], seriesId=unbounded)


def _attendance_rows(writer: _Writer, people: list[str], refused: set[tuple[str, str]]) -> None:
    db = writer.db
    meeting_id, start_ms, end_ms = _one(db, 'SELECT "id", "startTime", "endTime" FROM "meetings" WHERE "startTime" < ? '
                                            "AND \"status\" = 'COMPLETED' ORDER BY \"id\" LIMIT 1",
                                        (_ms(writer.around - timedelta(days=1)),))  # type: ignore[misc]
    nobody, ghost, dangling = writer.cuid(), writer.cuid(), writer.cuid()
    writer.insert("meeting_required_attendees", id=nobody, meetingId=meeting_id, userId=None,
                  email="visitor@partner.example", name="A Visitor", createdAt=start_ms)
    writer.insert("meeting_required_attendees", id=ghost, meetingId=meeting_id, userId="cghostuser000000000000000",
                  createdAt=start_ms)
    by_email = writer.cuid()
    writer.insert("meeting_required_attendees", id=by_email, meetingId=meeting_id, userId=None,
                  email="ALICE.WONG@example.com", createdAt=start_ms)
    writer.insert("meeting_required_attendees", id=dangling, meetingId="cnosuchmeeting00000000000", userId=people[4],
                  createdAt=start_ms)
    refused |= {("meeting_required_attendees", k) for k in (nobody, ghost, dangling)}
    unknown_user, orphan, outside, odd_status = writer.cuid(), writer.cuid(), writer.cuid(), writer.cuid()
    writer.insert("attendances", id=unknown_user, meetingId=meeting_id, userId="cghostuser000000000000000",
                  status="PRESENT", checkInTime=start_ms, checkInMode="ONLINE", createdAt=start_ms, updatedAt=start_ms)
    writer.insert("attendances", id=orphan, meetingId="cnosuchmeeting00000000000", userId=people[6], status="PRESENT",
                  checkInTime=start_ms, checkInMode="ONLINE", createdAt=start_ms, updatedAt=start_ms)
    writer.insert("attendances", id=outside, meetingId=meeting_id, userId=people[0], status="LATE",
                  checkInTime=end_ms + 3 * 3_600_000, checkInMode="OFFLINE", createdAt=end_ms, updatedAt=end_ms)
    writer.insert("attendances", id=odd_status, meetingId=meeting_id, userId=people[2], status="MAYBE",
                  createdAt=end_ms, updatedAt=end_ms)
    refused |= {("attendances", k) for k in (unknown_user, orphan, outside, odd_status)}


def _other_rows(writer: _Writer, people: list[str], refused: set[tuple[str, str]]) -> None:
    dangling = writer.cuid()
    writer.insert("template_attendees", id=dangling, templateId="cnosuchtemplate0000000000", userId=people[4],
                  createdAt=_ms(writer.around))
    refused.add(("template_attendees", dangling))
    writer.audit("MEETING_UPDATE", "MEETING", "cnosuchmeeting00000000000", people[1], None,
                 {"before": {"email": "alice.wong@example.com", "title": "Old"}, "after": {"title": "New"}},
                 _ms(writer.around))
    writer.audit("USER_LOGIN", "USER", people[3], people[3], None, "{not json", _ms(writer.around))
    writer.db.execute('INSERT INTO "audit_logs" ("action", "entityType", "entityId", "createdAt") VALUES '
                      "('MEETING_DELETE', 'MEETING', 'x', 'yesterday')")
    refused.add(("audit_logs", str(writer.db.execute("SELECT last_insert_rowid()").fetchone()[0])))


def add_dirty_rows(writer: _Writer, people: list[str]) -> set[tuple[str, str]]:
    refused: set[tuple[str, str]] = set()
    _people_rows(writer, people, refused)
    _meeting_rows(writer, people, refused)
    _attendance_rows(writer, people, refused)
    _other_rows(writer, people, refused)
    return refused


def evolve_rows(db: sqlite3.Connection, rng: random.Random) -> dict[str, int]:
    now = int(db.execute('SELECT max("updatedAt") FROM "meetings"').fetchone()[0]) + 60_000
    changed = {"renamed_meetings": 0, "moved": 0, "cancelled": 0, "removed_meetings": 0, "removed_attendances": 0,
               "added_meetings": 0}
    past = [r[0] for r in db.execute(
        'SELECT "id" FROM "meetings" WHERE "status" = \'COMPLETED\' ORDER BY "id" LIMIT 2')]
    for meeting_id in past:
        db.execute('UPDATE "meetings" SET "title" = "title" || \' (revised)\', "updatedAt" = ? WHERE "id" = ?',
                   (now, meeting_id))
        changed["renamed_meetings"] += 1
    future = [r[0] for r in db.execute(
        'SELECT "id" FROM "meetings" WHERE "status" = \'SCHEDULED\' ORDER BY "startTime"')]
    if len(future) >= 3:
        db.execute('UPDATE "meetings" SET "startTime" = "startTime" + 3600000, "endTime" = "endTime" + 3600000 '
                   'WHERE "id" = ?', (future[0],))
        db.execute('UPDATE "meetings" SET "status" = \'CANCELLED\', "cancelledAt" = ?, "cancelReason" = ? '
                   'WHERE "id" = ?',
                   (now, "Moved to next quarter", future[1]))
        db.execute('DELETE FROM "meeting_required_attendees" WHERE "meetingId" = ?', (future[2],))
        db.execute('DELETE FROM "meetings" WHERE "id" = ?', (future[2],))
        changed.update(moved=1, cancelled=1, removed_meetings=1)
    gone = db.execute(
        "SELECT \"id\" FROM \"attendances\" WHERE \"status\" = 'PRESENT' ORDER BY \"id\" LIMIT 1").fetchone()
    if gone:
        db.execute('DELETE FROM "attendances" WHERE "id" = ?', gone)
        changed["removed_attendances"] = 1
    db.execute('UPDATE "users" SET "name" = "name" || \' Jr.\', "updatedAt" = ? WHERE "id" = '
               "(SELECT \"id\" FROM \"users\" WHERE \"role\" = 'EMPLOYEE' ORDER BY \"id\" LIMIT 1)", (now,))
    db.execute('DELETE FROM "template_attendees" WHERE "id" = (SELECT min("id") FROM "template_attendees")')
    newcomer = f"cnewcomer{rng.getrandbits(60):015x}"[:25]
    db.execute('INSERT INTO "users" ("id", "email", "name", "role", "createdAt", "updatedAt") '
               'VALUES (?, ?, ?, ?, ?, ?)',
               (newcomer, "nina.newcomer@example.com", "Nina Newcomer", "LEADER", now, now))
    start = datetime.fromtimestamp(now / 1000, tz=UTC).replace(minute=0, second=0, microsecond=0) - timedelta(days=2)
    meeting_id = f"cnewmeeting{rng.getrandbits(56):014x}"[:25]
    db.execute('INSERT INTO "meetings" ("id", "title", "startTime", "endTime", "timezone", "status", "organizerId", '
               '"createdById", "createdAt", "updatedAt") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
               (meeting_id, "Newcomer welcome", _ms(start), _ms(start + timedelta(hours=1)), "Asia/Shanghai",
                "COMPLETED", newcomer, newcomer, now, now))
    db.execute('INSERT INTO "meeting_required_attendees" ("id", "meetingId", "userId", "createdAt") '
               'VALUES (?, ?, ?, ?)',
               (f"cnewattendee{rng.getrandbits(52):013x}"[:25], meeting_id, newcomer, now))
    db.execute('INSERT INTO "attendances" ("id", "meetingId", "userId", "status", "checkInTime", "checkInMode", '
               '"createdAt", "updatedAt") VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
               (f"cnewattendance{rng.getrandbits(44):011x}"[:25], meeting_id, newcomer, "PRESENT",
                _ms(start + timedelta(minutes=2)), "ONLINE", now, now))
    db.execute('INSERT INTO "audit_logs" ("action", "entityType", "entityId", "userId", "meetingId", "changes", '
               '"createdAt") VALUES (?, ?, ?, ?, ?, ?, ?)',
               ("MEETING_CREATE", "MEETING", meeting_id, newcomer, meeting_id,
                json.dumps({"after": {"title": "Newcomer welcome"}}), now))
    changed["added_meetings"] = 1
    return changed
