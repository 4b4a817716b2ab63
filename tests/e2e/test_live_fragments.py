"""A live fragment (the attendance board, asked again every few seconds) is replaced under the person working in
it: on a phone, the board's table scrolled sideways stays where it was, and the keyboard's focus stays on the region
or the row link it was on (src/tenet/web/static/live-fragments.js), in real Chromium."""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.e2e.test_console_pages import BASE, _meeting, _person, _sign_in

pytestmark = pytest.mark.live_server

REGION = "#board .table-scroll"


def _require(server, token: str, meeting_id: str, user_ids: list[str]) -> None:
    response = httpx.put(f"{server.url}{BASE}/meetings/{meeting_id}/required-attendees",
                         headers={"Authorization": f"Bearer {token}"}, json={"user_ids": user_ids})
    assert response.status_code == 200, response.text


async def _next_refresh(page) -> None:
    """Wait until htmx has replaced the board (the old element carried a mark the fresh one lacks)."""
    await page.evaluate("document.getElementById('board').dataset.stale = 'yes'")
    await page.wait_for_function(
        "() => document.getElementById('board') !== null && !document.getElementById('board').dataset.stale",
        timeout=10_000)


async def test_the_board_keeps_its_scroll_and_the_keyboard_focus_when_it_refreshes(live_server, live_admin_token,
                                                                                  watched):
    open_page, violations = watched
    manager = _person(live_server, live_admin_token, "Mona Manager", ["MeetingManager"])
    people = [_person(live_server, live_admin_token, f"Employee Withaveryverylongname{i}", ["Employee"])
              for i in range(3)]
    meeting = _meeting(live_server, live_admin_token, f"Board {uuid.uuid4().hex[:6]}")
    _require(live_server, live_admin_token, meeting["id"], [p["id"] for p in people])

    page = await open_page(viewport={"width": 390, "height": 844})  # a phone: the board's table scrolls sideways
    await _sign_in(page, live_server, manager["email"], f"/console/meetings/{meeting['id']}")
    await page.wait_for_selector("#attendances a.correct")
    assert await page.eval_on_selector(REGION, "r => r.scrollWidth > r.clientWidth"), "the table fits: nothing to keep"

    # The keyboard scrolls the region (it takes the focus, arrow keys move it), then the board refreshes.
    await page.focus(REGION)
    for _ in range(3):
        await page.keyboard.press("ArrowRight")
    # Arrow keys scroll smoothly: wait until the region has stopped moving (the same offset 100 ms apart).
    await page.wait_for_function(
        f"() => {{ const left = document.querySelector('{REGION}').scrollLeft; const still = left === window.lastLeft; "
        "window.lastLeft = left; return still && left > 0; }", polling=100)
    scrolled = await page.eval_on_selector(REGION, "r => r.scrollLeft")
    await _next_refresh(page)
    await page.wait_for_function(
        f"() => {{ const r = document.querySelector('{REGION}'); "
        f"return r.scrollLeft === {scrolled} && document.activeElement === r; }}", timeout=2_000)

    # A row's link keeps the focus too, so Enter after a refresh still opens that row's form.
    await page.focus("#attendances tr:nth-child(2) a.correct")
    await _next_refresh(page)
    await page.wait_for_function(
        "() => document.activeElement === document.querySelector('#attendances tr:nth-child(2) a.correct')",
        timeout=2_000)
    assert violations == []
