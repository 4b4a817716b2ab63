"""The check-in page the QR codes encode, and the code display, in real Chromium against a real `tenet serve`
(issue 10 "Pages"): a guest checks in by the offline QR code's address (an old poster without its code is
refused with the out-of-date message); the same browser trying a second person is refused with the device
message; late and not-yet-open messages; a signed-in user; the display page shows both codes. No page may trip
the Content-Security-Policy."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import httpx
import pytest

pytestmark = pytest.mark.live_server
ADMIN_EMAIL, ADMIN_PASSWORD = "live-admin@example.com", "live admin password"
BASE = "/api/v1/meeting-attendance"


def _meeting(server, token: str, *, starts_in: timedelta, grace: int = 5, **extra) -> dict:
    start = datetime.now(UTC) + starts_in
    response = httpx.post(f"{server.url}{BASE}/meetings", headers={"Authorization": f"Bearer {token}"}, json={
        "title": f"Town hall {uuid.uuid4().hex[:6]}", "location": "Room 4", "timezone": "Europe/Berlin",
        "start_time": start.isoformat(), "end_time": (start + timedelta(hours=1)).isoformat(),
        "late_grace_minutes": grace, **extra})
    assert response.status_code == 201, response.text
    return response.json()


def _offline_address(server, token: str, meeting: dict) -> str:
    """Where the meeting's offline QR code leads (what the display page shows and the image encodes: the address
    with the meeting's offline code), opened on the live server (whose public base URL is the default one)."""
    shown = httpx.get(f"{server.url}{BASE}/meetings/{meeting['id']}/display-code", params={"mode": "offline"},
                      headers={"Authorization": f"Bearer {token}"})
    shown.raise_for_status()
    url = shown.json()["url"]
    assert url == meeting["qr_code_offline"]["check_in_url"] and "&code=o1." in url
    parts = urlsplit(url)
    return f"{server.url}{parts.path}?{parts.query}"


def _attendances(server, token: str, meeting_id: str) -> list[dict]:
    response = httpx.get(f"{server.url}{BASE}/meetings/{meeting_id}/attendances",
                         headers={"Authorization": f"Bearer {token}"})
    response.raise_for_status()
    return [r for r in response.json()["items"] if r["id"] is not None]


def _register(server, email: str, password: str) -> None:
    httpx.post(f"{server.url}/api/v1/auth/register",
               json={"email": email, "password": password, "display_name": "Ulla User"}).raise_for_status()


@pytest.fixture
async def watched(browser):
    """A fresh browser context whose pages record CSP violations (console errors mentioning the policy)."""
    context = await browser.new_context()
    violations: list[str] = []

    async def open_page():
        page = await context.new_page()
        page.on("console", lambda message: violations.append(message.text)
                if "Content Security Policy" in message.text else None)
        return page

    yield open_page, violations
    await context.close()


async def test_a_guest_checks_in_and_a_second_person_on_that_browser_is_refused(live_server, live_admin_token,
                                                                                 watched):
    open_page, violations = watched
    meeting = _meeting(live_server, live_admin_token, starts_in=timedelta(minutes=-2))
    page = await open_page()
    await page.goto(f"{live_server.url}/meetingattendance/check-in/{meeting['id']}?mode=offline")  # an old poster
    await page.wait_for_selector("#guest:not([hidden])")
    await page.fill("#guest-name", "Gwen Guest")
    await page.click("#guest button[type=submit]")
    await page.wait_for_selector("#message:not([hidden])")
    assert "printed code is out of date" in await page.text_content("#message")

    address = _offline_address(live_server, live_admin_token, meeting)
    await page.goto(address)
    await page.wait_for_selector("#guest:not([hidden])")
    assert await page.text_content("#title") == meeting["title"]
    assert "Europe/Berlin" in await page.text_content("#when")
    await page.fill("#guest-name", "Gwen Guest")
    await page.fill("#guest-email", "gwen@example.com")
    await page.click("#guest button[type=submit]")
    await page.wait_for_selector("#done:not([hidden])")
    assert await page.text_content("#done-title") == "Checked in. Welcome!"

    await page.goto(address)  # the same browser: the same device id, another person
    await page.wait_for_selector("#guest:not([hidden])")
    await page.fill("#guest-name", "Fred Friend")
    await page.fill("#guest-email", "fred@example.com")
    await page.click("#guest button[type=submit]")
    await page.wait_for_selector("#message:not([hidden])")
    assert "already used to check someone else in" in await page.text_content("#message")
    rows = _attendances(live_server, live_admin_token, meeting["id"])
    assert [(r["subject_type"], r["display_name"]) for r in rows] == [("GUEST", "Gwen Guest")]
    assert violations == []


async def test_late_and_not_yet_open_messages(live_server, live_admin_token, watched):
    open_page, violations = watched
    late = _meeting(live_server, live_admin_token, starts_in=timedelta(minutes=-10), grace=5)
    page = await open_page()
    await page.goto(_offline_address(live_server, live_admin_token, late))
    await page.wait_for_selector("#guest:not([hidden])")
    await page.fill("#guest-name", "Larry Late")
    await page.click("#guest button[type=submit]")
    await page.wait_for_selector("#done:not([hidden])")
    assert "min late" in await page.text_content("#done-title")

    future = _meeting(live_server, live_admin_token, starts_in=timedelta(hours=3))
    page = await open_page()
    await page.goto(_offline_address(live_server, live_admin_token, future))
    await page.wait_for_selector("#guest:not([hidden])")
    assert "Check-in opens at" in await page.text_content("#window")
    await page.fill("#guest-name", "Early Bird")
    await page.click("#guest button[type=submit]")
    await page.wait_for_selector("#message:not([hidden])")
    assert "Check-in opens at" in await page.text_content("#message")
    assert violations == []


async def test_a_signed_in_user_checks_in_and_is_answered_on_a_second_scan(live_server, live_admin_token, watched):
    open_page, violations = watched
    meeting = _meeting(live_server, live_admin_token, starts_in=timedelta(minutes=-1))
    email, password = f"user-{uuid.uuid4().hex[:8]}@example.com", "a long password 1"
    _register(live_server, email, password)
    page = await open_page()
    address = f"{live_server.url}/meetingattendance/check-in/{meeting['id']}?mode=online"
    for expected in ("Checked in. Welcome!", "You were already checked in."):
        await page.goto(address)
        await page.click("#show-sign-in")
        await page.fill("#sign-in-email", email)
        await page.fill("#sign-in-password", password)
        await page.click("#sign-in button[type=submit]")
        await page.wait_for_selector("#done:not([hidden])")
        assert await page.text_content("#done-title") == expected
    rows = _attendances(live_server, live_admin_token, meeting["id"])
    assert [(r["display_name"], r["mode"], r["required"]) for r in rows] == [("Ulla User", "online", False)]
    assert violations == []


async def test_the_display_page_shows_both_codes(live_server, live_admin_token, watched):
    open_page, violations = watched
    meeting = _meeting(live_server, live_admin_token, starts_in=timedelta(minutes=30))
    page = await open_page()
    await page.goto(f"{live_server.url}/meetingattendance/display/{meeting['id']}")
    await page.fill("#sign-in-email", ADMIN_EMAIL)
    await page.fill("#sign-in-password", ADMIN_PASSWORD)
    await page.click("#sign-in button[type=submit]")
    await page.wait_for_selector("#codes:not([hidden])")
    online = await page.get_attribute("#online-code svg", "data-url")
    offline = await page.get_attribute("#offline-code svg", "data-url")
    assert online.endswith(f"/meetingattendance/check-in/{meeting['id']}?mode=online")
    assert offline == meeting["qr_code_offline"]["check_in_url"]
    assert f"/meetingattendance/check-in/{meeting['id']}?mode=offline&code=o1." in offline
    assert "Checked in: 0 of 0 expected" in await page.text_content("#count")
    assert violations == []
