"""Identity's events (account deletion, role changes) and the guest-data retention job (issue 10 "Account
deletion", "Audit", "Guest data retention")."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from tenet.iam.permissions import Role
from tenet.kernel.jobs import run_now
from tenet.meetings import tasks
from tests.support.invariants import rules_hold
from tests.support.rows import rows


@pytest.mark.invariant("MA-INV-19")
async def test_a_deleted_account_leaves_future_lists_and_keeps_its_history(ma, manager, employee, users, client, db,
                                                                           clock):
    past = await ma.create_ok(manager, required_attendee_ids=[str(employee.id)])
    clock.set(datetime.fromisoformat(past["start_time"]))
    await ma.check_in(employee, past["id"])
    future = await ma.create_ok(manager, required_attendee_ids=[str(employee.id)])
    series = await ma.call("POST", "/series", manager, json={
        "title": "S", "start_date": (clock.now() + timedelta(days=2)).date().isoformat(), "start_local_time": "09:00",
        "duration_minutes": 30, "rrule": "FREQ=DAILY;COUNT=2", "required_attendee_ids": [str(employee.id)]})
    template = await ma.call("POST", "/templates", manager, json={
        "label": "T", "title": "T", "duration_minutes": 30, "attendee_user_ids": [str(employee.id)]})
    admin = await users.admin()
    deleted = await client.delete(f"/api/v1/iam/users/{employee.id}", headers=admin.headers)
    assert deleted.status_code == 204, deleted.text
    assert (await ma.meeting(manager, future["id"])).json()["required_attendee_count"] == 0
    assert (await ma.meeting(manager, past["id"])).json()["required_attendee_count"] == 1
    assert (await ma.call("GET", f"/series/{series.json()['series']['id']}", manager)).json()[
        "required_attendee_ids"] == []
    assert (await ma.call("GET", f"/templates/{template.json()['id']}", manager)).json()["attendee_user_ids"] == []
    report = (await ma.call("GET", f"/reports/meetings/{past['id']}", manager)).json()
    assert (report["expected"], report["present"]) == (1, 1)
    await rules_hold(db, "MA-", now=clock.now())


async def test_meeting_role_changes_are_audited_in_the_meeting_log(ma, manager, employee, users, client):
    admin = await users.admin()
    response = await client.put(f"/api/v1/iam/users/{employee.id}/roles", json={"roles": ["Leader"]},
                                headers=admin.headers)
    assert response.status_code == 200, response.text
    log = (await ma.call("GET", "/audit-logs", manager, params={"action": "USER_ROLES_CHANGED"})).json()["items"]
    assert len(log) == 1 and log[0]["resource_id"] == str(employee.id)
    assert log[0]["changes"]["before"] == {"roles": ["Employee"]} and log[0]["changes"]["after"] == {
        "roles": ["Leader"]}
    await client.put(f"/api/v1/iam/users/{employee.id}/roles", json={"roles": ["Leader", "ReservationAgent"]},
                     headers=admin.headers)
    again = (await ma.call("GET", "/audit-logs", manager, params={"action": "USER_ROLES_CHANGED"})).json()["items"]
    assert len(again) == 1  # a change outside the meeting roles is not the meeting log's business
    assert Role.LEADER.value == "Leader"


@pytest.mark.invariant("MA-INV-13")
async def test_guest_data_is_erased_after_retention_and_counts_stay(ma, manager, job_runtime, db, clock):
    meeting = await ma.create_ok(manager)
    clock.set(datetime.fromisoformat(meeting["start_time"]))
    guest = (await ma.guest_check_in(meeting["id"], name="Gwen", email="gwen@example.com",
                                     device="gwen-phone-1")).json()
    await ma.call("PATCH", f"/attendances/{guest['attendance_id']}", manager, json={"status": "LATE",
                                                                                    "note": "Arrived after the intro"})
    ended = datetime.fromisoformat(meeting["end_time"])
    clock.set(ended + timedelta(days=90) - timedelta(seconds=1))
    assert await run_now(tasks.erase_guest_data, job_runtime, timestamp=0) == {"guests": 0}
    await rules_hold(db, "MA-", now=clock.now())
    clock.set(ended + timedelta(days=90, seconds=1))
    assert await run_now(tasks.erase_guest_data, job_runtime, timestamp=0) == {"guests": 1}
    (row,) = await rows(db, "SELECT name, email, identity_digest, erased_at FROM meeting_attendance.guests")
    assert (row.name, row.email, row.identity_digest) == (None, None, None) and row.erased_at is not None
    assert await rows(db, "SELECT device_id FROM meeting_attendance.attendances") == [(None,)]
    assert await rows(db, "SELECT note FROM meeting_attendance.attendance_corrections") == [(None,)]
    report = (await ma.call("GET", f"/reports/meetings/{meeting['id']}", manager)).json()
    assert report["guests"] == 1 and report["rows"][0]["display_name"] is None
    assert await run_now(tasks.erase_guest_data, job_runtime, timestamp=0) == {"guests": 0}
    log = (await ma.call("GET", "/audit-logs", manager, params={"action": "GUEST_DATA_ERASED"})).json()["items"]
    assert log[0]["changes"]["after"] == {"guests": 1}
    await rules_hold(db, "MA-", now=clock.now())
