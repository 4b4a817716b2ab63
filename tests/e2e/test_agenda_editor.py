"""The agenda editor in real Chromium against a real `tenet serve` (issue 18): a manager builds an agenda of two
sections, drags an item to a new place with the mouse (the island served by Tenet under the strict CSP posts the
order), reloads and finds the order kept, assigns an upload task with a due date; the keyboard's move buttons
reorder too and keep the focus; the same page in zh-CN speaks Chinese. No page may trip the CSP."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import httpx
import pytest

from tests.e2e.test_console_pages import BASE, _person, _shoot, _sign_in, _token

pytestmark = pytest.mark.live_server


def _meeting(server, token: str, attendee: dict) -> dict:
    start = datetime.now(UTC) + timedelta(days=2)
    response = httpx.post(f"{server.url}{BASE}/meetings", headers={"Authorization": f"Bearer {token}"}, json={
        "title": f"Planning {uuid.uuid4().hex[:6]}", "location": "Room 3", "timezone": "Asia/Shanghai",
        "start_time": start.isoformat(), "end_time": (start + timedelta(hours=2)).isoformat(),
        "required_attendee_ids": [attendee["id"]]})
    assert response.status_code == 201, response.text
    return response.json()


def _agenda(server, email: str, meeting_id: str) -> dict:
    found = httpx.get(f"{server.url}{BASE}/meetings/{meeting_id}/agenda",
                      headers={"Authorization": f"Bearer {_token(server, email)}"})
    found.raise_for_status()
    return found.json()


def _section_of(server, token: str, meeting_id: str, title: str, items: list[str]) -> list[dict]:
    """A section with items (10 minutes each), made through the API."""
    headers = {"Authorization": f"Bearer {token}"}
    section = httpx.post(f"{server.url}{BASE}/meetings/{meeting_id}/agenda/sections", headers=headers,
                         json={"title": title})
    assert section.status_code == 201, section.text
    made = []
    for item in items:
        response = httpx.post(f"{server.url}{BASE}/agenda/sections/{section.json()['id']}/items", headers=headers,
                              json={"title": item, "time_minutes": 10})
        assert response.status_code == 201, response.text
        made.append(response.json())
    return made


def _section(title: str) -> str:
    return f"li.agenda-section:has(.section-title:text-is('{title}'))"


def _item(title: str) -> str:
    return f"li.agenda-item:has(.item-title:text-is('{title}'))"


async def _titles(page, section: str) -> list[str]:
    return await page.eval_on_selector_all(f"{_section(section)} li.agenda-item .item-title",
                                           "nodes => nodes.map(n => n.textContent.trim())")


async def _add_section(page, title: str) -> None:
    await page.fill("#new-section-title", title)
    await page.click("#new-section button[type=submit]")
    await page.wait_for_selector(_section(title))


async def _add_item(page, section: str, title: str, minutes: str) -> None:
    form = f"{_section(section)} form.add-item"
    await page.fill(f"{form} input[name=title]", title)
    await page.fill(f"{form} input[name=time_minutes]", minutes)
    await page.click(f"{form} button[type=submit]")
    await page.wait_for_selector(_item(title))


async def test_a_manager_builds_an_agenda_by_dragging_and_assigns_a_task(live_server, live_admin_token, watched):
    open_page, violations = watched
    manager = _person(live_server, live_admin_token, "Mona Manager", ["MeetingManager"])
    attendee = _person(live_server, live_admin_token, "Ada Attendee", ["Employee"])
    meeting = _meeting(live_server, live_admin_token, attendee)
    mid = meeting["id"]

    page = await open_page(viewport={"width": 1280, "height": 1000})
    await _sign_in(page, live_server, manager["email"], f"/console/meetings/{mid}")
    await page.click("#agenda-link a")
    await page.wait_for_selector("#new-section")
    await _add_section(page, "Opening")
    await _add_section(page, "Numbers")
    for title, minutes in (("Welcome", "5"), ("Review", "20"), ("Close", "5")):
        await _add_item(page, "Opening", title, minutes)
    await _add_item(page, "Numbers", "Budget", "30")
    assert await _titles(page, "Opening") == ["Welcome", "Review", "Close"]
    assert "60" in await page.text_content("#agenda-total")

    # A real mouse drag: "Close" onto the upper half of "Welcome" (first place).
    source = await page.locator(_item("Close")).bounding_box()
    target = await page.locator(_item("Welcome")).bounding_box()
    assert source and target
    async with page.expect_response(lambda r: r.url.endswith("/agenda/order") and r.status == 200):
        await page.mouse.move(source["x"] + 20, source["y"] + source["height"] / 2)
        await page.mouse.down()
        await page.mouse.move(target["x"] + 20, target["y"] + target["height"] / 2, steps=8)
        await page.mouse.move(target["x"] + 20, target["y"] + 4, steps=4)
        await page.mouse.up()
    await page.wait_for_function("""() => [...document.querySelectorAll('li.agenda-item .item-title')]
        .map(n => n.textContent.trim())[0] === 'Close'""")
    await page.reload()
    await page.wait_for_selector("#sections")
    assert await _titles(page, "Opening") == ["Close", "Welcome", "Review"]
    api = _agenda(live_server, manager["email"], mid)
    assert [[i["title"] for i in s["items"]] for s in api["sections"]] == [["Close", "Welcome", "Review"], ["Budget"]]

    # Dragged into the other section.
    source = await page.locator(_item("Review")).bounding_box()
    target = await page.locator(_item("Budget")).bounding_box()
    assert source and target
    async with page.expect_response(lambda r: r.url.endswith("/agenda/order") and r.status == 200):
        await page.mouse.move(source["x"] + 20, source["y"] + source["height"] / 2)
        await page.mouse.down()
        await page.mouse.move(target["x"] + 20, target["y"] + target["height"] / 2, steps=8)
        await page.mouse.move(target["x"] + 20, target["y"] + target["height"] - 4, steps=4)
        await page.mouse.up()
    await page.wait_for_selector(f"{_section('Numbers')} {_item('Review')}")
    assert await _titles(page, "Numbers") == ["Budget", "Review"]
    assert await page.text_content(f"{_section('Opening')} h2 .muted") == "10 min"  # re-totalled by the server

    # An upload task with a due date, typed in the meeting's zone.
    budget = _item("Budget")
    await page.select_option(f"{budget} select[name=assignee_user_id]", attendee["id"])
    await page.fill(f"{budget} input[name=due_at]", "2030-05-06T09:30")
    await page.click(f"{budget} form.assign button[type=submit]")
    await page.wait_for_selector(f"{budget} li[data-status=PENDING]")
    assert "Ada Attendee" in await page.text_content(f"{budget} li[data-status=PENDING]")
    task = _agenda(live_server, manager["email"], mid)["sections"][1]["items"][0]["upload_tasks"][0]
    assert task["assignee_user_id"] == attendee["id"]
    assert datetime.fromisoformat(task["due_at"]) == datetime(2030, 5, 6, 9, 30, tzinfo=ZoneInfo("Asia/Shanghai"))
    await _shoot(page, "agenda")
    assert violations == []


async def test_the_keyboard_reorders_and_the_page_speaks_chinese(live_server, live_admin_token, watched):
    open_page, violations = watched
    manager = _person(live_server, live_admin_token, "Mona Manager", ["MeetingManager"])
    attendee = _person(live_server, live_admin_token, "Ada Attendee", ["Employee"])
    meeting = _meeting(live_server, live_admin_token, attendee)
    mid = meeting["id"]
    items = _section_of(live_server, live_admin_token, mid, "Opening", ["First", "Second"])

    page = await open_page(viewport={"width": 1280, "height": 900}, locale="zh-CN")
    await _sign_in(page, live_server, manager["email"], f"/console/meetings/{mid}/agenda")
    assert await page.get_attribute("html", "lang") == "zh-CN"
    assert "议程" in await page.text_content("h1")
    assert await page.text_content("#new-section button[type=submit]") == "添加分组"
    assert "分配上传任务" in await page.text_content(_item("First"))
    assert "总时长" in await page.text_content("#agenda-total")

    # The keyboard alone: focus "move down" of the first item, press Enter; the focus stays on that button.
    down = f"#item-{items[0]['id']}-down"
    await page.focus(down)
    await page.keyboard.press("Enter")
    await page.wait_for_function("""() => [...document.querySelectorAll('li.agenda-item .item-title')]
        .map(n => n.textContent.trim()).join() === 'Second,First'""")
    assert await page.evaluate("document.activeElement && document.activeElement.id") == down[1:]
    await page.keyboard.press("Shift+Tab")  # the "move up" button beside it
    await page.keyboard.press("Enter")
    await page.wait_for_function("""() => [...document.querySelectorAll('li.agenda-item .item-title')]
        .map(n => n.textContent.trim()).join() === 'First,Second'""")
    api = _agenda(live_server, manager["email"], mid)
    assert [i["title"] for i in api["sections"][0]["items"]] == ["First", "Second"]
    await _shoot(page, "agenda-zh")
    assert violations == []
