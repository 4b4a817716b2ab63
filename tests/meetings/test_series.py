"""Series (RFC 5545, materialised, bounded), bulk reschedule, occurrences edited alone, series deletion, and
templates (issue 10 "Series", "Templates")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from dateutil import rrule as dateutil_rrule
from sqlalchemy import text

from tests.support.invariants import rules_hold
from tests.support.loop import answered_while_paused, pausing
from tests.support.outcomes import code
from tests.support.recurrence import ONE_BOUNDED_WALK, counting_dateutil_periods

# Frozen clock of these tests: Monday 23 February 2026, 12:00 UTC.
NOW = datetime(2026, 2, 23, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _clock(clock):
    clock.set(NOW)


async def _series(ma, manager, **body):
    payload = {"title": "Team weekly", "timezone": "America/Los_Angeles", "start_date": "2026-03-02",
               "start_local_time": "09:00", "duration_minutes": 60, "rrule": "FREQ=WEEKLY;BYDAY=MO;COUNT=4", **body}
    response = await ma.call("POST", "/series", manager, json=payload)
    assert response.status_code == 201, response.text
    return response.json()


class TestGeneration:
    @pytest.mark.invariant("MA-INV-16")
    async def test_weekly_occurrences_keep_local_time_across_dst(self, ma, manager, employee, db, clock):
        made = await _series(ma, manager, required_attendee_ids=[str(employee.id)])
        starts = [o["start_time"] for o in made["series"]["occurrences"]]
        # 09:00 in Los Angeles: PST (UTC-8) on 2 March, PDT (UTC-7) from 9 March.
        assert starts == ["2026-03-02T17:00:00Z", "2026-03-09T16:00:00Z", "2026-03-16T16:00:00Z",
                          "2026-03-23T16:00:00Z"]
        assert len(made["created_meeting_ids"]) == 4
        first = await ma.meeting(employee, made["created_meeting_ids"][0])
        assert first.json()["series_occurrence_date"] == "2026-03-02" and first.json()["my_identity"] == "attendee"
        await rules_hold(db, "MA-", now=clock.now())

    async def test_a_time_in_the_spring_forward_gap_moves_forward(self, ma, manager):
        made = await _series(ma, manager, start_date="2026-03-07", start_local_time="02:30",
                             rrule="FREQ=DAILY;COUNT=3")
        starts = [o["start_time"] for o in made["series"]["occurrences"]]
        assert starts == ["2026-03-07T10:30:00Z", "2026-03-08T10:30:00Z", "2026-03-09T09:30:00Z"]

    @pytest.mark.invariant("MA-INV-18")
    @pytest.mark.parametrize(("rrule", "error"), [
        ("FREQ=WEEKLY", "RECURRENCE_INVALID"),
        ("FREQ=HOURLY;COUNT=3", "RECURRENCE_INVALID"),
        ("FREQ=DAILY;COUNT=5;BYHOUR=9", "RECURRENCE_INVALID"),
        ("FREQ=DAILY;COUNT=501", "RECURRENCE_TOO_LONG"),
        ("FREQ=DAILY;UNTIL=20300101", "RECURRENCE_TOO_LONG"),
        ("COUNT=3;FREQ=DAILY", "RECURRENCE_INVALID"),
        ("FREQ=DAILY;COUNT=x", "RECURRENCE_INVALID"),
    ])
    async def test_unbounded_or_odd_rules_are_refused(self, ma, manager, rrule, error):
        response = await ma.call("POST", "/series", manager, json={
            "title": "S", "start_date": "2026-03-02", "start_local_time": "09:00", "duration_minutes": 30,
            "rrule": rrule})
        assert (response.status_code, code(response)) == (422, error)

    @pytest.mark.invariant("MA-INV-18")
    @pytest.mark.parametrize("rrule", [
        "FREQ=DAILY;COUNT=5;BYMONTH=2;BYMONTHDAY=30",
        "FREQ=YEARLY;COUNT=2;BYMONTH=2;BYMONTHDAY=30",
        "FREQ=DAILY;UNTIL=99991231;BYMONTH=4;BYMONTHDAY=31",
        "FREQ=WEEKLY;COUNT=3;BYMONTH=11;BYMONTHDAY=31",
        "FREQ=SECONDLY;COUNT=3",
        "FREQ=MONTHLY;COUNT=2;BYDAY=53MO",
        "FREQ=DAILY;COUNT=3;INTERVAL=0",
        "FREQ=DAILY;COUNT=2;BYEASTER=0",
        "FREQ=DAILY;UNTIL=20261399",
        "FREQ=DAILY;UNTIL=00010101T000000Z",
    ])
    async def test_a_rule_without_occurrences_is_refused_promptly(self, ma, manager, rrule):
        """dateutil looks for a match up to the year 9999 (seconds of CPU); the expansion is bounded (its cost
        counted in periods walked, the same on every machine: tests/support/recurrence.py)."""
        with counting_dateutil_periods() as walked:
            response = await ma.call("POST", "/series", manager, json={
                "title": "S", "timezone": "Asia/Tokyo", "start_date": "2026-03-02", "start_local_time": "09:00",
                "duration_minutes": 30, "rrule": rrule})
        assert (response.status_code, code(response)) == (422, "RECURRENCE_INVALID"), response.text
        assert walked.periods <= ONE_BOUNDED_WALK, walked.periods

    @pytest.mark.parametrize("rrule", ["FREQ=DAILY;COUNT=5;BYMONTH=2;BYMONTHDAY=30", "FREQ=WEEKLY;BYDAY=MO;COUNT=4"])
    async def test_the_rule_is_expanded_off_the_event_loop(self, ma, manager, client, rrule):
        """A rule that never matches walks to the end of the supported range (bounded, but CPU work): /healthz
        answers while it is paused mid-walk (tests/support/loop.py)."""
        async def healthz():
            return await client.get("/healthz")

        with pausing(dateutil_rrule._iterinfo, "ddayset" if "DAILY" in rrule else "wdayset") as pause:
            response, health = await answered_while_paused(pause, ma.call("POST", "/series", manager, json={
                "title": "S", "timezone": "Asia/Tokyo", "start_date": "2026-03-02", "start_local_time": "09:00",
                "duration_minutes": 30, "rrule": rrule}), healthz)
        assert health.status_code == 200
        assert response.status_code == (422 if "BYMONTHDAY=30" in rrule else 201), response.text

    @pytest.mark.invariant("MA-INV-02")
    @pytest.mark.parametrize("body", [
        {"start_date": "9999-12-31"},
        {"start_date": "0001-01-01", "timezone": "Asia/Tokyo"},
        {"start_date": "1850-01-01"},
        # Dates before 2200 whose instants are not, and a COUNT the range would cut short.
        {"start_date": "2199-12-31", "start_local_time": "23:00", "timezone": "Pacific/Honolulu",
         "rrule": "FREQ=DAILY;COUNT=1"},
        {"start_date": "2199-12-30", "rrule": "FREQ=DAILY;COUNT=5"},
        {"start_date": "2199-12-30", "rrule": "FREQ=DAILY;UNTIL=22000105"},
    ])
    async def test_a_series_outside_the_supported_range_is_refused(self, ma, manager, body):
        response = await ma.call("POST", "/series", manager, json={
            "title": "S", "timezone": "UTC", "start_date": "2026-03-02", "start_local_time": "09:00",
            "duration_minutes": 30, "rrule": "FREQ=DAILY;COUNT=2", **body})
        assert (response.status_code, code(response)) == (422, "MEETING_TIME_INVALID"), response.text
        assert response.json()["reason"] == "out_of_range"

    async def test_an_extension_past_the_supported_range_is_refused(self, ma, manager):
        made = await _series(ma, manager, timezone="UTC", start_date="2199-12-20", rrule="FREQ=DAILY;COUNT=3")
        longer = await ma.call("PATCH", f"/series/{made['series']['id']}", manager,
                               json={"rrule": "FREQ=DAILY;COUNT=30"})
        assert (longer.status_code, code(longer)) == (422, "MEETING_TIME_INVALID"), longer.text
        moved = await ma.call("POST", f"/series/{made['series']['id']}/reschedule", manager,
                              json={"from_meeting_id": made["created_meeting_ids"][0], "shift_minutes": 10080 - 1})
        assert moved.status_code == 200, moved.text
        past = await ma.call("POST", f"/series/{made['series']['id']}/reschedule", manager,
                             json={"from_meeting_id": made["created_meeting_ids"][0], "shift_minutes": 10080})
        assert (past.status_code, code(past)) == (422, "MEETING_TIME_INVALID"), past.text

    async def test_until_and_exdates(self, ma, manager):
        made = await _series(ma, manager, rrule="FREQ=WEEKLY;BYDAY=MO;UNTIL=20260316", exdates=["2026-03-09"])
        assert [o["occurrence_date"] for o in made["series"]["occurrences"]] == ["2026-03-02", "2026-03-16"]


class TestChanges:
    @pytest.mark.invariant("MA-INV-16")
    async def test_a_deleted_occurrence_never_comes_back_on_extension(self, ma, manager, db, clock):
        made = await _series(ma, manager)
        second = made["created_meeting_ids"][1]
        assert (await ma.call("DELETE", f"/meetings/{second}", manager)).status_code == 204
        extended = await ma.call("PATCH", f"/series/{made['series']['id']}", manager,
                                 json={"rrule": "FREQ=WEEKLY;BYDAY=MO;COUNT=6"})
        assert extended.status_code == 200, extended.text
        assert len(extended.json()["created_meeting_ids"]) == 2
        dates = [o["occurrence_date"] for o in extended.json()["series"]["occurrences"]]
        assert "2026-03-09" not in dates and len(dates) == 5
        truncated = await ma.call("PATCH", f"/series/{made['series']['id']}", manager,
                                  json={"rrule": "FREQ=WEEKLY;BYDAY=MO;COUNT=2"})
        assert len(truncated.json()["deleted_meeting_ids"]) == 4
        pattern = await ma.call("PATCH", f"/series/{made['series']['id']}", manager,
                                json={"rrule": "FREQ=DAILY;COUNT=2"})
        assert (pattern.status_code, code(pattern)) == (422, "RECURRENCE_CHANGE_UNSUPPORTED")
        await rules_hold(db, "MA-", now=clock.now())

    async def test_series_edits_skip_occurrences_edited_alone(self, ma, manager, employee, leader):
        made = await _series(ma, manager, required_attendee_ids=[str(employee.id)])
        alone = made["created_meeting_ids"][0]
        await ma.call("PATCH", f"/meetings/{alone}", manager, json={"title": "Special"})
        changed = await ma.call("PATCH", f"/series/{made['series']['id']}", manager, json={
            "title": "Renamed weekly", "required_attendee_ids": [str(leader.id)]})
        assert changed.status_code == 200 and alone not in changed.json()["updated_meeting_ids"]
        assert (await ma.meeting(manager, alone)).json()["title"] == "Special"
        other = made["created_meeting_ids"][1]
        assert (await ma.meeting(manager, other)).json()["title"] == "Renamed weekly"
        assert (await ma.meeting(leader, other)).status_code == 200
        assert (await ma.meeting(employee, other)).status_code == 404

    async def test_reschedule_from_an_occurrence_on(self, ma, manager):
        made = await _series(ma, manager)
        ids = made["created_meeting_ids"]
        shifted = await ma.call("POST", f"/series/{made['series']['id']}/reschedule", manager,
                                json={"from_meeting_id": ids[2], "shift_minutes": 30})
        assert shifted.status_code == 200 and shifted.json()["moved"] == ids[2:]
        assert (await ma.meeting(manager, ids[1])).json()["start_time_local"] == "2026-03-09T09:00:00-07:00"
        assert (await ma.meeting(manager, ids[3])).json()["start_time_local"] == "2026-03-23T09:30:00-07:00"
        new_time = await ma.call("POST", f"/series/{made['series']['id']}/reschedule", manager,
                                 json={"from_meeting_id": ids[0], "start_local_time": "14:00", "duration_minutes": 45})
        assert new_time.json()["moved"] == ids
        first = (await ma.meeting(manager, ids[0])).json()
        assert first["start_time_local"] == "2026-03-02T14:00:00-08:00"
        assert first["end_time_local"] == "2026-03-02T14:45:00-08:00"

    async def test_a_started_occurrence_cannot_lead_a_reschedule(self, ma, manager, clock):
        made = await _series(ma, manager)
        clock.set(datetime(2026, 3, 2, 17, 30, tzinfo=UTC))
        refused = await ma.call("POST", f"/series/{made['series']['id']}/reschedule", manager,
                                json={"from_meeting_id": made["created_meeting_ids"][0], "shift_minutes": 15})
        assert (refused.status_code, code(refused)) == (409, "SERIES_OCCURRENCE_STARTED")

    @pytest.mark.invariant("MA-INV-17")
    async def test_deleting_a_series_deletes_what_has_not_started(self, ma, manager, clock, db):
        made = await _series(ma, manager)
        ids = made["created_meeting_ids"]
        clock.set(datetime(2026, 3, 9, 16, 30, tzinfo=UTC))  # the second occurrence is in progress
        assert (await ma.call("DELETE", f"/series/{made['series']['id']}", manager)).status_code == 204
        assert [(await ma.meeting(manager, i)).status_code for i in ids] == [200, 200, 404, 404]
        assert (await ma.call("GET", f"/series/{made['series']['id']}", manager)).status_code == 404
        await rules_hold(db, "MA-", now=clock.now())

    async def test_leaders_see_only_series_they_organize(self, ma, manager, leader, employee):
        mine = await _series(ma, manager, organizer_id=str(leader.id))
        await _series(ma, manager)
        listed = await ma.call("GET", "/series", leader)
        assert [s["id"] for s in listed.json()["items"]] == [mine["series"]["id"]]
        assert (await ma.call("GET", f"/series/{mine['series']['id']}", employee)).status_code == 404
        assert (await ma.call("GET", "/series", manager)).json()["items"].__len__() == 2


class TestTemplates:
    async def test_a_meeting_and_a_series_from_a_template(self, ma, manager, employee, leader, users, client, db):
        made = await ma.call("POST", "/templates", manager, json={
            "label": "Weekly", "title": "Weekly sync", "duration_minutes": 45, "timezone": "Asia/Shanghai",
            "late_grace_minutes": 10, "attendee_user_ids": [str(employee.id), str(leader.id)]})
        assert made.status_code == 201, made.text
        template = made.json()
        admin = await users.admin()
        await client.post(f"/api/v1/iam/users/{leader.id}/disable", headers=admin.headers)
        meeting = await ma.call("POST", "/meetings", manager, json={
            "template_id": template["id"], "start_time": "2026-03-02T01:00:00Z"})
        assert meeting.status_code == 201, meeting.text
        body = meeting.json()
        assert (body["title"], body["timezone"], body["late_grace_minutes"]) == ("Weekly sync", "Asia/Shanghai", 10)
        assert body["end_time"] == "2026-03-02T01:45:00Z" and body["required_attendee_count"] == 1
        assert meeting.headers["X-Skipped-Attendees"] == str(leader.id)
        series = await ma.call("POST", "/series", manager, json={
            "template_id": template["id"], "start_date": "2026-03-02", "start_local_time": "09:00",
            "rrule": "FREQ=DAILY;COUNT=2"})
        assert series.status_code == 201 and series.json()["series"]["timezone"] == "Asia/Shanghai"
        listed = await ma.call("GET", "/templates", manager)
        assert [t["label"] for t in listed.json()["items"]] == ["Weekly"]
        renamed = await ma.call("PATCH", f"/templates/{template['id']}", manager, json={"label": "Weekly v2"},
                                headers={"If-Match": '"1"'})
        assert renamed.status_code == 200 and renamed.json()["version"] == 2
        assert (await ma.call("DELETE", f"/templates/{template['id']}", manager)).status_code == 204
        assert (await ma.call("GET", f"/templates/{template['id']}", manager)).status_code == 404
        gone = await ma.call("POST", "/meetings", manager, json={"template_id": template["id"],
                                                                 "start_time": "2026-03-02T01:00:00Z"})
        assert (gone.status_code, code(gone)) == (404, "TEMPLATE_NOT_FOUND")
        async with db.read_only() as session:
            actions = (await session.execute(text(
                "SELECT action FROM meeting_attendance.audit_logs WHERE resource = 'TEMPLATE' ORDER BY id"))).scalars()
            assert list(actions) == ["TEMPLATE_CREATED", "TEMPLATE_UPDATED", "TEMPLATE_DELETED"]


@pytest.mark.invariant("MA-INV-09")
async def test_a_series_reschedule_recomputes_lateness(ma, manager, employee, clock, db):
    made = await _series(ma, manager, required_attendee_ids=[str(employee.id)], rrule="FREQ=DAILY;COUNT=2",
                         start_date="2026-02-24")
    first = made["created_meeting_ids"][0]
    start = datetime.fromisoformat(made["series"]["occurrences"][0]["start_time"])
    clock.set(start - timedelta(minutes=10))
    early = (await ma.check_in(employee, first)).json()
    assert early["status"] == "PRESENT"
    moved = await ma.call("POST", f"/series/{made['series']['id']}/reschedule", manager,
                          json={"from_meeting_id": first, "shift_minutes": -30})
    assert moved.status_code == 200
    assert (await ma.meeting(employee, first)).json()["my_attendance"]["status"] == "LATE"
    await rules_hold(db, "MA-", now=clock.now())
