"""The meetings list's filters and the week view (issue 18) over plain HTTP: city, series and organizer besides the
date range and status, with the API's cursor; the week view places each meeting by its start's date in its own
business zone, links the weeks before and after, keeps the filters, and speaks both languages. A walk-in cannot
learn a meeting's organizer or series by filtering on them (the restricted view hides both)."""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from tenet.iam.permissions import Role
from tests.web.test_console_http import BASE, page_csrf, sign_in

_LISTED = re.compile(r'data-meeting="([0-9a-f]{32})"')


@pytest.fixture
async def manager(users):
    return await users.make(roles=[Role.MEETING_MANAGER], display_name="Mona Manager")


@pytest.fixture
async def leader(users):
    return await users.make(roles=[Role.LEADER], display_name="Lars Leader")


async def _meeting(client, manager, *, start: datetime, zone: str = "Asia/Shanghai", **body) -> str:
    response = await client.post(f"{BASE}/meetings", headers=manager.headers, json={
        "title": "Sync", "timezone": zone, "start_time": start.isoformat(),
        "end_time": (start + timedelta(hours=1)).isoformat(), **body})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _listed(html: str) -> list[str]:
    return _LISTED.findall(html)


def _column(html: str, day: str) -> list[str]:
    found = re.search(rf'<li class="week-day" id="day-{day}".*?</section>', html, re.S)
    assert found, f"no column for {day}"
    return _listed(found.group(0))


async def test_the_list_filters_by_city_series_and_organizer(client, users, manager, leader, clock):
    start = clock.now() + timedelta(hours=2)
    shanghai = await _meeting(client, manager, start=start, city="Shanghai", title="In Shanghai")
    beijing = await _meeting(client, manager, start=start, city="Beijing", organizer_id=str(leader.id))
    series = await client.post(f"{BASE}/series", headers=manager.headers, json={
        "title": "Weekly", "timezone": "Asia/Shanghai", "rrule": "FREQ=WEEKLY;BYDAY=MO;COUNT=2",
        "start_date": clock.now().date().isoformat(), "start_local_time": "18:00", "duration_minutes": 30,
        "city": "Shanghai"})
    assert series.status_code == 201, series.text
    series_id, occurrences = series.json()["series"]["id"], sorted(series.json()["created_meeting_ids"])
    await sign_in(client, manager.email)

    by_city = await client.get("/console/meetings", params={"scope": "all", "city": "shanghai"})
    assert by_city.status_code == 200 and sorted(_listed(by_city.text)) == sorted([shanghai, *occurrences])
    by_organizer = await client.get("/console/meetings", params={"scope": "all", "organizer": "LARS"})
    assert _listed(by_organizer.text) == [beijing]
    by_email = await client.get("/console/meetings", params={"scope": "all", "organizer": leader.email})
    assert _listed(by_email.text) == [beijing]
    literal = await client.get("/console/meetings", params={"scope": "all", "organizer": "%"})
    assert _listed(literal.text) == []
    by_series = await client.get("/console/meetings", params={"scope": "all", "series": series_id})
    assert sorted(_listed(by_series.text)) == occurrences
    assert f'<option value="{series_id}" selected>Weekly</option>' in by_series.text
    combined = await client.get("/console/meetings", params={"scope": "all", "city": "Shanghai",
                                                            "series": series_id, "status": "SCHEDULED"})
    assert sorted(_listed(combined.text)) == occurrences

    for params in ({"city": "SHANGHAI"}, {"organizer": "lars"}, {"series_id": series_id, "city": "Shanghai"}):
        api = await client.get(f"{BASE}/meetings", params={"scope": "all", **params}, headers=manager.headers)
        page = await client.get("/console/meetings", params={
            "scope": "all", **{("series" if k == "series_id" else k): v for k, v in params.items()}})
        assert sorted(m["id"] for m in api.json()["items"]) == sorted(_listed(page.text)), params  # one query

    paged = await client.get("/console/meetings", params={"scope": "all", "city": "Shanghai"})
    assert "&amp;city=Shanghai&amp;" in paged.text  # the week view's and the next page's links keep the filters
    bad_series = await client.get("/console/meetings", params={"series": "not-a-series"})
    assert bad_series.status_code == 422 and 'data-code="VALIDATION_FAILED"' in bad_series.text
    too_long = await client.get("/console/meetings", params={"city": "x" * 101})
    assert too_long.status_code == 422 and 'data-code="VALIDATION_FAILED"' in too_long.text


async def test_the_list_pages_a_filtered_list_with_the_apis_cursor(client, manager, clock):
    start = clock.now() + timedelta(hours=2)
    wanted = [await _meeting(client, manager, start=start + timedelta(minutes=n), city="Hangzhou")
              for n in range(52)]
    await _meeting(client, manager, start=start, city="Suzhou")
    await sign_in(client, manager.email)
    first = await client.get("/console/meetings", params={"city": "Hangzhou"})
    assert len(_listed(first.text)) == 50
    next_link = re.search(r'id="next-page" href="([^"]+)"', first.text)
    assert next_link
    second = await client.get(next_link.group(1).replace("&amp;", "&"))
    assert second.status_code == 200
    assert sorted(_listed(first.text) + _listed(second.text)) == sorted(wanted)


async def test_a_walk_in_cannot_filter_by_what_the_restricted_view_hides(client, users, manager, leader, clock):
    walk_in = await users.make(roles=[Role.EMPLOYEE], display_name="Wanda Walkin")
    start = clock.now() + timedelta(minutes=5)
    meeting = await _meeting(client, manager, start=start, city="Shanghai", organizer_id=str(leader.id))
    details = (await client.get(f"{BASE}/meetings/{meeting}", headers=manager.headers)).json()
    code = details["qr_code_offline"]["check_in_url"].split("code=")[1]
    clock.set(start)
    checked_in = await client.post(f"{BASE}/meetings/{meeting}/check-in", headers=walk_in.headers, json={
        "mode": "offline", "code": code, "device_id": uuid.uuid4().hex})
    assert checked_in.status_code == 201, checked_in.text
    await sign_in(client, walk_in.email)
    assert _listed((await client.get("/console/meetings")).text) == [meeting]  # theirs: they were there
    assert _listed((await client.get("/console/meetings", params={"city": "Shanghai"})).text) == [meeting]
    assert _listed((await client.get("/console/meetings", params={"organizer": "Lars"})).text) == []
    api = await client.get(f"{BASE}/meetings", params={"organizer": "Lars"}, headers=walk_in.headers)
    assert api.status_code == 200 and api.json()["items"] == []  # the API's list, the same query
    week = await client.get("/console/meetings/week", params={"organizer": "Lars"})
    assert _listed(week.text) == []


async def test_the_week_view_places_meetings_by_their_local_start(client, manager, clock):
    """The clock is Monday 2026-01-05 09:00 UTC; the viewer is in Los Angeles (the default zone), so this week is
    Jan 5-11 there."""
    shanghai, los_angeles = ZoneInfo("Asia/Shanghai"), ZoneInfo("America/Los_Angeles")
    sunday_late = await _meeting(client, manager, start=datetime(2026, 1, 11, 23, 30, tzinfo=shanghai))
    next_monday = await _meeting(client, manager, start=datetime(2026, 1, 12, 0, 30, tzinfo=shanghai))
    last_sunday = await _meeting(client, manager, zone="America/Los_Angeles",
                                 start=datetime(2026, 1, 4, 20, 0, tzinfo=los_angeles))
    monday_evening = await _meeting(client, manager, zone="America/Los_Angeles",
                                    start=datetime(2026, 1, 5, 18, 0, tzinfo=los_angeles))
    wednesday = await _meeting(client, manager, start=datetime(2026, 1, 7, 9, 0, tzinfo=shanghai), city="Xi'an")
    await sign_in(client, manager.email)

    week = await client.get("/console/meetings/week")
    assert week.status_code == 200
    assert re.findall(r'id="day-(\d{4}-\d\d-\d\d)"', week.text) == [f"2026-01-{d:02}" for d in range(5, 12)]
    assert _column(week.text, "2026-01-05") == [monday_evening]  # 02:00 UTC on the 6th, Monday in its zone
    assert _column(week.text, "2026-01-07") == [wednesday]
    assert _column(week.text, "2026-01-11") == [sunday_late]  # 15:30 UTC: Sunday in Shanghai
    assert next_monday not in week.text and last_sunday not in week.text
    assert 'id="day-title-1" aria-current="date"' in week.text
    assert "Monday, January 5, 2026" in week.text
    # each at its time in its own zone, the zone named when it is not the viewer's
    assert re.search(r">11:30\W*PM \(Asia/Shanghai\)</time>", week.text)
    assert re.search(r">6:00\W*PM</time>", week.text)

    following = await client.get("/console/meetings/week", params={"week": "2026-01-14"})  # any day of a week
    assert _column(following.text, "2026-01-12") == [next_monday]
    previous = await client.get("/console/meetings/week", params={"week": "2026-01-01"})
    assert _column(previous.text, "2026-01-04") == [last_sunday]
    assert 'id="previous-week" rel="prev" href="/console/meetings/week?week=2025-12-29&amp;' in week.text
    assert 'id="next-week" rel="next" href="/console/meetings/week?week=2026-01-12&amp;' in week.text

    filtered = await client.get("/console/meetings/week", params={"city": "xi'an"})
    assert _listed(filtered.text) == [wednesday]
    assert "city=xi%27an" in filtered.text  # the week links keep the filters
    bad = await client.get("/console/meetings/week", params={"week": "next"})
    assert bad.status_code == 422 and 'data-code="VALIDATION_FAILED"' in bad.text


async def test_the_week_view_in_chinese(client, manager, db, clock):
    await _meeting(client, manager, start=datetime(2026, 1, 6, 10, 0, tzinfo=ZoneInfo("Asia/Shanghai")))
    await sign_in(client, manager.email)
    csrf = await page_csrf(client, "/console/meetings/week")
    switched = await client.post("/console/language", data={"csrf_token": csrf, "language": "zh-CN",
                                                            "next": "/console/meetings/week"})
    assert switched.status_code == 303
    week = await client.get("/console/meetings/week")
    assert week.status_code == 200 and '<html lang="zh-CN">' in week.text
    assert "2026年1月5日星期一" in week.text and "上一周" in week.text and "下一周" in week.text
    assert "周视图" in (await client.get("/console/meetings")).text


async def test_everyone_who_reads_meetings_sees_their_week_and_others_are_refused(client, users, manager, clock):
    employee = await users.make(roles=[Role.EMPLOYEE], display_name="Emil Employee")
    mine = await _meeting(client, manager, start=clock.now() + timedelta(hours=3),
                          required_attendee_ids=[str(employee.id)])
    await _meeting(client, manager, start=clock.now() + timedelta(hours=3))
    await sign_in(client, employee.email)
    week = await client.get("/console/meetings/week", params={"scope": "all"})  # not a manager: their own only
    assert week.status_code == 200 and _listed(week.text) == [mine]
    assert 'id="scope"' not in week.text and 'id="series"' not in week.text
    nobody = await users.make(roles=[], display_name="Nora Noroles")
    client.cookies.clear()
    await sign_in(client, nobody.email)
    refused = await client.get("/console/meetings/week")
    assert refused.status_code == 403 and 'data-code="PERMISSION_DENIED"' in refused.text
    assert (await client.get(f"{BASE}/meetings", headers=nobody.headers)).status_code == 403
