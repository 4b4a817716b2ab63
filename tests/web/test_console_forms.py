"""Create and edit a meeting from the console (issue 18): the API's request models and commands, local times of
the meeting's zone, refusals next to their field, 412 with the new state for a stale edit, and no form (and a
refused forgery) for a role the API refuses."""

from __future__ import annotations

import re

import pytest

from tenet.iam.permissions import Role
from tests.web.test_console_http import BASE, _meeting, csrf_of, page_csrf, sign_in


@pytest.fixture
async def manager(users):
    return await users.make(roles=[Role.MEETING_MANAGER], display_name="Mona Manager")


def _form(csrf: str, **overrides: str) -> dict[str, str]:
    return {"csrf_token": csrf, "title": "Planning", "timezone": "Asia/Shanghai", "start": "2026-01-06T10:00",
            "end": "2026-01-06T11:30", "location": "Room 9", "city": "", "online_link": "", "description": "",
            "late_grace_minutes": "10", "checkin_opens_minutes_before": "", "offline_checkin_enabled": "on",
            **overrides}


async def test_a_manager_creates_a_meeting_in_its_local_time(client, manager):
    await sign_in(client, manager.email)
    listed = await client.get("/console/meetings")
    assert 'id="new-meeting"' in listed.text
    csrf = await page_csrf(client, "/console/meetings/new")
    created = await client.post("/console/meetings/new", data=_form(csrf))
    assert created.status_code == 303, created.text
    meeting_id = created.headers["location"].rsplit("/", 1)[1]
    meeting = (await client.get(f"{BASE}/meetings/{meeting_id}", headers=manager.headers)).json()
    assert meeting["start_time"].startswith("2026-01-06T02:00:00")
    assert meeting["end_time"].startswith("2026-01-06T03:30:00")
    assert (meeting["title"], meeting["location"], meeting["city"], meeting["late_grace_minutes"]) == \
        ("Planning", "Room 9", None, 10)
    assert meeting["offline_checkin_enabled"] is True and meeting["rotating_online_code"] is False


@pytest.mark.parametrize(("overrides", "field", "code"), [
    ({"end": "2026-01-06T09:00"}, "end", "MEETING_TIME_INVALID"),
    ({"timezone": "Mars/Olympus"}, "timezone", "TIMEZONE_INVALID"),
    ({"title": ""}, "title", "VALIDATION_FAILED"),
    ({"start": "tomorrow"}, "start", "VALIDATION_FAILED"),
    ({"late_grace_minutes": "9999"}, "late_grace_minutes", "VALIDATION_FAILED"),
    ({"online_link": "javascript:alert(1)"}, "online_link", "VALIDATION_FAILED"),
])
async def test_a_refusal_is_said_next_to_its_field(client, manager, overrides, field, code):
    await sign_in(client, manager.email)
    csrf = await page_csrf(client, "/console/meetings/new")
    refused = await client.post("/console/meetings/new", data=_form(csrf, **overrides))
    assert refused.status_code == 422, refused.text
    assert re.search(rf'id="e-{field}" class="error field-error" data-code="{code}"', refused.text)
    assert f'aria-describedby="e-{field}"' in refused.text
    # What was typed is kept.
    assert 'value="Room 9"' in refused.text
    mine = await client.get(f"{BASE}/meetings", headers=manager.headers)
    assert mine.json()["items"] == []


async def test_an_edit_is_saved_and_a_stale_one_shows_the_new_state(client, manager, clock):
    meeting = await _meeting(client, manager, clock)
    await sign_in(client, manager.email)
    page = await client.get(f"/console/meetings/{meeting['id']}")
    assert f'href="/console/meetings/{meeting["id"]}/edit"' in page.text
    form_page = await client.get(f"/console/meetings/{meeting['id']}/edit")
    assert 'value="Room 4"' in form_page.text and 'value="Asia/Shanghai"' in form_page.text
    csrf = csrf_of(form_page.text)
    version = re.search(r'name="version" value="(\d+)"', form_page.text).group(1)
    start = re.search(r'id="f-start" name="start" type="datetime-local" value="([^"]+)"', form_page.text).group(1)
    end = re.search(r'id="f-end" name="end" type="datetime-local" value="([^"]+)"', form_page.text).group(1)
    fields = _form(csrf, title="Weekly sync", start=start, end=end, location="Room 5", version=version)
    saved = await client.post(f"/console/meetings/{meeting['id']}/edit", data=fields)
    assert saved.status_code == 303, saved.text
    now = (await client.get(f"{BASE}/meetings/{meeting['id']}", headers=manager.headers)).json()
    assert now["location"] == "Room 5" and now["start_time"] == meeting["start_time"]
    stale = await client.post(f"/console/meetings/{meeting['id']}/edit", data={**fields, "location": "Room 6"})
    assert stale.status_code == 412
    assert 'data-code="PRECONDITION_FAILED"' in stale.text and 'value="Room 5"' in stale.text
    assert (await client.get(f"{BASE}/meetings/{meeting['id']}", headers=manager.headers)).json()["location"] \
        == "Room 5"


async def test_an_employee_gets_no_form_and_a_forged_one_is_refused(client, users, manager, clock):
    employee = await users.make(roles=[Role.EMPLOYEE])
    meeting = await _meeting(client, manager, clock, required_attendee_ids=[str(employee.id)])
    await sign_in(client, employee.email)
    assert 'id="new-meeting"' not in (await client.get("/console/meetings")).text
    assert 'id="edit"' not in (await client.get(f"/console/meetings/{meeting['id']}")).text
    assert (await client.get("/console/meetings/new")).status_code == 403
    assert (await client.get(f"/console/meetings/{meeting['id']}/edit")).status_code == 403
    csrf = await page_csrf(client)
    assert (await client.post("/console/meetings/new", data=_form(csrf))).status_code == 403
    edit = await client.post(f"/console/meetings/{meeting['id']}/edit", data=_form(csrf, location="Hijacked"))
    assert edit.status_code == 403
    assert (await client.get(f"{BASE}/meetings/{meeting['id']}", headers=manager.headers)).json()["location"] \
        == "Room 4"
