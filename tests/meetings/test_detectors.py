"""Detectors see what the database cannot refuse row by row: crafted states (written with raw SQL, as a
buggy script would) must be reported by their rule's detector, and only by it."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from sqlalchemy import text

from tenet.kernel.invariants import check, get
from tests.meetings.test_bypass import CHECKIN, T0, _meeting, _user


async def _violations(db, rule: str, now=None) -> int:
    async with db.read_only() as session:
        if now is not None:
            await session.execute(text("SELECT set_config('tenet.now', :now, true)"), {"now": now.isoformat()})
        found = await check(await session.connection(), [get(rule)])
    return found[0].rows if found else 0


async def _sql(db, sql: str, params: dict) -> None:
    async with db.unit_of_work() as session:
        await session.execute(text(sql), params)


@pytest.mark.invariant("MA-INV-19")
async def test_a_deleted_account_left_on_a_future_list_is_reported(db):
    organizer, attendee = await _user(db), await _user(db)
    past = await _meeting(db, organizer, start=T0 - timedelta(days=7), end=T0 - timedelta(days=7, hours=-1))
    future = await _meeting(db, organizer, start=T0 + timedelta(days=7), end=T0 + timedelta(days=7, hours=1))
    for meeting in (past, future):
        await _sql(db, "INSERT INTO meeting_attendance.meeting_required_attendees (meeting_id, user_id, added_at) "
                       "VALUES (:m, :u, :t)", {"m": meeting, "u": attendee, "t": T0})
    assert await _violations(db, "MA-INV-19") == 0
    await _sql(db, "UPDATE iam.user_account SET status = 'deleted', deleted_at = :t WHERE id = :u",
               {"u": attendee, "t": T0})
    # The past meeting keeps the deleted account on purpose (history); the future one must not.
    assert await _violations(db, "MA-INV-19") == 1
    await _sql(db, "DELETE FROM meeting_attendance.meeting_required_attendees WHERE meeting_id = :m", {"m": future})
    assert await _violations(db, "MA-INV-19") == 0


@pytest.mark.invariant("MA-INV-11")
async def test_a_checkin_without_its_scan_is_reported(db):
    user = await _user(db)
    meeting = await _meeting(db, user)
    await _sql(db, CHECKIN, {"id": uuid.uuid4(), "m": meeting, "u": user, "device": "device-0001", "at": T0})
    assert await _violations(db, "MA-INV-11") == 1


@pytest.mark.invariant("MA-INV-15")
async def test_a_live_meeting_without_its_codes_is_reported(db):
    user = await _user(db)
    await _meeting(db, user)
    assert await _violations(db, "MA-INV-15") == 2  # online and offline


@pytest.mark.invariant("MA-INV-13")
async def test_a_guest_kept_past_retention_is_reported_by_the_rule_clock(db):
    user = await _user(db)
    meeting = await _meeting(db, user)
    guest = uuid.uuid4()
    await _sql(db, "INSERT INTO meeting_attendance.guests (id, meeting_id, name, identity_digest, created_at) "
                   "VALUES (:g, :m, 'Gus', :d, :t)", {"g": guest, "m": meeting, "d": "sha256:" + "1" * 64, "t": T0})
    await _sql(db, "INSERT INTO meeting_attendance.attendances (id, meeting_id, subject_type, guest_id, status, "
                   "status_source, mode, checked_in_at, created_at, updated_at) VALUES (:id, :m, 'GUEST', :g, "
                   "'PRESENT', 'CHECK_IN', 'offline', :t, :t, :t)", {"id": uuid.uuid4(), "m": meeting, "g": guest,
                                                                      "t": T0})
    ended = T0 + timedelta(hours=1)
    assert await _violations(db, "MA-INV-13", now=ended + timedelta(days=91)) == 0  # one day of slack
    assert await _violations(db, "MA-INV-13", now=ended + timedelta(days=91, seconds=1)) == 1


@pytest.mark.invariant("MA-INV-17")
async def test_a_future_meeting_of_a_deleted_series_is_reported(db):
    user = await _user(db)
    series = uuid.uuid4()
    await _sql(db, "INSERT INTO meeting_attendance.meeting_series (id, title, timezone, rrule, start_date, "
                   "start_local_time, duration_minutes, organizer_id, late_grace_minutes, checkin_opens_minutes_before,"
                   " status, deleted_at, created_by_id, created_at, updated_at) VALUES (:id, 'S', 'UTC', "
                   "'FREQ=DAILY;COUNT=2', '2026-03-02', '17:00', 60, :u, 5, 30, 'DELETED', :t, :u, :t, :t)",
               {"id": series, "u": user, "t": T0 + timedelta(minutes=1)})
    # Last scheduled at T0, before the series was deleted, and starting a day after: it should have gone with it.
    meeting = await _meeting(db, user, tz="UTC", start=T0 + timedelta(days=1), end=T0 + timedelta(days=1, hours=1))
    await _sql(db, "UPDATE meeting_attendance.meetings SET series_id = :s, series_occurrence_date = '2026-03-02' "
                   "WHERE id = :m", {"s": series, "m": meeting})
    assert await _violations(db, "MA-INV-17") == 1
