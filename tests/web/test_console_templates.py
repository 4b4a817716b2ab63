"""Meeting templates in the console (issue 18), over plain HTTP: a manager saves a meeting as a template (its fields,
length and required attendees, through the API's model and command), lists the templates, and makes a new meeting
from one by giving only its start (the template fills the rest and its attendees, as `POST /meetings` with
`template_id` does); refusals in words; offered and refused as the API's points are; in Chinese too."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from tenet.iam.permissions import Role
from tests.web.test_console_http import BASE, csrf_of, page_csrf, sign_in


@pytest.fixture
async def manager(users):
    return await users.make(roles=[Role.MEETING_MANAGER], display_name="Mona Manager")


async def _meeting(client, manager, clock, **body) -> dict:
    start = clock.now() + timedelta(hours=1)
    response = await client.post(f"{BASE}/meetings", headers=manager.headers, json={
        "title": "Quarterly review", "timezone": "Asia/Shanghai", "location": "Board room", "city": "Shanghai",
        "late_grace_minutes": 7, "start_time": start.isoformat(),
        "end_time": (start + timedelta(minutes=90)).isoformat(), **body})
    assert response.status_code == 201, response.text
    return response.json()


async def test_save_a_meeting_as_a_template_then_make_a_meeting_from_it(client, users, manager, clock):
    attendee = await users.make(roles=[Role.EMPLOYEE], display_name="Emil Employee")
    meeting = await _meeting(client, manager, clock, required_attendee_ids=[str(attendee.id)])
    await sign_in(client, manager.email)
    page = await client.get(f"/console/meetings/{meeting['id']}")
    assert f'id="save-template" href="/console/meetings/{meeting["id"]}/template"' in page.text
    form = await client.get(f"/console/meetings/{meeting['id']}/template")
    assert form.status_code == 200 and 'value="Quarterly review"' in form.text
    saved = await client.post(f"/console/meetings/{meeting['id']}/template", data={
        "csrf_token": csrf_of(form.text), "label": "Quarterly"})
    assert saved.status_code == 303 and saved.headers["location"] == "/console/templates"
    made = (await client.get(f"{BASE}/templates", headers=manager.headers)).json()["items"]
    assert len(made) == 1
    template = made[0]
    assert (template["label"], template["title"], template["duration_minutes"], template["city"],
            template["late_grace_minutes"], template["timezone"]) == (
        "Quarterly", "Quarterly review", 90, "Shanghai", 7, "Asia/Shanghai")
    assert template["attendee_user_ids"] == [str(attendee.id)]

    listed = await client.get("/console/templates")
    assert f'data-template="{template["id"]}"' in listed.text and "Quarterly review" in listed.text
    apply_form = await client.get(f"/console/templates/{template['id']}/meeting")
    assert apply_form.status_code == 200 and 'value="Asia/Shanghai"' in apply_form.text
    created = await client.post(f"/console/templates/{template['id']}/meeting", data={
        "csrf_token": csrf_of(apply_form.text), "timezone": "Asia/Shanghai", "start": "2026-02-03T14:00"})
    assert created.status_code == 303
    new_id = re.search(r"/console/meetings/(\w+)$", created.headers["location"]).group(1)
    read = (await client.get(f"{BASE}/meetings/{new_id}", headers=manager.headers)).json()
    assert read["title"] == "Quarterly review" and read["location"] == "Board room" and read["template_id"]
    assert datetime.fromisoformat(read["start_time"]) == datetime(2026, 2, 3, 14, 0, tzinfo=ZoneInfo("Asia/Shanghai"))
    assert datetime.fromisoformat(read["end_time"]) - datetime.fromisoformat(read["start_time"]) == \
        timedelta(minutes=90)
    required = (await client.get(f"{BASE}/meetings/{new_id}/required-attendees", headers=manager.headers)).json()
    assert [r["user_id"] for r in required["items"]] == [str(attendee.id)]


async def test_refusals_are_said_in_words(client, manager, clock):
    meeting = await _meeting(client, manager, clock)
    await sign_in(client, manager.email)
    csrf = await page_csrf(client, f"/console/meetings/{meeting['id']}/template")
    no_label = await client.post(f"/console/meetings/{meeting['id']}/template", data={"csrf_token": csrf,
                                                                                    "label": "  "})
    assert no_label.status_code == 422 and 'data-code="VALIDATION_FAILED"' in no_label.text
    assert (await client.get(f"{BASE}/templates", headers=manager.headers)).json()["items"] == []
    await client.post(f"/console/meetings/{meeting['id']}/template", data={"csrf_token": csrf, "label": "Review"})
    template_id = (await client.get(f"{BASE}/templates", headers=manager.headers)).json()["items"][0]["id"]
    bad_zone = await client.post(f"/console/templates/{template_id}/meeting", data={
        "csrf_token": csrf, "timezone": "Mars/Olympus", "start": "2026-02-03T14:00"})
    assert bad_zone.status_code == 422 and 'id="e-timezone"' in bad_zone.text
    assert 'data-code="TIMEZONE_INVALID"' in bad_zone.text
    bad_start = await client.post(f"/console/templates/{template_id}/meeting", data={
        "csrf_token": csrf, "timezone": "Asia/Shanghai", "start": "tomorrow"})
    assert bad_start.status_code == 422 and 'id="e-start"' in bad_start.text
    unknown = await client.get("/console/templates/00000000-0000-0000-0000-000000000000/meeting")
    assert unknown.status_code == 404 and 'data-code="TEMPLATE_NOT_FOUND"' in unknown.text


@pytest.mark.parametrize("role", [Role.ADMINISTRATOR, Role.MEETING_MANAGER, Role.LEADER, Role.EMPLOYEE])
async def test_templates_are_offered_and_refused_as_the_api_does(client, users, manager, clock, role):
    person = await users.make(roles=[role], display_name="Pat Person")
    meeting = await _meeting(client, manager, clock, required_attendee_ids=[str(person.id)])
    template = await client.post(f"{BASE}/templates", headers=manager.headers, json={
        "label": "Stand-up", "title": "Stand-up", "duration_minutes": 15})
    assert template.status_code == 201
    await sign_in(client, person.email)
    api_list = await client.get(f"{BASE}/templates", headers=person.headers)
    listed = await client.get("/console/templates")
    assert (listed.status_code == 200) == (api_list.status_code == 200)
    page = await client.get(f"/console/meetings/{meeting['id']}")
    assert ('id="save-template"' in page.text) == (api_list.status_code == 200)
    csrf = await page_csrf(client)
    forged = await client.post(f"/console/meetings/{meeting['id']}/template", data={"csrf_token": csrf,
                                                                                  "label": "Forged"})
    assert (forged.status_code == 303) == (api_list.status_code == 200)
    applied = await client.post(f"/console/templates/{template.json()['id']}/meeting", data={
        "csrf_token": csrf, "timezone": "UTC", "start": "2026-02-03T09:00"})
    api_create = await client.post(f"{BASE}/meetings", headers=person.headers, json={
        "template_id": template.json()["id"], "start_time": "2026-02-04T09:00:00+00:00"})
    assert (applied.status_code == 303) == (api_create.status_code == 201)
    if applied.status_code != 303:
        assert applied.status_code == 403 and 'data-code="PERMISSION_DENIED"' in applied.text


async def test_the_templates_in_chinese(client, manager, clock):
    meeting = await _meeting(client, manager, clock)
    await sign_in(client, manager.email, headers={"Accept-Language": "zh-CN"})
    client.headers["Accept-Language"] = "zh-CN"
    form = await client.get(f"/console/meetings/{meeting['id']}/template")
    assert '<html lang="zh-CN">' in form.text and "保存为模板" in form.text
    listed = await client.get("/console/templates")
    assert "会议模板" in listed.text and "还没有模板。" in listed.text
