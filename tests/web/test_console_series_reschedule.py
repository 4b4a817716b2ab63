"""A series' page and its bulk reschedule from an occurrence on (issue 18), over plain HTTP: the occurrences with
their local times; a shift of wall-clock minutes or a new time of day through the API's model and command, occurrences
edited alone skipped unless asked; refusals in words (an occurrence that started, a shift of nothing); offered and
refused as the API's `meeting:series:manage` is; in Chinese too."""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from tenet.iam.permissions import Role
from tests.support.users import PASSWORD
from tests.web.test_console_http import BASE, csrf_of, page_csrf, sign_in

BERLIN = ZoneInfo("Europe/Berlin")


@pytest.fixture
async def manager(users):
    return await users.make(roles=[Role.MEETING_MANAGER], display_name="Mona Manager")


async def _series(client, manager, **body) -> tuple[str, list[str]]:
    """Mondays 10:00 in Berlin from 2026-01-12, four times (the clock is Monday 2026-01-05 09:00 UTC)."""
    made = await client.post(f"{BASE}/series", headers=manager.headers, json={
        "title": "Team review", "timezone": "Europe/Berlin", "rrule": "FREQ=WEEKLY;BYDAY=MO;COUNT=4",
        "start_date": "2026-01-12", "start_local_time": "10:00", "duration_minutes": 60, **body})
    assert made.status_code == 201, made.text
    series_id = made.json()["series"]["id"]
    read = (await client.get(f"{BASE}/series/{series_id}", headers=manager.headers)).json()
    return series_id, [o["meeting_id"] for o in sorted(read["occurrences"], key=lambda o: o["occurrence_date"])]


async def _local_starts(client, reader, meeting_ids: list[str]) -> list[str]:
    """Each meeting's local start and end in Berlin, as the API reads it (`reader`: a user or their headers)."""
    headers = reader if isinstance(reader, dict) else reader.headers
    starts = []
    for meeting_id in meeting_ids:
        read = (await client.get(f"{BASE}/meetings/{meeting_id}", headers=headers)).json()
        start = datetime.fromisoformat(read["start_time"]).astimezone(BERLIN)
        end = datetime.fromisoformat(read["end_time"]).astimezone(BERLIN)
        starts.append(f"{start:%m-%d %H:%M}-{end:%H:%M}")
    return starts


async def test_a_manager_shifts_the_series_from_an_occurrence_on(client, manager, clock):
    series_id, meetings = await _series(client, manager)
    await sign_in(client, manager.email)
    page = await client.get(f"/console/series/{series_id}")
    assert page.status_code == 200 and '<code id="rule">FREQ=WEEKLY;BYDAY=MO;COUNT=4</code>' in page.text
    assert re.findall(r'<tr data-meeting="(\w+)"', page.text) == meetings
    assert "(Europe/Berlin)" in page.text
    link = f'href="/console/series/{series_id}/reschedule?from={meetings[1]}"'
    assert link in page.text

    form = await client.get(f"/console/series/{series_id}/reschedule", params={"from": meetings[1]})
    assert form.status_code == 200 and "3 meetings that have not started are concerned" in form.text
    done = await client.post(f"/console/series/{series_id}/reschedule", data={
        "csrf_token": csrf_of(form.text), "from": meetings[1], "how": "shift", "shift_minutes": "30"})
    assert done.status_code == 303 and done.headers["location"] == f"/console/series/{series_id}?moved=3&skipped=0"
    assert await _local_starts(client, manager, meetings) == [
        "01-12 10:00-11:00", "01-19 10:30-11:30", "01-26 10:30-11:30", "02-02 10:30-11:30"]
    notice = await client.get(done.headers["location"])
    assert 'id="rescheduled"' in notice.text and "3 meetings moved" in notice.text


async def test_a_new_time_of_day_skips_occurrences_edited_alone_unless_asked(client, manager, clock):
    series_id, meetings = await _series(client, manager)
    edited = await client.patch(f"{BASE}/meetings/{meetings[2]}", headers=manager.headers,
                                json={"title": "Team review (guest speaker)"})
    assert edited.status_code == 200, edited.text
    await sign_in(client, manager.email)
    page = await client.get(f"/console/series/{series_id}")
    assert "(edited alone)" in page.text
    csrf = await page_csrf(client, f"/console/series/{series_id}/reschedule?from={meetings[0]}")
    done = await client.post(f"/console/series/{series_id}/reschedule", data={
        "csrf_token": csrf, "from": meetings[0], "how": "time", "start_local_time": "14:00",
        "duration_minutes": "45", "shift_minutes": "999999"})  # the other way's field is not read
    assert done.status_code == 303 and done.headers["location"].endswith("?moved=3&skipped=1")
    assert await _local_starts(client, manager, meetings) == [
        "01-12 14:00-14:45", "01-19 14:00-14:45", "01-26 10:00-11:00", "02-02 14:00-14:45"]
    again = await client.post(f"/console/series/{series_id}/reschedule", data={
        "csrf_token": csrf, "from": meetings[0], "how": "time", "start_local_time": "15:00",
        "duration_minutes": "45", "include_exceptions": "on"})
    assert again.headers["location"].endswith("?moved=4&skipped=0")
    assert (await _local_starts(client, manager, meetings))[2] == "01-26 15:00-15:45"


async def test_refusals_are_said_in_words_and_change_nothing(client, manager, clock):
    series_id, meetings = await _series(client, manager)
    await sign_in(client, manager.email)
    csrf = await page_csrf(client, f"/console/series/{series_id}/reschedule?from={meetings[0]}")
    before = await _local_starts(client, manager, meetings)
    nothing = await client.post(f"/console/series/{series_id}/reschedule", data={
        "csrf_token": csrf, "from": meetings[0], "how": "shift", "shift_minutes": "0"})
    assert nothing.status_code == 422 and 'id="e-shift_minutes"' in nothing.text
    assert 'aria-describedby="e-shift_minutes"' in nothing.text
    too_far = await client.post(f"/console/series/{series_id}/reschedule", data={
        "csrf_token": csrf, "from": meetings[0], "how": "shift", "shift_minutes": "20000"})
    assert too_far.status_code == 422 and 'data-code="VALIDATION_FAILED"' in too_far.text
    no_time = await client.post(f"/console/series/{series_id}/reschedule", data={
        "csrf_token": csrf, "from": meetings[0], "how": "time", "start_local_time": "noon"})
    assert no_time.status_code == 422 and 'id="e-start_local_time"' in no_time.text

    clock.set(datetime(2026, 1, 12, 10, 5, tzinfo=BERLIN))  # the first occurrence has started
    client.cookies.clear()  # a week later: a new session
    await sign_in(client, manager.email)
    csrf = await page_csrf(client, f"/console/series/{series_id}")
    started = await client.post(f"/console/series/{series_id}/reschedule", data={
        "csrf_token": csrf, "from": meetings[0], "how": "shift", "shift_minutes": "15"})
    assert started.status_code == 409 and 'data-code="SERIES_OCCURRENCE_STARTED"' in started.text
    assert "This occurrence has started already" in started.text
    token = (await client.post("/api/v1/auth/token", data={"grant_type": "password", "username": manager.email,
                                                           "password": PASSWORD})).json()["access_token"]
    bearer = {"Authorization": f"Bearer {token}"}
    api = await client.post(f"{BASE}/series/{series_id}/reschedule", headers=bearer,
                            json={"from_meeting_id": meetings[0], "shift_minutes": 15})
    assert api.status_code == 409 and api.json()["code"] == "SERIES_OCCURRENCE_STARTED"  # the same refusal
    page = await client.get(f"/console/series/{series_id}")
    assert f"reschedule?from={meetings[0]}" not in page.text and f"reschedule?from={meetings[1]}" in page.text
    stranger = await client.post(f"/console/series/{series_id}/reschedule", data={
        "csrf_token": csrf, "from": "0" * 32, "how": "shift", "shift_minutes": "15"})
    assert stranger.status_code == 404 and 'data-code="SERIES_OCCURRENCE_NOT_FOUND"' in stranger.text
    assert await _local_starts(client, bearer, meetings) == before


async def test_the_series_page_is_offered_and_refused_as_the_api_does(client, users, manager, clock):
    leader = await users.make(roles=[Role.LEADER], display_name="Lars Leader")
    employee = await users.make(roles=[Role.EMPLOYEE], display_name="Emil Employee")
    series_id, meetings = await _series(client, manager, organizer_id=str(leader.id),
                                        required_attendee_ids=[str(employee.id)])
    await sign_in(client, leader.email)  # the organizer sees the series, may not reschedule it
    page = await client.get(f"/console/series/{series_id}")
    assert page.status_code == 200 and "reschedule?from=" not in page.text
    assert (await client.get(f"{BASE}/series/{series_id}", headers=leader.headers)).status_code == 200
    meeting_page = await client.get(f"/console/meetings/{meetings[0]}")
    assert f'id="series-link" href="/console/series/{series_id}"' in meeting_page.text
    form = await client.get(f"/console/series/{series_id}/reschedule", params={"from": meetings[1]})
    assert form.status_code == 403
    csrf = await page_csrf(client)
    forged = await client.post(f"/console/series/{series_id}/reschedule", data={
        "csrf_token": csrf, "from": meetings[1], "how": "shift", "shift_minutes": "30"})
    assert forged.status_code == 403 and 'data-code="PERMISSION_DENIED"' in forged.text
    api = await client.post(f"{BASE}/series/{series_id}/reschedule", headers=leader.headers,
                            json={"from_meeting_id": meetings[1], "shift_minutes": 30})
    assert api.status_code == 403
    client.cookies.clear()
    await sign_in(client, employee.email)  # a required attendee: neither the series nor its link
    assert (await client.get(f"/console/series/{series_id}")).status_code == 404
    assert (await client.get(f"{BASE}/series/{series_id}", headers=employee.headers)).status_code == 404
    assert 'id="series-link"' not in (await client.get(f"/console/meetings/{meetings[0]}")).text
    assert (await client.get("/console/series/not-an-id")).status_code == 422


async def test_the_series_page_in_chinese(client, manager, clock):
    series_id, meetings = await _series(client, manager)
    await sign_in(client, manager.email, headers={"Accept-Language": "zh-CN"})
    client.headers["Accept-Language"] = "zh-CN"
    page = await client.get(f"/console/series/{series_id}")
    assert '<html lang="zh-CN">' in page.text and "从此处起调整时间…" in page.text
    form = await client.get(f"/console/series/{series_id}/reschedule", params={"from": meetings[0]})
    assert "从某次会议起调整时间" in form.text and "2026年1月12日" in form.text


async def test_a_manager_edits_the_series_fields_and_a_stale_form_shows_the_new_state(client, manager, clock):
    series_id, meetings = await _series(client, manager)
    edited_alone = await client.patch(f"{BASE}/meetings/{meetings[3]}", headers=manager.headers,
                                      json={"location": "Somewhere else"})
    assert edited_alone.status_code == 200
    await sign_in(client, manager.email)
    page = await client.get(f"/console/series/{series_id}")
    assert f'id="edit-series" href="/console/series/{series_id}/edit"' in page.text
    form = await client.get(f"/console/series/{series_id}/edit")
    version = re.search(r'name="version" value="(\d+)"', form.text).group(1)
    fields = {"csrf_token": csrf_of(form.text), "version": version, "title": "Team review (new)",
              "location": "Room 9", "city": "", "description": "", "late_grace_minutes": "10",
              "checkin_opens_minutes_before": "30"}
    done = await client.post(f"/console/series/{series_id}/edit", data=fields)
    assert done.status_code == 303 and done.headers["location"] == f"/console/series/{series_id}?updated=3"
    reads = [(await client.get(f"{BASE}/meetings/{m}", headers=manager.headers)).json() for m in meetings]
    assert [r["title"] for r in reads] == ["Team review (new)"] * 3 + ["Team review"]  # edited alone: kept
    assert [r["location"] for r in reads] == ["Room 9"] * 3 + ["Somewhere else"]
    assert reads[0]["late_grace_minutes"] == 10
    notice = await client.get(done.headers["location"])
    assert 'id="series-updated"' in notice.text and "3 meetings that have not started" in notice.text

    stale = await client.post(f"/console/series/{series_id}/edit", data={**fields, "title": "Old form"})
    assert stale.status_code == 412 and 'data-code="PRECONDITION_FAILED"' in stale.text
    assert 'value="Team review (new)"' in stale.text  # the new state, to change again
    empty = await client.post(f"/console/series/{series_id}/edit", data={**fields, "version": "", "title": " "})
    assert empty.status_code == 422 and 'id="e-title"' in empty.text
    everything = await client.post(f"/console/series/{series_id}/edit", data={
        **fields, "version": "", "title": "Team review 3", "apply_to_exceptions": "on"})
    assert everything.headers["location"].endswith("?updated=4")


async def test_the_series_edit_is_refused_without_the_point(client, users, manager, clock):
    leader = await users.make(roles=[Role.LEADER], display_name="Lars Leader")
    series_id, _ = await _series(client, manager, organizer_id=str(leader.id))
    await sign_in(client, leader.email)
    assert 'id="edit-series"' not in (await client.get(f"/console/series/{series_id}")).text
    assert (await client.get(f"/console/series/{series_id}/edit")).status_code == 403
    csrf = await page_csrf(client)
    forged = await client.post(f"/console/series/{series_id}/edit", data={"csrf_token": csrf, "title": "Forged"})
    assert forged.status_code == 403 and 'data-code="PERMISSION_DENIED"' in forged.text
    api = await client.patch(f"{BASE}/series/{series_id}", headers=leader.headers, json={"title": "Forged"})
    assert api.status_code == 403
    read = (await client.get(f"{BASE}/series/{series_id}", headers=manager.headers)).json()
    assert read["title"] == "Team review"
