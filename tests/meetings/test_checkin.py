"""Check-in of users and guests (issue 10 "Check-in"): window and lateness boundaries (one second before and
after, across a DST change), re-scans, the device limit, the rotating code, refusals recorded, the guest
rate limit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from tenet.kernel.settings import Rate
from tenet.meetings.codes import CheckInCodes
from tests.conftest import TEST_SECRET
from tests.support.invariants import rules_hold
from tests.support.outcomes import code
from tests.support.rows import scalar


async def _scans(db, meeting_id: str) -> list[tuple[str, str | None]]:
    async with db.read_only() as session:
        rows = await session.execute(text("SELECT outcome, reason FROM meeting_attendance.checkin_scans "
                                          "WHERE meeting_id = :m ORDER BY id"), {"m": meeting_id})
        return [tuple(r) for r in rows]


@pytest.fixture
async def meeting(ma, manager, employee, clock):
    """Starts in an hour, lasts an hour; window opens 30 minutes before; grace 5 minutes."""
    return await ma.create_ok(manager, required_attendee_ids=[str(employee.id)], late_grace_minutes=5,
                              checkin_opens_minutes_before=30)


def _start(meeting) -> datetime:
    return datetime.fromisoformat(meeting["start_time"])


class TestUserCheckIn:
    @pytest.mark.invariant("MA-INV-06", "MA-INV-11")
    async def test_check_in_then_scan_again_answers_the_same_attendance(self, ma, meeting, employee, clock, db):
        clock.set(_start(meeting))
        first = await ma.check_in(employee, meeting["id"])
        assert first.status_code == 201 and first.json()["status"] == "PRESENT"
        assert first.json()["already_checked_in"] is False
        again = await ma.check_in(employee, meeting["id"], device="another-device")
        assert again.status_code == 200 and again.json()["attendance_id"] == first.json()["attendance_id"]
        assert again.json()["already_checked_in"] is True
        assert await _scans(db, meeting["id"]) == [("ACCEPTED", None), ("ALREADY_CHECKED_IN", None)]
        await rules_hold(db, "MA-", now=clock.now())

    @pytest.mark.invariant("MA-INV-08", "MA-INV-11")
    async def test_window_boundaries_to_the_second(self, ma, meeting, employee, users, clock, db):
        start = _start(meeting)
        clock.set(start - timedelta(minutes=30, seconds=1))
        early = await ma.check_in(employee, meeting["id"])
        assert (early.status_code, code(early)) == (409, "CHECK_IN_WINDOW_NOT_OPEN")
        assert early.json()["opens_at"] == (start - timedelta(minutes=30)).isoformat()
        clock.set(start - timedelta(minutes=30))
        assert (await ma.check_in(employee, meeting["id"])).status_code == 201
        walk_in = await users.make()
        clock.set(start + timedelta(minutes=59, seconds=59))
        assert (await ma.check_in(walk_in, meeting["id"])).status_code == 201
        late_comer = await users.make()
        clock.set(start + timedelta(hours=1))
        closed = await ma.check_in(late_comer, meeting["id"])
        assert (closed.status_code, code(closed)) == (409, "CHECK_IN_WINDOW_CLOSED")
        assert ("REFUSED", "CHECK_IN_WINDOW_NOT_OPEN") in await _scans(db, meeting["id"])
        assert ("REFUSED", "CHECK_IN_WINDOW_CLOSED") in await _scans(db, meeting["id"])
        await rules_hold(db, "MA-", now=clock.now())

    @pytest.mark.invariant("MA-INV-09")
    async def test_late_is_strictly_after_start_plus_grace(self, ma, meeting, employee, users, clock):
        start = _start(meeting)
        clock.set(start + timedelta(minutes=5))
        assert (await ma.check_in(employee, meeting["id"])).json()["status"] == "PRESENT"
        other = await users.make()
        clock.set(start + timedelta(minutes=5, seconds=1))
        late = await ma.check_in(other, meeting["id"])
        assert late.json()["status"] == "LATE" and late.json()["late_by_seconds"] == 301

    @pytest.mark.invariant("MA-INV-09")
    async def test_lateness_across_the_spring_forward_change(self, ma, manager, employee, users, clock):
        """Los Angeles, 8 March 2026: 01:50 PST plus 15 minutes of grace is 03:05 PDT (elapsed time)."""
        start = datetime(2026, 3, 8, 9, 50, tzinfo=UTC)  # 01:50 PST
        clock.set(start - timedelta(hours=1))
        meeting = await ma.create_ok(manager, start_time=start.isoformat(),
                                     end_time=(start + timedelta(hours=2)).isoformat(),
                                     timezone="America/Los_Angeles", late_grace_minutes=15)
        assert meeting["start_time_local"] == "2026-03-08T01:50:00-08:00"
        clock.set(datetime(2026, 3, 8, 10, 5, tzinfo=UTC))
        on_time = await ma.check_in(employee, meeting["id"])
        assert on_time.json()["status"] == "PRESENT"
        assert on_time.json()["checked_in_at_local"] == "2026-03-08T03:05:00-07:00"
        clock.set(datetime(2026, 3, 8, 10, 5, 1, tzinfo=UTC))
        assert (await ma.check_in(await users.make(), meeting["id"])).json()["status"] == "LATE"

    @pytest.mark.invariant("MA-INV-09")
    async def test_moving_the_meeting_later_makes_late_comers_punctual(self, ma, meeting, manager, employee, clock,
                                                                        db):
        start = _start(meeting)
        clock.set(start + timedelta(minutes=20))
        assert (await ma.check_in(employee, meeting["id"])).json()["status"] == "LATE"
        moved = await ma.call("PATCH", f"/meetings/{meeting['id']}", manager, json={
            "start_time": (start + timedelta(minutes=30)).isoformat()})
        assert moved.status_code == 200
        assert (await ma.meeting(employee, meeting["id"])).json()["my_attendance"]["status"] == "PRESENT"
        await rules_hold(db, "MA-", now=clock.now())

    @pytest.mark.invariant("MA-INV-07")
    async def test_one_device_checks_in_one_person(self, ma, meeting, employee, users, clock, db):
        clock.set(_start(meeting))
        assert (await ma.check_in(employee, meeting["id"], device="shared-phone-1")).status_code == 201
        friend = await users.make()
        refused = await ma.check_in(friend, meeting["id"], device="shared-phone-1")
        assert (refused.status_code, code(refused)) == (409, "DEVICE_ALREADY_USED")
        assert await scalar(db, "SELECT count(*) FROM meeting_attendance.attendances WHERE meeting_id = :m",
                            m=meeting["id"]) == 1
        await rules_hold(db, "MA-", now=clock.now())

    @pytest.mark.invariant("MA-INV-08")
    async def test_a_cancelled_meeting_refuses_and_records(self, ma, meeting, manager, employee, clock, db):
        clock.set(_start(meeting))
        await ma.call("POST", f"/meetings/{meeting['id']}/cancel", manager)
        refused = await ma.check_in(employee, meeting["id"])
        assert (refused.status_code, code(refused)) == (409, "MEETING_CANCELLED")
        assert await _scans(db, meeting["id"]) == [("REFUSED", "MEETING_CANCELLED")]

    async def test_unknown_and_deleted_meetings_answer_404_without_a_scan(self, ma, meeting, manager, employee, db):
        assert (await ma.check_in(employee, "f" * 32)).status_code == 404
        await ma.call("DELETE", f"/meetings/{meeting['id']}", manager)
        assert (await ma.check_in(employee, meeting["id"])).status_code == 404
        assert await _scans(db, meeting["id"]) == []

    async def test_a_walk_in_becomes_an_external_attendee(self, ma, meeting, users, clock):
        clock.set(_start(meeting))
        walk_in = await users.make()
        assert (await ma.meeting(walk_in, meeting["id"])).status_code == 404
        assert (await ma.check_in(walk_in, meeting["id"])).status_code == 201
        assert (await ma.meeting(walk_in, meeting["id"])).json()["my_identity"] == "external"

    async def test_offline_check_in_can_be_turned_off(self, ma, manager, employee, clock):
        meeting = await ma.create_ok(manager, offline_checkin_enabled=False)
        clock.set(_start(meeting))
        refused = await ma.check_in(employee, meeting["id"], mode="offline")
        assert (refused.status_code, code(refused)) == (409, "CHECK_IN_MODE_DISABLED")
        assert (await ma.check_in(employee, meeting["id"], mode="online")).status_code == 201


class TestRotatingCode:
    @pytest.fixture
    def codes(self) -> CheckInCodes:
        return CheckInCodes(TEST_SECRET, 30)

    @pytest.mark.invariant("MA-INV-14")
    async def test_only_a_fresh_signed_code_checks_in_online(self, ma, manager, users, clock, codes, db):
        meeting = await ma.create_ok(manager, rotating_online_code=True)
        clock.set(_start(meeting))
        now = clock.now()
        people = [await users.make() for _ in range(6)]
        missing = await ma.check_in(people[0], meeting["id"], mode="online")
        assert (missing.status_code, code(missing)) == (403, "CHECK_IN_CODE_REQUIRED")
        old = codes.code(meeting["id"], now - timedelta(seconds=60))
        assert code(await ma.check_in(people[0], meeting["id"], mode="online", code=old)) == "CHECK_IN_CODE_EXPIRED"
        forged = codes.code(meeting["id"], now)[:-1] + "A"
        assert code(await ma.check_in(people[0], meeting["id"], mode="online", code=forged)) == "CHECK_IN_CODE_INVALID"
        other_meeting = codes.code("a" * 32, now)
        assert code(await ma.check_in(people[0], meeting["id"], mode="online", code=other_meeting)) == (
            "CHECK_IN_CODE_INVALID")
        current = await ma.check_in(people[1], meeting["id"], mode="online", code=codes.code(meeting["id"], now))
        previous = await ma.check_in(people[2], meeting["id"], mode="online",
                                     code=codes.code(meeting["id"], now - timedelta(seconds=30)))
        assert current.status_code == previous.status_code == 201
        # The printed offline code keeps working (issue 10).
        assert (await ma.check_in(people[3], meeting["id"], mode="offline")).status_code == 201
        display = await ma.call("GET", f"/meetings/{meeting['id']}/display-code", manager)
        assert display.json()["url"].endswith("&code=" + codes.code(meeting["id"], now))
        await rules_hold(db, "MA-", now=clock.now())

    @pytest.mark.invariant("MA-INV-14")
    async def test_naming_the_offline_mode_needs_the_offline_code(self, ma, manager, users, clock, codes, db):
        """Issue 24 item 4: with rotation on, `{"mode": "offline"}` and no code was accepted, so a client chose the
        weaker mode. The offline code (the printed QR's, signed per meeting and mode) is what proves the mode."""
        meeting = await ma.create_ok(manager, rotating_online_code=True)
        clock.set(_start(meeting))
        person = await users.make()
        for who in ("user", "guest"):
            send = (lambda **kw: ma.check_in(person, meeting["id"], mode="offline", **kw)) if who == "user" else (
                lambda **kw: ma.guest_check_in(meeting["id"], mode="offline", **kw))
            missing = await send(code=None)
            assert (missing.status_code, code(missing)) == (403, "CHECK_IN_OFFLINE_CODE_REQUIRED"), who
            genuine = codes.offline_code(meeting["id"])
            for wrong in (codes.code(meeting["id"], clock.now()), codes.offline_code("a" * 32), genuine[:-1] + "A",
                          genuine + "\n", "o1." + "é" * 22):
                refused = await send(code=wrong)
                assert (refused.status_code, code(refused)) == (403, "CHECK_IN_OFFLINE_CODE_INVALID"), (who, wrong)
            assert (await send(code=genuine)).status_code == 201, who
        scans = await _scans(db, meeting["id"])
        assert scans.count(("REFUSED", "CHECK_IN_OFFLINE_CODE_REQUIRED")) == 2
        assert scans.count(("REFUSED", "CHECK_IN_OFFLINE_CODE_INVALID")) == 10
        # What the offline QR code leads to carries it; its image encodes that address.
        address = f"http://127.0.0.1:8000/meetingattendance/check-in/{meeting['id']}?mode=offline&code={genuine}"
        assert meeting["qr_code_offline"]["check_in_url"] == address
        display = await ma.call("GET", f"/meetings/{meeting['id']}/display-code", manager, params={"mode": "offline"})
        assert display.json()["url"] == address and display.json()["expires_at"] is None
        await rules_hold(db, "MA-", now=clock.now())

    async def test_a_meeting_without_rotation_needs_the_offline_code_too(self, ma, meeting, employee, clock, codes):
        clock.set(_start(meeting))
        missing = await ma.check_in(employee, meeting["id"], mode="offline", code=None)
        assert (missing.status_code, code(missing)) == (403, "CHECK_IN_OFFLINE_CODE_REQUIRED")
        online = await ma.check_in(employee, meeting["id"], mode="online")  # no code: none asked for
        assert online.status_code == 201 and online.json()["mode"] == "online"

    @pytest.mark.invariant("MA-INV-14")
    async def test_rotation_cannot_start_after_online_check_ins(self, ma, manager, employee, clock):
        meeting = await ma.create_ok(manager)
        clock.set(_start(meeting))
        await ma.check_in(employee, meeting["id"], mode="online")
        locked = await ma.call("PATCH", f"/meetings/{meeting['id']}", manager, json={"rotating_online_code": True})
        assert (locked.status_code, code(locked)) == (409, "ROTATING_CODE_LOCKED")


class TestGuests:
    @pytest.mark.invariant("MA-INV-13", "MA-INV-20")
    async def test_a_guest_checks_in_and_their_data_lives_only_in_guests(self, ma, meeting, clock, db):
        clock.set(_start(meeting))
        response = await ma.guest_check_in(meeting["id"], name="  Gwen   Guest ", email="Gwen@Example.com",
                                           organization="Acme")
        assert response.status_code == 201 and response.json()["status"] == "PRESENT"
        assert "name" not in response.json() and "email" not in response.json()
        async with db.read_only() as session:
            guest = (await session.execute(text("SELECT name, email, organization FROM meeting_attendance.guests "
                                                "WHERE meeting_id = :m"), {"m": meeting["id"]})).one()
            audit = (await session.execute(text("SELECT actor_type, changes::text FROM meeting_attendance.audit_logs "
                                                "WHERE action = 'GUEST_CHECK_IN'"))).one()
        assert tuple(guest) == ("Gwen Guest", "Gwen@Example.com", "Acme")
        assert audit[0] == "guest" and "Gwen" not in audit[1] and "Example" not in audit[1]
        await rules_hold(db, "MA-", now=clock.now())

    @pytest.mark.invariant("MA-INV-06")
    async def test_the_same_guest_is_answered_not_duplicated(self, ma, meeting, clock, db):
        clock.set(_start(meeting))
        first = await ma.guest_check_in(meeting["id"], email="gwen@example.com", device="laptop-0001")
        again = await ma.guest_check_in(meeting["id"], name="G. Guest", email=" GWEN@example.com", device="phone-0001")
        assert again.status_code == 200 and again.json()["attendance_id"] == first.json()["attendance_id"]
        assert await scalar(db, "SELECT count(*) FROM meeting_attendance.guests WHERE meeting_id = :m",
                            m=meeting["id"]) == 1

    @pytest.mark.invariant("MA-INV-07", "MA-INV-13")
    async def test_a_second_person_on_one_device_is_refused_and_leaves_no_data(self, ma, meeting, clock, db):
        clock.set(_start(meeting))
        assert (await ma.guest_check_in(meeting["id"], name="First", device="browser-0001")).status_code == 201
        refused = await ma.guest_check_in(meeting["id"], name="Second", phone="+1 555 0100", device="browser-0001")
        assert (refused.status_code, code(refused)) == (409, "DEVICE_ALREADY_USED")
        assert await scalar(db, "SELECT count(*) FROM meeting_attendance.guests WHERE meeting_id = :m",
                            m=meeting["id"]) == 1
        await rules_hold(db, "MA-", now=clock.now())

    async def test_bad_guest_input_is_refused(self, ma, meeting, clock):
        clock.set(_start(meeting))
        assert code(await ma.guest_check_in(meeting["id"], name="   ")) == "GUEST_NAME_REQUIRED"
        assert code(await ma.guest_check_in(meeting["id"], email="not-an-address")) == "VALIDATION_FAILED"
        assert code(await ma.guest_check_in(meeting["id"], device="bad")) == "VALIDATION_FAILED"
        assert code(await ma.guest_check_in(meeting["id"], name="x" * 201)) == "VALIDATION_FAILED"

    async def test_the_guest_rate_limit_per_address_and_meeting(self, ma, meeting, manager, app, clock):
        app.state.settings = app.state.settings.model_copy(update={"guest_checkin_limit": Rate.parse("2/minute")})
        other = await ma.create_ok(manager)
        clock.set(_start(meeting))
        for name in ("A", "B"):
            assert (await ma.guest_check_in(meeting["id"], name=name)).status_code == 201
        limited = await ma.guest_check_in(meeting["id"], name="C")
        assert (limited.status_code, code(limited)) == (429, "GUEST_CHECKIN_LIMIT_REACHED")
        assert int(limited.headers["Retry-After"]) >= 1
        assert (await ma.guest_check_in(other["id"], name="C")).status_code == 201  # another meeting's bucket
        clock.advance(timedelta(minutes=1))
        assert (await ma.guest_check_in(meeting["id"], name="C")).status_code == 201

    async def test_a_missing_or_deleted_meeting_writes_no_rate_limit_row(self, ma, meeting, manager, clock, db):
        """Issue 24 item 8: an anonymous caller naming made-up meeting ids must not write a row per id."""
        clock.set(_start(meeting))
        await ma.call("DELETE", f"/meetings/{meeting['id']}", manager)
        for meeting_id in ["0" * 32, "1" * 16, meeting["id"]]:
            response = await ma.guest_check_in(meeting_id)
            assert (response.status_code, code(response)) == (404, "MEETING_NOT_FOUND")
        assert await scalar(db, "SELECT count(*) FROM kernel.rate_limit_counter "
                                "WHERE bucket LIKE 'ma.guest-checkin:%'") == 0
        assert await _scans(db, meeting["id"]) == []

    async def test_a_meeting_not_open_for_check_in_still_counts(self, ma, manager, app, clock, db):
        """Its refusals are recorded (MA-INV-11): the limit is what bounds those anonymous rows."""
        app.state.settings = app.state.settings.model_copy(update={"guest_checkin_limit": Rate.parse("2/minute")})
        meeting = await ma.create_ok(manager)
        for _ in range(2):
            assert code(await ma.guest_check_in(meeting["id"])) == "CHECK_IN_WINDOW_NOT_OPEN"
        assert code(await ma.guest_check_in(meeting["id"])) == "GUEST_CHECKIN_LIMIT_REACHED"
        assert await _scans(db, meeting["id"]) == [("REFUSED", "CHECK_IN_WINDOW_NOT_OPEN")] * 2

    async def test_the_public_view_shows_no_private_fields(self, ma, manager, clock):
        meeting = await ma.create_ok(manager, description="Secret", online_link="https://meet.example/x")
        public = await ma.call("GET", f"/public/meetings/{meeting['id']}", None)
        assert public.status_code == 200
        assert set(public.json()) == {"id", "title", "location", "city", "start_time", "end_time", "timezone",
                                      "start_time_local", "end_time_local", "status", "late_grace_minutes",
                                      "check_in"}
        assert (await ma.call("GET", f"/public/meetings/{'0' * 32}", None)).status_code == 404
