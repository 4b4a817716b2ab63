"""Administration in real Chromium against a real `tenet serve` (issue 18): an administrator (in Chinese) grants an
employee the meeting-manager role from the people page; that person, in another browser, is signed out by the
change, signs in again and now opens the managers' pages; the administrator revokes it, and the person's next page
load is back at sign-in, and after signing in the managers' page is refused. No page may trip the CSP."""

from __future__ import annotations

import re

import pytest

from tests.e2e.test_console_pages import _person, _shoot, _sign_in

pytestmark = pytest.mark.live_server


async def _change(page, user_id: str, role: str, change: str) -> None:
    row = page.locator(f'tr[data-user="{user_id}"]')
    await row.locator(f'button[data-role="{role}"][data-change="{change}"]').click()
    await page.wait_for_load_state("load")
    flipped = "revoke" if change == "grant" else "grant"
    await page.locator(f'tr[data-user="{user_id}"] button[data-role="{role}"][data-change="{flipped}"]').wait_for()


async def test_an_administrator_grants_and_revokes_a_manager_role(live_server, live_admin_token, watched):
    open_page, violations = watched
    admin = _person(live_server, live_admin_token, "Ada Admin", ["Administrator"])
    person = _person(live_server, live_admin_token, "Pia Person", ["Employee"])

    theirs = await open_page(viewport={"width": 1280, "height": 900})
    await _sign_in(theirs, live_server, person["email"])
    assert await theirs.locator("#nav-admin").count() == 0
    refused = await theirs.goto(f"{live_server.url}/console/templates")
    assert refused is not None and refused.status == 403

    mine = await open_page(viewport={"width": 1280, "height": 900}, locale="zh-CN")
    await _sign_in(mine, live_server, admin["email"])
    await mine.click("#nav-admin")
    await mine.wait_for_url(re.compile(r".*/console/admin/people"))
    assert await mine.text_content("h1") == "人员与角色"
    await mine.fill("#q", person["email"])
    await mine.press("#q", "Enter")
    await mine.wait_for_url(re.compile(r".*/console/admin/people\?q="))
    assert await mine.locator("tr[data-user]").count() == 1
    await _shoot(mine, "admin-people")
    await _change(mine, person["id"], "MeetingManager", "grant")
    assert "会议管理员" in await mine.locator(f'tr[data-user="{person["id"]}"] td.roles').inner_text()

    # The change signed them out: the next page load is the sign-in form; after it, the managers' page opens.
    await theirs.goto(f"{live_server.url}/console/templates")
    await theirs.wait_for_selector("#sign-in")
    await theirs.fill("#email", person["email"])
    await theirs.fill("#password", "a console password 1")
    await theirs.press("#password", "Enter")
    await theirs.wait_for_url(f"{live_server.url}/console/templates")
    assert await theirs.locator("#templates").count() == 1
    opened = await theirs.goto(f"{live_server.url}/console/meetings/new")
    assert opened is not None and opened.status == 200

    await _change(mine, person["id"], "MeetingManager", "revoke")
    await theirs.goto(f"{live_server.url}/console/templates")
    await theirs.wait_for_selector("#sign-in")  # the session died with the role
    await _sign_in(theirs, live_server, person["email"], "/console")
    again = await theirs.goto(f"{live_server.url}/console/templates")
    assert again is not None and again.status == 403

    await mine.click("#to-audit")
    await mine.wait_for_url(re.compile(r".*/console/admin/audit"))
    assert await mine.text_content("h1") == "审计日志"
    await _shoot(mine, "admin-audit")
    assert violations == []
