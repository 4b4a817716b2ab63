"""The meetings' week view and cancelling a meeting in real Chromium against a real `tenet serve` (issue 18), by
keyboard only: a manager opens the week view from the list, finds each meeting under the day it starts on in its own
zone, moves to the next week and back, filters by city with Enter; cancels a meeting after the confirm step with a
reason and sees it cancelled, with the cancellation at the top of the audit trail the page loads by itself; the
week in Chinese. No page may trip the CSP."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import httpx
import pytest

from tests.e2e.test_console_pages import BASE, _person, _shoot, _sign_in

pytestmark = pytest.mark.live_server
# A week of the future, so the meetings are the only ones there whatever the live server holds already:
# Monday 2027-03-01 .. Sunday 2027-03-07. The viewers have no zone of their own: they see the server's default.
MONDAY = "2027-03-01"


def _meeting(server, token: str, title: str, start: datetime, **body) -> str:
    response = httpx.post(f"{server.url}{BASE}/meetings", headers={"Authorization": f"Bearer {token}"}, json={
        "title": title, "timezone": str(start.tzinfo), "start_time": start.isoformat(),
        "end_time": (start + timedelta(hours=1)).isoformat(), **body})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def _activate(page, selector: str) -> None:
    """Reach a control with the keyboard and press Enter on it."""
    await page.focus(selector)
    await page.keyboard.press("Enter")


async def test_the_week_view_by_keyboard(live_server, live_admin_token, watched):
    open_page, violations = watched
    manager = _person(live_server, live_admin_token, "Wei Manager", ["MeetingManager"])
    tag = uuid.uuid4().hex[:6]
    city = f"Chengdu-{tag}"
    sunday_late = _meeting(live_server, live_admin_token, f"Late review {tag}",
                           datetime(2027, 3, 7, 23, 30, tzinfo=ZoneInfo("Asia/Shanghai")), city=city)
    next_monday = _meeting(live_server, live_admin_token, f"Early call {tag}",
                           datetime(2027, 3, 8, 0, 30, tzinfo=ZoneInfo("Asia/Shanghai")), city=city)
    wednesday = _meeting(live_server, live_admin_token, f"Planning {tag}",
                         datetime(2027, 3, 3, 10, 0, tzinfo=ZoneInfo("Europe/Berlin")))

    page = await open_page(viewport={"width": 1280, "height": 900}, locale="en-US")
    await _sign_in(page, live_server, manager["email"], f"/console/meetings?from={MONDAY}&scope=all")
    await _activate(page, "#week-view")
    await page.wait_for_selector("#week")
    assert f"week={MONDAY}" in page.url
    assert await page.locator("ol.week > li").count() == 7
    sunday = page.locator("#day-2027-03-07")
    assert await sunday.locator(f"li[data-meeting='{sunday_late}']").count() == 1
    assert await page.locator(f"#day-2027-03-03 li[data-meeting='{wednesday}']").count() == 1
    assert await page.locator(f"li[data-meeting='{next_monday}']").count() == 0  # the next week in Shanghai
    assert "(Asia/Shanghai)" in await sunday.text_content()
    await _shoot(page, "week")
    box = await page.locator("#day-2027-03-01").bounding_box()
    other = await page.locator("#day-2027-03-07").bounding_box()
    assert box and other and other["x"] > box["x"] and abs(other["y"] - box["y"]) < 1  # seven columns in a row

    await _activate(page, "#next-week")
    await page.wait_for_selector("#day-2027-03-08")
    assert await page.locator(f"#day-2027-03-08 li[data-meeting='{next_monday}']").count() == 1
    await _activate(page, "#previous-week")
    await page.wait_for_selector("#day-2027-03-01")

    await page.focus("#city")
    await page.keyboard.type(city)
    await page.keyboard.press("Enter")  # the filter form submits from its field
    await page.wait_for_url(f"**city={city}**")
    shown = await page.locator("li[data-meeting]").evaluate_all("items => items.map(i => i.dataset.meeting)")
    assert shown == [sunday_late]
    await _activate(page, f"li[data-meeting='{sunday_late}'] a")
    await page.wait_for_selector("#board")
    assert await page.text_content("#title") == f"Late review {tag}"

    phone = await open_page(viewport={"width": 390, "height": 844}, locale="zh-CN")
    await _sign_in(phone, live_server, manager["email"], f"/console/meetings/week?week={MONDAY}&scope=all")
    assert await phone.get_attribute("html", "lang") == "zh-CN"
    assert "上一周" in await phone.text_content("#previous-week")
    assert "2027年3月1日星期一" in await phone.text_content("#day-2027-03-01 h2")
    first = await phone.locator("#day-2027-03-01").bounding_box()
    last = await phone.locator("#day-2027-03-07").bounding_box()
    assert first and last and last["y"] > first["y"]  # on a phone the days stack
    assert violations == []


async def test_a_manager_cancels_a_meeting_and_reads_its_trail(live_server, live_admin_token, watched):
    open_page, violations = watched
    manager = _person(live_server, live_admin_token, "Carla Canceller", ["MeetingManager"])
    title = f"Offsite {uuid.uuid4().hex[:6]}"
    meeting = _meeting(live_server, live_admin_token, title, datetime(2027, 3, 2, 9, 0, tzinfo=ZoneInfo("UTC")))

    page = await open_page(viewport={"width": 1280, "height": 900})
    await _sign_in(page, live_server, manager["email"], f"/console/meetings/{meeting}")
    await page.wait_for_selector("#audit-entries tr[data-action='MEETING_CREATED']")  # the trail loads by itself
    await _activate(page, "#cancel")
    await page.wait_for_selector("#cancel-form")
    await _activate(page, "#keep")  # changing one's mind cancels nothing
    await page.wait_for_selector("#board")
    assert await page.text_content("#status") == "Scheduled"

    await _activate(page, "#cancel")
    await page.wait_for_selector("#cancel-form")
    await page.focus("#reason")
    await page.keyboard.type("The venue closed")
    await _shoot(page, "cancel")
    await _activate(page, "#confirm-cancel")
    await page.wait_for_url(f"{live_server.url}/console/meetings/{meeting}")
    assert await page.text_content("#status") == "Cancelled"
    assert await page.text_content("#cancel-reason") == "The venue closed"
    assert await page.locator("#cancel").count() == 0
    first = page.locator("#audit-entries tbody tr").first
    await first.wait_for()
    assert await first.get_attribute("data-action") == "MEETING_CANCELLED"
    assert "Carla Canceller" in await first.text_content()

    await page.goto(f"{live_server.url}/console/meetings/{meeting}/cancel")  # a second time: said in words
    assert "The meeting is cancelled." in await page.text_content("#cancel-error")
    assert violations == []
