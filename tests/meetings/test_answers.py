"""A command answers what the GET of the same resource answers right after it (issue 23: the answer is read back
through the GET's query, in the command's transaction): meetings, series, templates and attendance corrections."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _clock(clock):
    clock.set(NOW)


async def _same_as_get(ma, manager, written, path: str) -> None:
    fetched = await ma.call("GET", path, manager)
    assert fetched.status_code == 200, fetched.text
    assert written.json() == fetched.json()
    assert written.headers.get("etag") == fetched.headers.get("etag")


async def test_a_meeting_created_and_changed_answers_its_get(ma, manager, users):
    attendee = await users.make(display_name="Ada")
    created = await ma.create(manager, required_attendee_ids=[str(attendee.id)], description="Agenda first")
    assert created.status_code == 201, created.text
    path = f"/meetings/{created.json()['id']}"
    await _same_as_get(ma, manager, created, path)
    changed = await ma.call("PATCH", path, manager, json={"title": "Renamed", "late_grace_minutes": 10})
    assert changed.status_code == 200, changed.text
    await _same_as_get(ma, manager, changed, path)
    cancelled = await ma.call("POST", f"{path}/cancel", manager, json={"reason": "Snow"})
    assert cancelled.status_code == 200, cancelled.text
    await _same_as_get(ma, manager, cancelled, path)


async def test_a_series_created_and_changed_answers_its_get(ma, manager, users):
    attendee = await users.make(display_name="Bo")
    created = await ma.call("POST", "/series", manager, json={
        "title": "Daily", "timezone": "UTC", "start_date": "2026-03-02", "start_local_time": "09:00",
        "duration_minutes": 30, "rrule": "FREQ=DAILY;COUNT=3", "required_attendee_ids": [str(attendee.id)]})
    assert created.status_code == 201, created.text
    path = f"/series/{created.json()['series']['id']}"
    fetched = await ma.call("GET", path, manager)
    assert created.json()["series"] == fetched.json()
    changed = await ma.call("PATCH", path, manager, json={"title": "Daily stand-up", "rrule": "FREQ=DAILY;COUNT=5"})
    assert changed.status_code == 200, changed.text
    fetched = await ma.call("GET", path, manager)
    assert changed.json()["series"] == fetched.json()
    assert changed.headers["etag"] == fetched.headers["etag"]


async def test_a_template_created_and_changed_answers_its_get(ma, manager, users):
    attendee = await users.make(display_name="Cy")
    created = await ma.call("POST", "/templates", manager, json={
        "label": "Board", "title": "Board meeting", "duration_minutes": 90, "attendee_user_ids": [str(attendee.id)]})
    assert created.status_code == 201, created.text
    path = f"/templates/{created.json()['id']}"
    await _same_as_get(ma, manager, created, path)
    changed = await ma.call("PATCH", path, manager, json={"title": "Board (quarterly)", "attendee_user_ids": []})
    assert changed.status_code == 200, changed.text
    await _same_as_get(ma, manager, changed, path)


async def test_an_attendance_recorded_and_corrected_answers_its_row_in_the_list(ma, manager, users, clock):
    attendee = await users.make(display_name="Di")
    meeting = await ma.create_ok(manager, required_attendee_ids=[str(attendee.id)])
    clock.set(datetime.fromisoformat(meeting["start_time"]) + timedelta(minutes=1))
    recorded = await ma.call("POST", f"/meetings/{meeting['id']}/attendances", manager,
                             json={"user_id": str(attendee.id), "status": "EXCUSED", "note": "Sick"})
    assert recorded.status_code == 201, recorded.text

    async def listed() -> dict:
        rows = (await ma.call("GET", f"/meetings/{meeting['id']}/attendances", manager)).json()["items"]
        return next(r for r in rows if r["id"] == recorded.json()["id"])

    assert recorded.json() == await listed()
    corrected = await ma.call("PATCH", f"/attendances/{recorded.json()['id']}", manager,
                              json={"status": "LATE", "note": "Came after all"})
    assert corrected.status_code == 200, corrected.text
    assert corrected.json() == await listed()
