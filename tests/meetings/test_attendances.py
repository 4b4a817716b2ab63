"""A manager's corrections (excuse with a note, undo with a reason, present / late), the attendance list and the
scan log (issue 10 "Check-in": "a manager can mark excused (with a note) or undo a check-in with a reason, both
audited")."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy import text

from tests.support.invariants import rules_hold
from tests.support.outcomes import code


@pytest.fixture
async def started(ma, manager, employee, leader, clock):
    meeting = await ma.create_ok(manager, required_attendee_ids=[str(employee.id), str(leader.id)])
    clock.set(datetime.fromisoformat(meeting["start_time"]))
    return meeting


class TestCorrections:
    @pytest.mark.invariant("MA-INV-12", "MA-INV-10")
    async def test_undo_needs_a_reason_and_frees_the_person_and_device(self, ma, started, manager, employee, db,
                                                                        clock):
        checked = (await ma.check_in(employee, started["id"], device="phone-00001")).json()
        no_note = await ma.call("PATCH", f"/attendances/{checked['attendance_id']}", manager, json={"status": "ABSENT"})
        assert (no_note.status_code, code(no_note)) == (422, "ATTENDANCE_NOTE_REQUIRED")
        undone = await ma.call("PATCH", f"/attendances/{checked['attendance_id']}", manager,
                               json={"status": "ABSENT", "note": "Scanned for a colleague"})
        assert undone.status_code == 200 and undone.json()["status"] == "ABSENT"
        final = await ma.call("PATCH", f"/attendances/{checked['attendance_id']}", manager,
                              json={"status": "PRESENT"})
        assert (final.status_code, code(final)) == (409, "ATTENDANCE_VOIDED")
        again = await ma.check_in(employee, started["id"], device="phone-00001")
        assert again.status_code == 201 and again.json()["attendance_id"] != checked["attendance_id"]
        async with db.read_only() as session:
            audit = (await session.execute(text(
                "SELECT changes FROM meeting_attendance.audit_logs "
                "WHERE action = 'ATTENDANCE_CORRECTED'"))).scalar_one()
            note = (await session.execute(text(
                "SELECT note FROM meeting_attendance.attendance_corrections WHERE id = :c"),
                {"c": audit["correctionId"]})).scalar_one()
        assert note == "Scanned for a colleague" and "colleague" not in str(audit)
        await rules_hold(db, "MA-", now=clock.now())

    @pytest.mark.invariant("MA-INV-12")
    async def test_excuse_an_absent_attendee_then_they_come_anyway(self, ma, started, manager, leader, db, clock):
        recorded = await ma.call("POST", f"/meetings/{started['id']}/attendances", manager,
                                 json={"user_id": str(leader.id), "status": "EXCUSED", "note": "Customer visit"})
        assert recorded.status_code == 201 and recorded.json()["status"] == "EXCUSED"
        duplicate = await ma.call("POST", f"/meetings/{started['id']}/attendances", manager,
                                  json={"user_id": str(leader.id), "status": "PRESENT"})
        assert (duplicate.status_code, code(duplicate)) == (409, "ATTENDANCE_EXISTS")
        clock.advance(timedelta(minutes=10))
        came = await ma.check_in(leader, started["id"])
        assert came.status_code == 201 and came.json()["status"] == "LATE"
        assert came.json()["attendance_id"] == recorded.json()["id"]
        await rules_hold(db, "MA-", now=clock.now())

    @pytest.mark.invariant("MA-INV-10")
    async def test_guests_cannot_be_excused_and_versions_are_checked(self, ma, started, manager, employee):
        guest = (await ma.guest_check_in(started["id"])).json()
        refused = await ma.call("PATCH", f"/attendances/{guest['attendance_id']}", manager,
                                json={"status": "EXCUSED", "note": "x"})
        assert (refused.status_code, code(refused)) == (422, "ATTENDANCE_STATUS_INVALID")
        mine = (await ma.check_in(employee, started["id"])).json()
        late = await ma.call("PATCH", f"/attendances/{mine['attendance_id']}", manager, json={"status": "LATE"},
                             headers={"If-Match": '"1"'})
        assert late.status_code == 200 and late.json()["status"] == "LATE" and late.json()["status_source"] == "MANUAL"
        stale = await ma.call("PATCH", f"/attendances/{mine['attendance_id']}", manager, json={"status": "PRESENT"},
                              headers={"If-Match": '"1"'})
        assert (stale.status_code, code(stale)) == (412, "PRECONDITION_FAILED")

    async def test_only_attendance_managers_correct(self, ma, started, employee, leader):
        mine = (await ma.check_in(employee, started["id"])).json()
        response = await ma.call("PATCH", f"/attendances/{mine['attendance_id']}", leader,
                                 json={"status": "ABSENT", "note": "no"})
        assert (response.status_code, code(response)) == (403, "PERMISSION_DENIED")


class TestLists:
    async def test_the_list_shows_required_walk_ins_and_guests(self, ma, started, manager, employee, leader, users):
        await ma.check_in(employee, started["id"])
        walk_in = await users.make(display_name="Wally Walkin")
        await ma.check_in(walk_in, started["id"])
        await ma.guest_check_in(started["id"], name="Gina Guest", email="gina@example.com")
        listed = (await ma.call("GET", f"/meetings/{started['id']}/attendances", manager)).json()["items"]
        summary = [(r["subject_type"], r["required"], r["status"], r["display_name"]) for r in listed]
        assert summary == [("USER", True, "PRESENT", "Emil Employee"), ("USER", True, "ABSENT", "Leo Leader"),
                           ("USER", False, "PRESENT", "Wally Walkin"), ("GUEST", False, "PRESENT", "Gina Guest")]
        absent = await ma.call("GET", f"/meetings/{started['id']}/attendances", manager, params={"status": "ABSENT"})
        assert [r["user_id"] for r in absent.json()["items"]] == [str(leader.id)]
        paged = await ma.call("GET", f"/meetings/{started['id']}/attendances", manager, params={"limit": 3})
        rest = await ma.call("GET", f"/meetings/{started['id']}/attendances", manager,
                             params={"limit": 3, "cursor": paged.json()["next_cursor"]})
        assert [r["display_name"] for r in rest.json()["items"]] == ["Gina Guest"]

    async def test_attendees_may_not_list_but_the_organizer_may(self, ma, started, employee):
        forbidden = await ma.call("GET", f"/meetings/{started['id']}/attendances", employee)
        assert (forbidden.status_code, code(forbidden)) == (403, "MEETING_ACTION_FORBIDDEN")

    @pytest.mark.invariant("MA-INV-11")
    async def test_the_scan_log_shows_refusals(self, ma, started, manager, employee, users):
        await ma.check_in(employee, started["id"], device="phone-00001")
        await ma.check_in(await users.make(), started["id"], device="phone-00001")
        scans = (await ma.call("GET", f"/meetings/{started['id']}/scans", manager)).json()["items"]
        assert [(s["outcome"], s["reason"]) for s in scans] == [("REFUSED", "DEVICE_ALREADY_USED"),
                                                                ("ACCEPTED", None)]
        assert "device_id" not in scans[0]
