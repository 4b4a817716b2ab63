"""Cancelling a meeting from its page and the meeting's audit trail (issue 18), over plain HTTP: a confirm step,
then the API's command with the optional reason; the service's refusals in words (cancelled meanwhile, a reason too
long); offered and refused as the API's `meeting:update` is; the trail names who did what and when, pages with the
API's cursor, and is there only for `meeting:audit:read`."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from tenet.iam.permissions import Role
from tests.web.test_console_http import BASE, csrf_of, page_csrf, sign_in


@pytest.fixture
async def manager(users):
    return await users.make(roles=[Role.MEETING_MANAGER], display_name="Mona Manager")


async def _meeting(client, manager, clock, **body) -> dict:
    start = clock.now() + timedelta(hours=1)
    response = await client.post(f"{BASE}/meetings", headers=manager.headers, json={
        "title": "Weekly sync", "timezone": "Asia/Shanghai", "start_time": start.isoformat(),
        "end_time": (start + timedelta(hours=1)).isoformat(), **body})
    assert response.status_code == 201, response.text
    return response.json()


async def _status(client, manager, meeting_id: str) -> dict:
    return (await client.get(f"{BASE}/meetings/{meeting_id}", headers=manager.headers)).json()


async def test_a_manager_cancels_with_a_reason_after_confirming(client, manager, clock):
    meeting = await _meeting(client, manager, clock)
    mid = meeting["id"]
    await sign_in(client, manager.email)
    page = await client.get(f"/console/meetings/{mid}")
    assert f'id="cancel" href="/console/meetings/{mid}/cancel"' in page.text
    confirm = await client.get(f"/console/meetings/{mid}/cancel")
    assert confirm.status_code == 200 and 'id="cancel-form"' in confirm.text and 'id="keep"' in confirm.text
    assert (await _status(client, manager, mid))["status"] == "SCHEDULED"  # asking is not cancelling

    done = await client.post(f"/console/meetings/{mid}/cancel", data={
        "csrf_token": csrf_of(confirm.text), "reason": "  The room is flooded  "})
    assert done.status_code == 303 and done.headers["location"] == f"/console/meetings/{mid}"
    read = await _status(client, manager, mid)
    assert read["status"] == "CANCELLED" and read["cancel_reason"] == "The room is flooded"
    after = await client.get(f"/console/meetings/{mid}")
    assert 'id="cancel"' not in after.text and 'id="edit"' not in after.text
    assert re.search(r'id="status">Cancelled<', after.text) and 'id="cancel-reason">The room is flooded<' in after.text


async def test_cancelling_twice_and_a_long_reason_are_said_in_words(client, manager, clock):
    meeting = await _meeting(client, manager, clock)
    mid = meeting["id"]
    await sign_in(client, manager.email)
    csrf = await page_csrf(client, f"/console/meetings/{mid}/cancel")
    too_long = await client.post(f"/console/meetings/{mid}/cancel", data={"csrf_token": csrf, "reason": "x" * 501})
    assert too_long.status_code == 422 and 'data-code="VALIDATION_FAILED"' in too_long.text
    assert 'aria-describedby="cancel-error"' in too_long.text and "x" * 501 in too_long.text  # kept, to shorten
    assert (await _status(client, manager, mid))["status"] == "SCHEDULED"

    first = await client.post(f"/console/meetings/{mid}/cancel", data={"csrf_token": csrf})
    assert first.status_code == 303
    assert (await _status(client, manager, mid))["cancel_reason"] is None  # no reason: none recorded
    again = await client.post(f"/console/meetings/{mid}/cancel", data={"csrf_token": csrf, "reason": "again"})
    assert again.status_code == 409 and 'data-code="MEETING_CANCELLED"' in again.text
    assert "The meeting is cancelled." in again.text
    form = await client.get(f"/console/meetings/{mid}/cancel")
    assert form.status_code == 409 and 'id="cancel-form"' not in form.text
    api = await client.post(f"{BASE}/meetings/{mid}/cancel", headers=manager.headers, json={})
    assert api.status_code == 409 and api.json()["code"] == "MEETING_CANCELLED"  # the same refusal


@pytest.mark.parametrize("role", [Role.ADMINISTRATOR, Role.MEETING_MANAGER, Role.LEADER, Role.EMPLOYEE])
async def test_cancel_and_the_trail_are_offered_and_refused_as_the_api_does(client, users, manager, clock, role):
    person = await users.make(roles=[role], display_name="Pat Person")
    meeting = await _meeting(client, manager, clock, required_attendee_ids=[str(person.id)])
    mid = meeting["id"]
    await sign_in(client, person.email)
    page = await client.get(f"/console/meetings/{mid}")
    api_trail = await client.get(f"{BASE}/audit-logs", params={"meeting_id": mid}, headers=person.headers)
    trail = await client.get(f"/console/meetings/{mid}/audit")
    assert ('id="audit"' in page.text) == (api_trail.status_code == 200)
    assert (trail.status_code == 200) == (api_trail.status_code == 200)
    if trail.status_code != 200:
        assert trail.status_code == 403 and 'data-code="PERMISSION_DENIED"' in trail.text

    form = await client.get(f"/console/meetings/{mid}/cancel")
    csrf = await page_csrf(client)
    forged = await client.post(f"/console/meetings/{mid}/cancel", data={"csrf_token": csrf, "reason": "forged"})
    may_cancel = role in (Role.ADMINISTRATOR, Role.MEETING_MANAGER)
    assert ('id="cancel"' in page.text) == may_cancel
    assert (form.status_code == 200) == may_cancel and (forged.status_code == 303) == may_cancel
    if not may_cancel:
        assert forged.status_code == 403 and 'data-code="PERMISSION_DENIED"' in forged.text
        api = await client.post(f"{BASE}/meetings/{mid}/cancel", headers=person.headers, json={})
        assert api.status_code == 403  # the API refuses the same people
    assert (await _status(client, manager, mid))["status"] == ("CANCELLED" if may_cancel else "SCHEDULED")


async def test_a_cancel_without_the_csrf_token_changes_nothing(client, manager, clock):
    meeting = await _meeting(client, manager, clock)
    await sign_in(client, manager.email)
    forged = await client.post(f"/console/meetings/{meeting['id']}/cancel", data={"reason": "no token"})
    assert forged.status_code == 403 and 'data-code="CSRF_REFUSED"' in forged.text
    assert (await _status(client, manager, meeting["id"]))["status"] == "SCHEDULED"


async def test_the_trail_names_who_did_what_and_pages_with_the_cursor(client, users, manager, clock):
    employee = await users.make(roles=[Role.EMPLOYEE], display_name="Emil Employee")
    meeting = await _meeting(client, manager, clock)
    mid = meeting["id"]
    version = meeting["version"]
    for n in range(24):  # 24 changes of the attendee list, after the creation: 25 entries, two pages of 20
        answer = await client.put(f"{BASE}/meetings/{mid}/required-attendees", headers={
            **manager.headers, "If-Match": f'"{version}"'}, json={"user_ids": [str(employee.id)] if n % 2 == 0 else []})
        assert answer.status_code == 200, answer.text
        version = (await _status(client, manager, mid))["version"]
    await sign_in(client, manager.email)
    csrf = await page_csrf(client, f"/console/meetings/{mid}/cancel")
    await client.post(f"/console/meetings/{mid}/cancel", data={"csrf_token": csrf, "reason": "done"})

    fragment = await client.get(f"/console/meetings/{mid}/audit", headers={"HX-Request": "true"})
    assert fragment.status_code == 200 and "<html" not in fragment.text and 'id="audit"' in fragment.text
    actions = re.findall(r'data-action="(\w+)"', fragment.text)
    assert len(actions) == 20 and actions[0] == "MEETING_CANCELLED"
    assert "Cancelled the meeting" in fragment.text and "Mona Manager" in fragment.text
    assert "(Asia/Shanghai)" in fragment.text  # when: in the meeting's zone
    older = re.search(r'id="audit-older" href="([^"]+)"', fragment.text)
    assert older and 'id="audit-newest"' not in fragment.text
    second = await client.get(older.group(1).replace("&amp;", "&"))
    assert second.status_code == 200 and "<html" in second.text  # without htmx: the page of its own
    rest = re.findall(r'data-action="(\w+)"', second.text)
    assert len(rest) == 6 and rest[-1] == "MEETING_CREATED" and 'id="audit-older"' not in second.text
    assert 'id="audit-newest"' in second.text
    api = await client.get(f"{BASE}/audit-logs", params={"meeting_id": mid, "limit": 100}, headers=manager.headers)
    assert [e["action"] for e in api.json()["items"]] == actions + rest  # the same entries, in the same order
    bad = await client.get(f"/console/meetings/{mid}/audit", params={"cursor": "nonsense"})
    assert bad.status_code == 400 and 'data-code="INVALID_CURSOR"' in bad.text


async def test_the_trail_and_the_cancel_form_in_chinese(client, manager, clock):
    meeting = await _meeting(client, manager, clock)
    await sign_in(client, manager.email, headers={"Accept-Language": "zh-CN"})
    client.headers["Accept-Language"] = "zh-CN"
    form = await client.get(f"/console/meetings/{meeting['id']}/cancel")
    assert '<html lang="zh-CN">' in form.text and "取消会议" in form.text and "保留会议" in form.text
    trail = await client.get(f"/console/meetings/{meeting['id']}/audit")
    assert "审计记录" in trail.text and "创建了会议" in trail.text and "Mona Manager" in trail.text
