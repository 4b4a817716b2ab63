"""The console's series and template flows in real Chromium against a real `tenet serve` (issue 18): a manager
builds a weekly series (Tuesdays and Thursdays, every two weeks, six meetings), sees the rule and its dates before
creating it, creates it, reschedules from the third occurrence on by a new time of day (the two before keep
theirs), changes the series' title, saves one of its meetings as a template and makes a new meeting from it; the
builder in Chinese refuses a series with no day chosen, next to the field. No page may trip the CSP."""

from __future__ import annotations

import re
from datetime import date, timedelta

import httpx
import pytest

from tests.e2e.test_console_pages import BASE, _person, _shoot, _sign_in, _token

pytestmark = pytest.mark.live_server
ZONE = "Asia/Shanghai"


def _next_monday() -> date:
    """A Monday far enough ahead that every meeting of the series is still to come when the test reschedules."""
    today = date.today() + timedelta(days=14)
    return today + timedelta(days=(7 - today.weekday()) % 7)


def _series_meetings(server, email: str, series_id: str) -> list[dict]:
    """The series' meetings in date order, as the API reads them."""
    headers = {"Authorization": f"Bearer {_token(server, email)}"}
    response = httpx.get(f"{server.url}{BASE}/series/{series_id}", headers=headers)
    response.raise_for_status()
    occurrences = sorted(response.json()["occurrences"], key=lambda o: o["occurrence_date"])
    return [_meeting(server, email, o["meeting_id"]) for o in occurrences]


def _meeting(server, email: str, meeting_id: str) -> dict:
    response = httpx.get(f"{server.url}{BASE}/meetings/{meeting_id}",
                         headers={"Authorization": f"Bearer {_token(server, email)}"})
    response.raise_for_status()
    return response.json()


async def test_a_manager_builds_a_series_reschedules_it_and_reuses_a_meeting_as_a_template(
        live_server, live_admin_token, watched):
    open_page, violations = watched
    manager = _person(live_server, live_admin_token, "Lan Manager", ["MeetingManager"])
    page = await open_page(viewport={"width": 1280, "height": 900})
    await _sign_in(page, live_server, manager["email"], "/console/series/new")

    first_day = _next_monday()
    title = f"Fortnightly review {first_day:%m%d}"
    await page.fill("#f-title", title)
    await page.fill("#f-timezone", ZONE)
    await page.fill("#f-start_date", first_day.isoformat())
    await page.fill("#f-start_local_time", "09:30")
    await page.fill("#f-duration_minutes", "45")
    await page.check("input[name=days][value=TU]")
    await page.check("input[name=days][value=TH]")
    await page.fill("#f-interval", "2")
    await page.check("input[name=ends][value=count]")
    await page.fill("#f-count", "6")
    await page.click("button[value=preview]")
    assert await page.text_content("#rrule") == "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU,TH;COUNT=6"
    shown = await page.locator("#preview-dates li").all_text_contents()
    assert len(shown) == 6  # the first Tuesday, that Thursday, then two weeks later, twice more

    await page.click("button[value=create]")
    await page.wait_for_url(re.compile(r".*/console/meetings\?scope=all&series="))
    series_id = page.url.rsplit("series=", 1)[1]
    meetings = _series_meetings(live_server, manager["email"], series_id)
    assert len(meetings) == 6
    days = [date.fromisoformat(m["start_time"][:10]) for m in meetings]
    assert days[0] == first_day + timedelta(days=1) and days[1] == first_day + timedelta(days=3)
    assert days[2] == days[0] + timedelta(days=14)

    # Reschedule from the third occurrence on: 09:30 becomes 14:00 there and after, the first two keep 09:30.
    await page.goto(f"{live_server.url}/console/series/{series_id}")
    await page.locator("a.reschedule").nth(2).click()
    await page.wait_for_selector("#reschedule-form")
    assert "4" in await page.text_content("#later-count")  # the third to the sixth
    await page.check("#how-time")
    await page.fill("#start_local_time", "14:00")
    await page.click("#confirm-reschedule")
    await page.wait_for_selector("#rescheduled")
    after = _series_meetings(live_server, manager["email"], series_id)
    local = [m["start_time"] for m in after]
    assert [m["id"] for m in after] == [m["id"] for m in meetings]  # the same meetings, moved in place
    assert all(t.startswith(meetings[i]["start_time"][:16]) for i, t in enumerate(local[:2]))
    assert all("T06:00:00" in t for t in local[2:]), local  # 14:00 in Shanghai is 06:00 UTC
    await _shoot(page, "series")

    # Change the series' title: the meetings that have not started follow.
    await page.click("#edit-series")
    await page.fill("input[name=title]", f"{title} (renamed)")
    await page.locator("form button[type=submit]").last.click()
    await page.wait_for_selector("#series-updated")
    assert (await page.text_content("#title")).endswith("(renamed)")
    assert all(m["title"].endswith("(renamed)")
               for m in _series_meetings(live_server, manager["email"], series_id))

    # Save the first meeting as a template, then make a one-off meeting from it.
    await page.goto(f"{live_server.url}/console/meetings/{meetings[0]['id']}/template")
    await page.fill("#label", f"Review template {first_day:%m%d}")
    await page.locator("#save-template-form button[type=submit]").click()
    await page.wait_for_url(re.compile(r".*/console/templates"))
    await page.locator("tr", has_text=f"Review template {first_day:%m%d}").locator("a.apply").click()
    await page.wait_for_selector("#apply-template-form")
    await page.fill("#timezone", ZONE)
    await page.fill("#start", f"{first_day + timedelta(days=30)}T16:00")
    await page.locator("#apply-template-form button[type=submit]").click()
    await page.wait_for_url(re.compile(r".*/console/meetings/[0-9a-f-]+$"))
    made = _meeting(live_server, manager["email"], page.url.rsplit("/", 1)[1])
    assert made["title"].endswith("(renamed)") and made["series_id"] is None
    assert made["start_time"].startswith(f"{first_day + timedelta(days=30)}T08:00")  # 16:00 in Shanghai

    # The builder in Chinese: no day chosen is refused next to the days, in words.
    await page.goto(f"{live_server.url}/console/series/new")
    await page.select_option("#language", "zh-CN")
    await page.click("#language-switcher button")
    await page.wait_for_selector("html[lang=zh-CN]")
    await page.fill("#f-title", "没有选日子")
    await page.fill("#f-start_date", first_day.isoformat())
    await page.click("button[value=preview]")
    error = page.locator("#e-days")
    assert await error.get_attribute("data-code") == "RECURRENCE_INVALID"
    assert re.search(r"[\u4e00-\u9fff]", await error.text_content())
    assert violations == []
