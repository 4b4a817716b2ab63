"""Bypass tests: illegal rows written with raw SQL, past the service, must be refused by PostgreSQL itself
(INVARIANTS.md §3). Each names the constraint, index or trigger that refuses it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from tenet.kernel.db_errors import violated_constraint

T0 = datetime(2026, 3, 2, 17, 0, tzinfo=UTC)
HASH = "$argon2id$v=19$m=1024,t=1,p=1$c2FsdA$aGFzaA"  # never verified: these accounts never sign in


async def _user(db) -> uuid.UUID:
    user_id = uuid.uuid4()
    async with db.unit_of_work() as session:
        await session.execute(text(
            "INSERT INTO iam.user_account (id, email, email_normalized, email_normalization, display_name, "
            "password_hash, status, created_at, updated_at) VALUES (:id, :e, :e, 'email-v1', 'Bypass', :h, "
            "'active', :t, :t)"), {"id": user_id, "e": f"{user_id}@example.com", "t": T0, "h": HASH})
    return user_id


MEETING_COLUMNS = ("id, title, start_time, end_time, timezone, organizer_id, late_grace_minutes, "
                   "checkin_opens_minutes_before, status, schedule_changed_at, created_by_id, created_at, updated_at")


async def _meeting(db, user_id: uuid.UUID, **overrides) -> str:
    values = {"id": uuid.uuid4().hex, "title": "Weekly", "start": T0, "end": T0 + timedelta(hours=1),
              "tz": "America/Los_Angeles", "grace": 5, "opens": 30, "status": "ACTIVE", **overrides}
    async with db.unit_of_work() as session:
        await session.execute(text(
            f"INSERT INTO meeting_attendance.meetings ({MEETING_COLUMNS}) VALUES (:id, :title, :start, :end, :tz, "
            ":u, :grace, :opens, :status, :t, :u, :t, :t)"), {**values, "u": user_id, "t": T0})
    return values["id"]


async def _refused(db, sql: str, params: dict, name: str, *, immediate: bool = False) -> None:
    with pytest.raises(DBAPIError) as caught:
        async with db.unit_of_work() as session:
            await session.execute(text(sql), params)
            if immediate:
                # Deferred constraint triggers fire at COMMIT; the test's outer transaction never commits.
                await session.execute(text("SET CONSTRAINTS ALL IMMEDIATE"))
    diag = getattr(caught.value.orig, "diag", None)
    assert getattr(diag, "constraint_name", None) == name or violated_constraint(caught.value) == name, (
        f"refused, but not by {name}: {caught.value.orig}")


CHECKIN = ("INSERT INTO meeting_attendance.attendances (id, meeting_id, subject_type, user_id, status, "
           "status_source, mode, device_id, checked_in_at, created_at, updated_at) VALUES "
           "(:id, :m, 'USER', :u, 'PRESENT', 'CHECK_IN', 'offline', :device, :at, :at, :at)")


CANCEL = ("UPDATE meeting_attendance.meetings SET status = 'CANCELLED', cancelled_at = :t, cancelled_by_id = :u "
          "WHERE id = :m")


@pytest.fixture
async def user(db) -> uuid.UUID:
    return await _user(db)


@pytest.fixture
async def meeting(db, user) -> str:
    return await _meeting(db, user)


class TestMeetingRows:
    @pytest.mark.invariant("MA-INV-01")
    async def test_a_guessable_id_is_refused(self, db, user):
        with pytest.raises(DBAPIError, match="ck_meetings_id_format"):
            await _meeting(db, user, id="1001")

    @pytest.mark.invariant("MA-INV-02")
    @pytest.mark.parametrize(("overrides", "name"), [
        ({"end": T0}, "ck_meetings_time_order"),
        ({"end": T0 + timedelta(days=7, seconds=1)}, "ck_meetings_duration"),
        ({"tz": "UTC+8"}, "ck_meetings_timezone_shape"),
        ({"grace": 241}, "ck_meetings_late_grace_range"),
        ({"opens": -1}, "ck_meetings_checkin_opens_range"),
        ({"title": "   "}, "ck_meetings_title_length"),
    ])
    async def test_an_impossible_time_model_is_refused(self, db, user, overrides, name):
        with pytest.raises(DBAPIError, match=name):
            await _meeting(db, user, **overrides)

    @pytest.mark.invariant("MA-INV-02")
    async def test_a_window_closing_before_it_opens_is_refused(self, db, meeting):
        await _refused(db, "UPDATE meeting_attendance.meetings SET checkin_closes_at = start_time - interval '1 hour' "
                           "WHERE id = :m", {"m": meeting}, "ck_meetings_checkin_window_order")

    @pytest.mark.invariant("MA-INV-03")
    async def test_a_cancelled_meeting_never_becomes_active_again(self, db, meeting, user):
        async with db.unit_of_work() as session:
            await session.execute(text(CANCEL), {"m": meeting, "t": T0, "u": user})
        await _refused(db, "UPDATE meeting_attendance.meetings SET status = 'ACTIVE', cancelled_at = NULL "
                           "WHERE id = :m", {"m": meeting}, "meetings_terminal_is_final")

    @pytest.mark.invariant("MA-INV-03")
    async def test_a_deleted_meeting_stays_deleted(self, db, meeting):
        async with db.unit_of_work() as session:
            await session.execute(text("UPDATE meeting_attendance.meetings SET status = 'DELETED', deleted_at = :t "
                                       "WHERE id = :m"), {"m": meeting, "t": T0})
        await _refused(db, "UPDATE meeting_attendance.meetings SET status = 'ACTIVE', deleted_at = NULL WHERE id = :m",
                       {"m": meeting}, "meetings_terminal_is_final")

    @pytest.mark.invariant("MA-INV-03")
    async def test_a_clock_status_cannot_be_stored(self, db, meeting):
        await _refused(db, "UPDATE meeting_attendance.meetings SET status = 'COMPLETED' WHERE id = :m",
                       {"m": meeting}, "ck_meetings_status")

    @pytest.mark.invariant("MA-INV-04")
    async def test_an_attendee_twice_is_refused(self, db, meeting, user):
        sql = ("INSERT INTO meeting_attendance.meeting_required_attendees (meeting_id, user_id, added_at) "
               "VALUES (:m, :u, :t)")
        async with db.unit_of_work() as session:
            await session.execute(text(sql), {"m": meeting, "u": user, "t": T0})
        await _refused(db, sql, {"m": meeting, "u": user, "t": T0}, "pk_meeting_required_attendees")

    @pytest.mark.invariant("MA-INV-04")
    async def test_an_attendee_who_is_not_an_account_is_refused(self, db, meeting):
        await _refused(db, "INSERT INTO meeting_attendance.meeting_required_attendees (meeting_id, user_id, added_at) "
                           "VALUES (:m, :u, :t)", {"m": meeting, "u": uuid.uuid4(), "t": T0},
                       "fk_meeting_required_attendees_user_id_user_account")


class TestAttendanceRows:
    async def _checkin(self, db, meeting, user, at=T0, device="device-0001") -> uuid.UUID:
        attendance_id = uuid.uuid4()
        async with db.unit_of_work() as session:
            await session.execute(text(CHECKIN), {"id": attendance_id, "m": meeting, "u": user, "device": device,
                                                  "at": at})
        return attendance_id

    @pytest.mark.invariant("MA-INV-06")
    async def test_a_second_live_attendance_of_one_user_is_refused(self, db, meeting, user):
        await self._checkin(db, meeting, user)
        await _refused(db, CHECKIN, {"id": uuid.uuid4(), "m": meeting, "u": user, "device": "device-0002", "at": T0},
                       "uq_attendances_meeting_user_live")

    @pytest.mark.invariant("MA-INV-07")
    async def test_one_device_for_a_second_person_is_refused(self, db, meeting, user):
        other = await _user(db)
        await self._checkin(db, meeting, user)
        await _refused(db, CHECKIN, {"id": uuid.uuid4(), "m": meeting, "u": other, "device": "device-0001", "at": T0},
                       "uq_attendances_meeting_device_live")

    @pytest.mark.invariant("MA-INV-07")
    async def test_a_device_id_of_another_shape_is_refused(self, db, meeting, user):
        await _refused(db, CHECKIN, {"id": uuid.uuid4(), "m": meeting, "u": user, "device": "short", "at": T0},
                       "ck_attendances_device_id_shape")

    @pytest.mark.invariant("MA-INV-08")
    @pytest.mark.parametrize("offset", [timedelta(minutes=-30, seconds=-1), timedelta(hours=1)])
    async def test_a_checkin_outside_the_window_is_refused(self, db, meeting, user, offset):
        await _refused(db, CHECKIN, {"id": uuid.uuid4(), "m": meeting, "u": user, "device": "device-0001",
                                     "at": T0 + offset}, "attendances_checkin_window")

    @pytest.mark.invariant("MA-INV-08")
    async def test_a_checkin_on_a_cancelled_meeting_is_refused(self, db, meeting, user):
        async with db.unit_of_work() as session:
            await session.execute(text(CANCEL), {"m": meeting, "t": T0, "u": user})
        await _refused(db, CHECKIN, {"id": uuid.uuid4(), "m": meeting, "u": user, "device": "device-0001", "at": T0},
                       "attendances_meeting_active")

    @pytest.mark.invariant("MA-INV-09")
    async def test_the_database_decides_lateness_whatever_the_writer_says(self, db, meeting, user):
        """The writer says PRESENT; one second after start + grace, the trigger stores LATE."""
        late = await self._checkin(db, meeting, user, at=T0 + timedelta(minutes=5, seconds=1))
        on_time = await self._checkin(db, meeting, await _user(db), at=T0 + timedelta(minutes=5), device="device-0002")
        async with db.read_only() as session:
            rows = dict((await session.execute(text(
                "SELECT id, status FROM meeting_attendance.attendances WHERE id IN (:a, :b)"),
                {"a": late, "b": on_time})).all())
        assert rows == {late: "LATE", on_time: "PRESENT"}

    @pytest.mark.invariant("MA-INV-09")
    async def test_moving_the_start_recomputes_lateness(self, db, meeting, user):
        attendance = await self._checkin(db, meeting, user, at=T0 + timedelta(minutes=20))
        async with db.unit_of_work() as session:
            await session.execute(text("UPDATE meeting_attendance.meetings SET start_time = start_time + "
                                       "interval '30 minutes' WHERE id = :m"), {"m": meeting})
            status = (await session.execute(text("SELECT status FROM meeting_attendance.attendances WHERE id = :a"),
                                            {"a": attendance})).scalar_one()
        assert status == "PRESENT"

    @pytest.mark.invariant("MA-INV-10")
    async def test_a_voided_attendance_stays_voided(self, db, meeting, user):
        attendance = await self._checkin(db, meeting, user)
        async with db.unit_of_work() as session:
            await session.execute(text("UPDATE meeting_attendance.attendances SET status = 'VOIDED', voided_at = :t, "
                                       "voided_by_id = :u WHERE id = :a"), {"a": attendance, "t": T0, "u": user})
        await _refused(db, "UPDATE meeting_attendance.attendances SET status = 'PRESENT', voided_at = NULL, "
                           "voided_by_id = NULL WHERE id = :a", {"a": attendance}, "attendances_voided_is_final")

    @pytest.mark.invariant("MA-INV-10")
    async def test_an_excused_guest_and_a_two_headed_row_are_refused(self, db, meeting, user):
        await _refused(db, "INSERT INTO meeting_attendance.attendances (id, meeting_id, subject_type, user_id, "
                           "guest_id, status, status_source, created_at, updated_at) VALUES (:id, :m, 'USER', :u, :g, "
                           "'EXCUSED', 'MANUAL', :t, :t)",
                       {"id": uuid.uuid4(), "m": meeting, "u": user, "g": uuid.uuid4(), "t": T0},
                       "ck_attendances_subject")

    @pytest.mark.invariant("MA-INV-11")
    async def test_a_refused_scan_without_its_reason_is_refused(self, db, meeting):
        await _refused(db, "INSERT INTO meeting_attendance.checkin_scans (meeting_id, occurred_at, channel, outcome) "
                           "VALUES (:m, :t, 'GUEST', 'REFUSED')", {"m": meeting, "t": T0},
                       "ck_checkin_scans_refused_has_reason")

    @pytest.mark.invariant("MA-INV-12")
    async def test_an_excuse_without_a_note_is_refused(self, db, meeting, user):
        attendance = await self._checkin(db, meeting, user)
        await _refused(db, "INSERT INTO meeting_attendance.attendance_corrections (id, attendance_id, to_status, note, "
                           "actor_id, occurred_at) VALUES (:id, :a, 'EXCUSED', '  ', :u, :t)",
                       {"id": uuid.uuid4(), "a": attendance, "u": user, "t": T0},
                       "ck_attendance_corrections_note_required")

    @pytest.mark.invariant("MA-INV-13")
    async def test_a_guest_without_an_attendance_is_refused_at_commit(self, db, meeting):
        await _refused(db, "INSERT INTO meeting_attendance.guests (id, meeting_id, name, identity_digest, created_at) "
                           "VALUES (:id, :m, 'Gus', :d, :t)",
                       {"id": uuid.uuid4(), "m": meeting, "d": "sha256:" + "0" * 64, "t": T0},
                       "guests_have_attendance", immediate=True)

    @pytest.mark.invariant("MA-INV-13")
    async def test_an_erased_guest_keeping_an_email_is_refused(self, db, meeting):
        await _refused(db, "INSERT INTO meeting_attendance.guests (id, meeting_id, email, created_at, erased_at) "
                           "VALUES (:id, :m, 'gus@example.com', :t, :t)", {"id": uuid.uuid4(), "m": meeting, "t": T0},
                       "ck_guests_erased_consistent")

    @pytest.mark.invariant("MA-INV-14")
    async def test_a_code_step_on_an_offline_scan_is_refused(self, db, meeting):
        await _refused(db, "INSERT INTO meeting_attendance.checkin_scans (meeting_id, occurred_at, channel, mode, "
                           "outcome, reason, code_step) VALUES (:m, :t, 'GUEST', 'offline', 'REFUSED', 'X', 5)",
                       {"m": meeting, "t": T0}, "ck_checkin_scans_code_step_online")

    @pytest.mark.invariant("MA-INV-15")
    async def test_a_code_for_another_meeting_is_refused(self, db, meeting):
        await _refused(db, "INSERT INTO meeting_attendance.meeting_qr_codes (meeting_id, mode, payload, svg, png, "
                           "generated_at) VALUES (:m, 'offline', :p, '<svg/>', '\\x00', :t)",
                       {"m": meeting, "p": f"http://x/meetingattendance/check-in/{'f' * 32}?mode=offline", "t": T0},
                       "ck_meeting_qr_codes_payload")


class TestSeriesAndAudit:
    async def _series(self, db, user, rrule="FREQ=WEEKLY;COUNT=3") -> uuid.UUID:
        series_id = uuid.uuid4()
        async with db.unit_of_work() as session:
            await session.execute(text(
                "INSERT INTO meeting_attendance.meeting_series (id, title, timezone, rrule, start_date, "
                "start_local_time, duration_minutes, organizer_id, late_grace_minutes, checkin_opens_minutes_before, "
                "created_by_id, created_at, updated_at) VALUES (:id, 'S', 'UTC', :r, '2026-03-02', '09:00', 60, :u, "
                "5, 30, :u, :t, :t)"), {"id": series_id, "r": rrule, "u": user, "t": T0})
        return series_id

    @pytest.mark.invariant("MA-INV-16")
    async def test_two_meetings_for_one_occurrence_are_refused(self, db, user):
        series = await self._series(db, user)
        sql = ("UPDATE meeting_attendance.meetings SET series_id = :s, series_occurrence_date = '2026-03-02', "
               "timezone = 'UTC' WHERE id = :m")
        first, second = await _meeting(db, user), await _meeting(db, user)
        async with db.unit_of_work() as session:
            await session.execute(text(sql), {"s": series, "m": first})
        await _refused(db, sql, {"s": series, "m": second}, "uq_meetings_series_occurrence")

    @pytest.mark.invariant("MA-INV-16")
    async def test_an_occurrence_date_outside_a_series_is_refused(self, db, meeting):
        await _refused(db, "UPDATE meeting_attendance.meetings SET series_occurrence_date = '2026-03-02' WHERE id = :m",
                       {"m": meeting}, "ck_meetings_series_occurrence")

    @pytest.mark.invariant("MA-INV-17")
    async def test_a_deleted_series_stays_deleted(self, db, user):
        series = await self._series(db, user)
        async with db.unit_of_work() as session:
            await session.execute(text("UPDATE meeting_attendance.meeting_series SET status = 'DELETED', "
                                       "deleted_at = :t WHERE id = :s"), {"s": series, "t": T0})
        await _refused(db, "UPDATE meeting_attendance.meeting_series SET status = 'ACTIVE', deleted_at = NULL "
                           "WHERE id = :s", {"s": series}, "meeting_series_terminal_is_final")

    @pytest.mark.invariant("MA-INV-18")
    @pytest.mark.parametrize("rrule", ["FREQ=WEEKLY", "FREQ=MINUTELY;COUNT=5", "FREQ=DAILY;COUNT=5;BYHOUR=9"])
    async def test_an_unbounded_or_sub_daily_rule_is_refused(self, db, user, rrule):
        with pytest.raises(DBAPIError, match="ck_meeting_series_rrule_shape"):
            await self._series(db, user, rrule)

    @pytest.mark.invariant("MA-INV-20")
    async def test_the_audit_log_refuses_update_delete_and_truncate(self, db):
        async with db.unit_of_work() as session:
            await session.execute(text(
                "INSERT INTO meeting_attendance.audit_logs (occurred_at, action, resource, resource_id, actor_type, "
                "changes) VALUES (:t, 'MEETING_CREATED', 'MEETING', 'x', 'system', "
                "'{\"entityId\": \"x\", \"entityType\": \"MEETING\"}')"), {"t": T0})
        await _refused(db, "UPDATE meeting_attendance.audit_logs SET action = 'CHECK_IN'", {}, "audit_logs_append_only")
        await _refused(db, "DELETE FROM meeting_attendance.audit_logs", {}, "audit_logs_append_only")
        await _refused(db, "TRUNCATE meeting_attendance.audit_logs", {}, "audit_logs_no_truncate")

    @pytest.mark.invariant("MA-INV-20")
    async def test_an_audit_row_without_its_entity_is_refused(self, db):
        await _refused(db, "INSERT INTO meeting_attendance.audit_logs (occurred_at, action, resource, resource_id, "
                           "actor_type, changes) VALUES (:t, 'MEETING_CREATED', 'MEETING', 'x', 'system', '{}')",
                       {"t": T0}, "ck_audit_logs_changes_shape")
