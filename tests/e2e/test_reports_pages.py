"""The series report in real Chromium against a real `tenet serve` (issue 18): a leader opens the report of a series
they organize, the chart image loads (an SVG under its own policy, no CSP violation on the page), the table is there,
and the XLSX download (a Playwright download) opens with openpyxl holding the same rows as the table; in English and
in Chinese."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import httpx
import openpyxl
import pytest

from tests.e2e.test_console_pages import BASE, _person, _shoot, _sign_in

pytestmark = pytest.mark.live_server


def _series(server, admin: str, leader: dict, attendees: list[dict]) -> str:
    start = (datetime.now(UTC) + timedelta(days=2)).date()
    made = httpx.post(f"{server.url}{BASE}/series", headers={"Authorization": f"Bearer {admin}"}, json={
        "title": f"Weekly review {uuid.uuid4().hex[:6]}", "timezone": "Asia/Shanghai", "start_date": start.isoformat(),
        "start_local_time": "09:00", "duration_minutes": 30, "rrule": "FREQ=WEEKLY;COUNT=3",
        "organizer_id": leader["id"], "required_attendee_ids": [a["id"] for a in attendees]})
    assert made.status_code == 201, made.text
    return str(made.json()["series"]["id"])


@pytest.mark.parametrize(("locale", "heading"), [("en-US", "Series report"), ("zh-CN", "系列报表")])
async def test_a_leader_opens_a_series_report_and_downloads_the_xlsx(live_server, live_admin_token, watched, tmp_path,
                                                                      locale, heading):
    open_page, violations = watched
    leader = _person(live_server, live_admin_token, "Leo Leader", ["Leader"])
    people = [_person(live_server, live_admin_token, name, ["Employee"]) for name in ("Ada Attendee", "Bo Attendee")]
    series_id = _series(live_server, live_admin_token, leader, people)

    page = await open_page(viewport={"width": 1280, "height": 900}, locale=locale, accept_downloads=True)
    path = f"/console/reports/series/{series_id}"
    await _sign_in(page, live_server, leader["email"], path)
    await page.wait_for_function("() => { const i = document.querySelector('#series-chart');"
                                 " return i && i.complete && i.naturalWidth > 0; }", timeout=15000)
    assert await page.evaluate("() => document.querySelector('#series-chart').naturalWidth") > 0
    shown = await page.eval_on_selector_all(
        "#attendees tbody tr", "rows => rows.map(r => Array.from(r.cells).map(c => c.textContent.trim()))")
    assert sorted(r[0] for r in shown) == ["Ada Attendee", "Bo Attendee"]
    assert heading in await page.text_content("h1")
    await _shoot(page, "report-series" if locale == "en-US" else "report-series-zh")

    async with page.expect_download() as waiting:
        await page.click("#download-xlsx")
    download = await waiting.value
    saved = tmp_path / download.suggested_filename
    await download.save_as(saved)
    assert saved.suffix == ".xlsx"
    book = openpyxl.load_workbook(saved, read_only=True)
    sheet = list(book["Attendees"].iter_rows(values_only=True))
    assert [r[1] for r in sheet[1:]] == [r[0] for r in shown]
    assert [[str(v) for v in r[2:7]] for r in sheet[1:]] == [r[1:6] for r in shown]
    assert violations == []
