"""Administration in the console (issue 18), over plain HTTP: people searched and paged, a meeting-attendance role
granted and revoked through identity's command (the last administrator keeps theirs), the change signing the person
out of the console and changing what their token may do at once; the audit log with its filters; the series list and
a template's edit and delete; each page offered or refused by role (a table), CSRF refused, in Chinese too."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import httpx
import pytest

from tenet.iam.permissions import Role
from tests.web.test_console_http import BASE, csrf_of, page_csrf, sign_in

ROLES = [Role.ADMINISTRATOR, Role.MEETING_MANAGER, Role.LEADER, Role.EMPLOYEE]


@asynccontextmanager
async def browser(app) -> AsyncIterator[httpx.AsyncClient]:
    """Another person's cookie jar (a second browser)."""
    transport = httpx.ASGITransport(app=app, client=("203.0.113.8", 50001))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as other:
        yield other


async def _grant(client, user_id, role: str, change: str = "grant", **extra) -> httpx.Response:
    csrf = await page_csrf(client, "/console/admin/people")
    return await client.post(f"/console/admin/people/{user_id}/roles",
                             data={"csrf_token": csrf, "role": role, "change": change, **extra})


async def _roles(client, admin, user_id) -> list[str]:
    read = await client.get(f"/api/v1/iam/users/{user_id}", headers=admin.headers)
    assert read.status_code == 200, read.text
    return read.json()["roles"]


# --- who may see what (the table) ---------------------------------------------------------------------------

PAGES = ["/console/admin/people", "/console/admin/audit", "/console/series", "/console/templates"]
# page -> the roles that may open it (the API's points: iam:role:assign; meeting:read; meeting:template:manage)
ALLOWED = {
    "/console/admin/people": {Role.ADMINISTRATOR},
    "/console/admin/audit": {Role.ADMINISTRATOR},
    "/console/series": {Role.ADMINISTRATOR, Role.MEETING_MANAGER, Role.LEADER, Role.EMPLOYEE},
    "/console/templates": {Role.ADMINISTRATOR, Role.MEETING_MANAGER},
}


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("path", PAGES)
async def test_each_page_by_role(client, users, role, path):
    person = await users.make(roles=[role], display_name="Pat Person")
    await sign_in(client, person.email)
    page = await client.get(path)
    if role in ALLOWED[path]:
        assert page.status_code == 200, page.text
    else:
        assert page.status_code == 403 and 'data-code="PERMISSION_DENIED"' in page.text
    home = await client.get("/console")
    assert ('id="nav-admin"' in home.text) == (role == Role.ADMINISTRATOR)


@pytest.mark.parametrize("role", [Role.MEETING_MANAGER, Role.LEADER, Role.EMPLOYEE])
async def test_a_non_administrator_cannot_change_roles(client, users, role):
    person = await users.make(roles=[role])
    target = await users.make(roles=[Role.EMPLOYEE])
    admin = await users.admin()
    await sign_in(client, person.email)
    csrf = await page_csrf(client)
    refused = await client.post(f"/console/admin/people/{target.id}/roles",
                                data={"csrf_token": csrf, "role": "MeetingManager", "change": "grant"})
    assert refused.status_code == 403
    assert await _roles(client, admin, target.id) == ["Employee"]


async def test_a_role_change_without_the_csrf_token_is_refused(client, users):
    admin = await users.admin()
    target = await users.make(roles=[Role.EMPLOYEE])
    await sign_in(client, admin.email)
    forged = await client.post(f"/console/admin/people/{target.id}/roles",
                               data={"role": "MeetingManager", "change": "grant"})
    assert forged.status_code == 403 and 'data-code="CSRF_REFUSED"' in forged.text
    wrong = await client.post(f"/console/admin/people/{target.id}/roles",
                              data={"csrf_token": "0" * 64, "role": "MeetingManager", "change": "grant"})
    assert wrong.status_code == 403
    assert await _roles(client, admin, target.id) == ["Employee"]


# --- grant and revoke ----------------------------------------------------------------------------------------

async def test_grant_then_revoke_changes_what_the_person_can_do_at_once(app, client, users):
    admin = await users.admin()
    person = await users.make(roles=[Role.EMPLOYEE], display_name="Erin Employee")
    await sign_in(client, admin.email)
    async with browser(app) as theirs:
        await sign_in(theirs, person.email)
        assert (await theirs.get("/console/templates")).status_code == 403
        assert (await theirs.get(f"{BASE}/templates", headers=person.headers)).status_code == 403

        granted = await _grant(client, person.id, "MeetingManager")
        assert granted.status_code == 303 and granted.headers["location"] == "/console/admin/people"
        assert await _roles(client, admin, person.id) == ["Employee", "MeetingManager"]
        # The console session died with the change: back to sign-in, then the new roles.
        dead = await theirs.get("/console/templates")
        assert dead.status_code == 303 and dead.headers["location"].startswith("/console/sign-in")
        # The token is read per request: it carries the new role now.
        assert (await theirs.get(f"{BASE}/templates", headers=person.headers)).status_code == 200
        await sign_in(theirs, person.email)
        assert (await theirs.get("/console/templates")).status_code == 200

        listed = await client.get("/console/admin/people", params={"q": "erin"})
        row = listed.text.split(f'data-user="{person.id}"')[1].split("</tr>")[0]
        assert 'data-role="MeetingManager"' in row and 'data-change="revoke"' in row

        revoked = await _grant(client, person.id, "MeetingManager", change="revoke")
        assert revoked.status_code == 303
        assert await _roles(client, admin, person.id) == ["Employee"]
        again = await theirs.get("/console/templates")
        assert again.status_code == 303 and again.headers["location"].startswith("/console/sign-in")
        assert (await theirs.get(f"{BASE}/templates", headers=person.headers)).status_code == 403


async def test_the_last_administrator_keeps_the_role(client, users):
    admin = await users.admin()
    await sign_in(client, admin.email)
    others = (await client.get("/api/v1/iam/users", headers=admin.headers, params={"limit": 100})).json()["items"]
    assert [u["id"] for u in others if "Administrator" in u["roles"]] == [str(admin.id)]
    refused = await _grant(client, admin.id, "Administrator", change="revoke")
    assert refused.status_code == 409 and 'data-code="LAST_ADMINISTRATOR"' in refused.text
    assert "Administrator" in await _roles(client, admin, admin.id)


async def test_an_unknown_role_or_account_is_refused(client, users):
    admin = await users.admin()
    target = await users.make(roles=[Role.EMPLOYEE])
    await sign_in(client, admin.email)
    odd = await _grant(client, target.id, "Superuser")
    assert odd.status_code == 422
    nobody = await _grant(client, "00000000-0000-0000-0000-000000000000", "Leader")
    assert nobody.status_code == 404 and 'data-code="USER_NOT_FOUND"' in nobody.text
    agent = await _grant(client, target.id, "ReservationAgent")
    assert agent.status_code == 422
    assert await _roles(client, admin, target.id) == ["Employee"]


async def test_other_roles_are_kept_when_one_is_granted(client, users):
    admin = await users.admin()
    target = await users.make(roles=[Role.EMPLOYEE, Role.RESERVATION_AGENT])
    await sign_in(client, admin.email)
    assert (await _grant(client, target.id, "Leader")).status_code == 303
    assert await _roles(client, admin, target.id) == ["Employee", "Leader", "ReservationAgent"]


async def test_people_are_searched_and_paged(client, users):
    admin = await users.admin()
    for n in range(27):
        await users.make(roles=[Role.EMPLOYEE], display_name=f"Sam Searchable {n:02}")
    await users.make(roles=[Role.EMPLOYEE], display_name="Other Person", email="100%_odd@example.com")
    await sign_in(client, admin.email)
    first = await client.get("/console/admin/people", params={"q": "searchable"})
    assert first.status_code == 200 and first.text.count('<tr data-user="') == 25
    assert "Other Person" not in first.text
    next_link = first.text.split('id="next-page" href="')[1].split('"')[0].replace("&amp;", "&")
    second = await client.get(next_link)
    assert second.text.count('<tr data-user="') == 2
    shown = [n for n in range(27) if f"Sam Searchable {n:02}" in first.text + second.text]
    assert shown == list(range(27))
    assert 'id="next-page"' not in second.text
    literal = await client.get("/console/admin/people", params={"q": "100%_"})
    assert literal.text.count('<tr data-user="') == 1 and "Other Person" in literal.text
    assert (await client.get("/console/admin/people", params={"q": "%"})).text.count('<tr data-user="') == 1


# --- the audit log ----------------------------------------------------------------------------------------------

async def _meeting(client, manager, clock, title: str) -> dict:
    start = clock.now() + timedelta(hours=1)
    made = await client.post(f"{BASE}/meetings", headers=manager.headers, json={
        "title": title, "timezone": "UTC", "start_time": start.isoformat(),
        "end_time": (start + timedelta(hours=1)).isoformat()})
    assert made.status_code == 201, made.text
    return made.json()


async def test_the_audit_log_with_its_filters(client, users, clock):
    admin = await users.admin()
    manager = await users.make(roles=[Role.MEETING_MANAGER], display_name="Mona Manager",
                               email="mona@example.com")
    one = await _meeting(client, manager, clock, "One")
    two = await _meeting(client, admin, clock, "Two")
    cancelled = await client.post(f"{BASE}/meetings/{one['id']}/cancel", headers=manager.headers,
                                  json={"reason": "No need"})
    assert cancelled.status_code in (200, 204), cancelled.text
    await sign_in(client, admin.email)
    everything = await client.get("/console/admin/audit")
    assert everything.status_code == 200
    assert one["id"] in everything.text and two["id"] in everything.text
    by_meeting = await client.get("/console/admin/audit", params={"meeting": two["id"]})
    assert two["id"] in by_meeting.text and f'>{one["id"]}<' not in by_meeting.text
    by_actor = await client.get("/console/admin/audit", params={"actor": "MONA@example.com"})
    assert f'data-actor="{admin.id}"' not in by_actor.text and f'data-actor="{manager.id}"' in by_actor.text
    by_action = await client.get("/console/admin/audit", params={"action": "MEETING_CANCELLED"})
    assert by_action.text.count('<tr data-action="') == 1 and 'data-action="MEETING_CANCELLED"' in by_action.text
    today = clock.now().date()
    in_range = await client.get("/console/admin/audit", params={"from": today.isoformat(), "to": today.isoformat()})
    assert in_range.text.count('<tr data-action="') >= 3
    before = await client.get("/console/admin/audit", params={"to": (today - timedelta(days=2)).isoformat()})
    assert '<tr data-action="' not in before.text
    nobody = await client.get("/console/admin/audit", params={"actor": "nobody@example.com"})
    assert nobody.status_code == 422 and 'id="e-actor"' in nobody.text
    backwards = await client.get("/console/admin/audit", params={"from": today.isoformat(),
                                                                "to": (today - timedelta(days=1)).isoformat()})
    assert backwards.status_code == 422 and 'data-code="REPORT_RANGE_INVALID"' in backwards.text
    odd = await client.get("/console/admin/audit", params={"action": "DROP_TABLE"})
    assert odd.status_code == 422 and 'id="e-action"' in odd.text


async def test_the_audit_log_is_paged(client, users, clock):
    admin = await users.admin()
    for n in range(55):
        await _meeting(client, admin, clock, f"M{n}")
    await sign_in(client, admin.email)
    first = await client.get("/console/admin/audit", params={"action": "MEETING_CREATED"})
    assert first.text.count('<tr data-action="MEETING_CREATED"') == 50
    older = first.text.split('id="audit-older" href="')[1].split('"')[0].replace("&amp;", "&")
    assert "action=MEETING_CREATED" in older
    second = await client.get(older)
    assert second.text.count('<tr data-action="MEETING_CREATED"') == 5 and 'id="audit-newest"' in second.text
    assert 'id="audit-older"' not in second.text


# --- the series list, a template's edit and delete ---------------------------------------------------------------

async def test_the_series_list_links_each_series(client, users):
    manager = await users.make(roles=[Role.MEETING_MANAGER])
    made = await client.post(f"{BASE}/series", headers=manager.headers, json={
        "title": "Weekly sync", "timezone": "Asia/Shanghai", "rrule": "FREQ=WEEKLY;BYDAY=MO;COUNT=3",
        "start_date": "2026-03-02", "start_local_time": "10:00", "duration_minutes": 30})
    assert made.status_code == 201, made.text
    await sign_in(client, manager.email)
    listed = await client.get("/console/series")
    assert listed.status_code == 200 and f'href="/console/series/{made.json()["series"]["id"]}"' in listed.text
    assert "Weekly sync" in listed.text and 'id="new-series"' in listed.text


async def test_a_template_is_edited_and_deleted(client, users):
    manager = await users.make(roles=[Role.MEETING_MANAGER])
    made = await client.post(f"{BASE}/templates", headers=manager.headers, json={
        "label": "Stand-up", "title": "Stand-up", "duration_minutes": 15})
    template_id = made.json()["id"]
    await sign_in(client, manager.email)
    listed = await client.get("/console/templates")
    assert f'href="/console/templates/{template_id}/edit"' in listed.text
    form = await client.get(f"/console/templates/{template_id}/edit")
    assert form.status_code == 200 and 'value="Stand-up"' in form.text
    csrf = csrf_of(form.text)
    saved = await client.post(f"/console/templates/{template_id}/edit", data={
        "csrf_token": csrf, "version": "1", "label": "Daily", "title": "Daily stand-up", "duration_minutes": "20",
        "location": "Room 1", "city": "", "description": ""})
    assert saved.status_code == 303, saved.text
    read = (await client.get(f"{BASE}/templates/{template_id}", headers=manager.headers)).json()
    assert (read["label"], read["title"], read["duration_minutes"], read["location"]) == (
        "Daily", "Daily stand-up", 20, "Room 1")
    stale = await client.post(f"/console/templates/{template_id}/edit", data={
        "csrf_token": csrf, "version": "1", "label": "Late", "title": "Late", "duration_minutes": "20"})
    assert stale.status_code == 412 and 'data-code="PRECONDITION_FAILED"' in stale.text
    assert 'value="Daily"' in stale.text  # the new state is shown
    bad = await client.post(f"/console/templates/{template_id}/edit", data={
        "csrf_token": csrf, "version": str(read["version"]), "label": "Daily", "title": "Daily",
        "duration_minutes": "0"})
    assert bad.status_code == 422 and 'id="e-duration_minutes"' in bad.text
    forged = await client.post(f"/console/templates/{template_id}/delete", data={})
    assert forged.status_code == 403
    deleted = await client.post(f"/console/templates/{template_id}/delete", data={"csrf_token": csrf})
    assert deleted.status_code == 303
    assert (await client.get(f"{BASE}/templates/{template_id}", headers=manager.headers)).status_code == 404


@pytest.mark.parametrize("role", [Role.LEADER, Role.EMPLOYEE])
async def test_template_edit_and_delete_are_refused_as_the_api_does(client, users, role):
    manager = await users.make(roles=[Role.MEETING_MANAGER])
    person = await users.make(roles=[role])
    template_id = (await client.post(f"{BASE}/templates", headers=manager.headers, json={
        "label": "Stand-up", "title": "Stand-up", "duration_minutes": 15})).json()["id"]
    await sign_in(client, person.email)
    csrf = await page_csrf(client)
    assert (await client.get(f"/console/templates/{template_id}/edit")).status_code == 403
    edit = await client.post(f"/console/templates/{template_id}/edit", data={
        "csrf_token": csrf, "version": "1", "label": "X", "title": "X", "duration_minutes": "5"})
    assert edit.status_code == 403
    assert (await client.post(f"/console/templates/{template_id}/delete", data={"csrf_token": csrf})).status_code \
        == 403
    api = await client.patch(f"{BASE}/templates/{template_id}", headers=person.headers, json={"label": "X"})
    assert api.status_code == 403
    assert (await client.get(f"{BASE}/templates/{template_id}", headers=manager.headers)).json()["label"] == \
        "Stand-up"


async def test_the_administration_in_chinese(client, users):
    admin = await users.admin()
    policy = (await client.get(f"{BASE}/outlook/settings", headers=admin.headers)).json()
    changed = await client.put(f"{BASE}/outlook/settings", headers=admin.headers, json={
        **{k: policy[k] for k in ("subscription_lifetime_minutes", "renewal_margin_minutes", "window_days_back",
                                  "window_days_ahead", "reconcile_cron", "max_concurrent_requests",
                                  "retry_max_attempts", "retry_base_seconds")}, "batch_size": 200})
    assert changed.status_code == 200, changed.text
    await sign_in(client, admin.email, headers={"Accept-Language": "zh-CN"})
    client.headers["Accept-Language"] = "zh-CN"
    people = await client.get("/console/admin/people")
    assert "人员与角色" in people.text and "系统管理" in people.text and "授予会议管理员" in people.text
    assert '<td data-status="active">有效</td>' in people.text and ">active<" not in people.text
    audit = await client.get("/console/admin/audit")
    assert "审计日志" in audit.text and "清除筛选" in audit.text
    assert 'data-action="OUTLOOK_POLICY_UPDATED"' in audit.text and "修改了 Outlook 同步设置" in audit.text
    assert "<code>" not in audit.text  # no action said by its code, in the log or in the filter's choices
    assert not re.search(r'<option value="([A-Z_]+)"[^>]*>\1</option>', audit.text)
    refused = await _grant(client, admin.id, "Administrator", change="revoke")
    assert "这是最后一位在职管理员" in refused.text
