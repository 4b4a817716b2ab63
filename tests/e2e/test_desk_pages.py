"""The reservation desk in real Chromium against a real `tenet serve` (issue 19): an API client ingests a batch (the
SuperAgent body the API takes); the agent sees the new tasks arrive without a reload, opens the first card, fixes
the AI's invalid date shown in red, the draft saves itself as they type and is found after a reload, confirms,
executes with the simulator's failure switch, sees the FAILED attempt, retries, sees COMPLETED and the next task
unblocked; moves a manual-review task from its temporary order to an active one; a second agent's stale confirm is
refused with the conflict shown; an agent of another hotel gets nothing by URL; the same flow in zh-CN. The keyboard
is enough to sign in and to confirm. No page may trip the Content-Security-Policy."""

from __future__ import annotations

import json
import uuid
from itertools import pairwise

import httpx
import pytest

from tests.e2e.test_console_pages import _person, _shoot, _sign_in

pytestmark = pytest.mark.live_server
BASE = "/api/v1/reservations"
BAD_DATE = {"guest_name": "Ada Guest", "arrival_date": "2026-02-30", "departure_date": "2026-03-03",
            "room_type": "KING", "adults": 2}


def _admin(server, token: str, method: str, path: str, body: dict | None = None) -> httpx.Response:
    response = httpx.request(method, f"{server.url}{path}", headers={"Authorization": f"Bearer {token}"}, json=body)
    assert response.status_code in (200, 201, 204), response.text
    return response


def _hotel(server, token: str, *agents: dict) -> tuple[str, str]:
    """A new hotel with `agents` assigned and an ingest client's token for it."""
    hotel = f"H{uuid.uuid4().hex[:6].upper()}"
    _admin(server, token, "POST", f"{BASE}/hotels", {"hotel_id": hotel, "display_name": "Harbour Hotel"})
    for agent in agents:
        _admin(server, token, "PUT", f"{BASE}/hotels/{hotel}/staff/{agent['id']}")
    made = _admin(server, token, "POST", "/api/v1/iam/api-clients", {
        "name": f"superagent {hotel}", "scopes": ["reservations:ingest"], "hotel_ids": [hotel]}).json()
    answer = httpx.post(f"{server.url}/api/v1/auth/token", data={
        "grant_type": "client_credentials", "client_id": made["client_id"], "client_secret": made["client_secret"]})
    answer.raise_for_status()
    return hotel, answer.json()["access_token"]


def _ingest(server, client_token: str, hotel: str, items: list[dict]) -> list[dict]:
    body = json.dumps({"hotel_id": hotel, "source_message_id": uuid.uuid4().int % 10**12 + 1,
                       "ai_task_results": items})
    answer = httpx.post(f"{server.url}{BASE}/ai-batches", content=body, headers={
        "Authorization": f"Bearer {client_token}", "Content-Type": "application/json"})
    assert answer.status_code == 201, answer.text
    return answer.json()["items"]


def _new_booking(cn: str, fields: dict) -> dict:
    return {"result_type": "normal_task", "ai_task_type": "NEW_BOOKING", "current_or_history": "current",
            "case_keys": {"confirmation_number": cn}, "extracted_fields": fields}


def _update(cn: str, **fields: str) -> dict:
    return {"result_type": "normal_task", "ai_task_type": "UPDATE_BOOKING", "current_or_history": "current",
            "case_keys": {"confirmation_number": cn}, "extracted_fields": {"room_type": "SUITE", **fields}}


REVIEW = {"result_type": "manual_review", "manual_review": {"reason_code": "AMBIGUOUS"},
          "current_or_history": "current", "extracted_fields": {"room_type": "KING"}}


async def _version_becomes(page, version: int) -> None:
    """Wait until the autosave answered: the form carries the version the draft made."""
    await page.wait_for_selector(f"#card-version[value='{version}']", state="attached", timeout=10_000)


async def _work_first_task(page, server, hotel: str, client_token: str, *, shots: str | None) -> tuple[dict, str]:
    await page.click(f"#hotels a:text-is('{hotel}')")
    await page.wait_for_selector("#queue")
    await _shoot(page, f"{shots}-queue-empty") if shots else None
    cn = f"CNF{uuid.uuid4().hex[:6].upper()}"
    first, second = _ingest(server, client_token, hotel, [_update(cn, arrival_date="2026-02-30"), _update(cn)])
    assert first["order_id"] == second["order_id"]
    # The queue asks again every few seconds: the new task appears without a reload.
    await page.wait_for_selector(f"#waiting tr[data-task='{first['task_id']}']", timeout=15_000)
    assert await page.locator(f"#waiting tr[data-task='{second['task_id']}']").count() == 0  # it waits behind
    await _shoot(page, f"{shots}-queue") if shots else None
    await page.goto(f"{server.url}/console/desk/tasks/{second['task_id']}")
    await page.wait_for_selector("#task-blocked[data-blocked='true']")
    assert await page.locator("#confirm").count() == 0  # a blocked task can only be viewed
    await page.go_back()
    await page.wait_for_selector(f"#waiting tr[data-task='{first['task_id']}'] a")
    await page.click(f"#waiting tr[data-task='{first['task_id']}'] a")
    await page.wait_for_selector("#card-form")
    assert await page.get_attribute("#field-arrival_date", "aria-invalid") == "true"  # the AI's bad date, in red
    await page.fill("#field-arrival_date", "2026-03-01")
    await _version_becomes(page, 2)
    await page.reload()  # the draft was saved as one typed: it is there after a reload
    assert await page.input_value("#field-arrival_date") == "2026-03-01"
    await page.select_option("#field-opera_simulation_outcome", "FAIL_WRITE_ONCE")
    await _version_becomes(page, 3)
    await _shoot(page, f"{shots}-card") if shots else None
    await page.focus("#confirm")
    await page.keyboard.press("Enter")  # the keyboard is enough
    await page.wait_for_selector("#task-state[data-state='READY']")
    await page.click("#execute-task")
    await page.wait_for_selector("#execution [data-attempt='1'][data-status='FAILED']")
    assert await page.get_attribute("#task-state", "data-state") == "EXECUTING"
    await page.click("#execution button.retry")
    await page.wait_for_selector("#task-state[data-state='COMPLETED']")
    assert await page.locator("#execution [data-attempt='2'][data-status='SUCCEEDED']").count() >= 1
    await _shoot(page, f"{shots}-execution") if shots else None
    await page.goto(f"{server.url}/console/desk/orders/{first['order_id']}")
    await page.wait_for_selector(f"#tasks tr[data-task='{first['task_id']}'][data-state='COMPLETED']")
    await page.click(f"#tasks tr[data-task='{second['task_id']}'][data-blocked='false'] a")
    await page.wait_for_selector("#task-blocked[data-blocked='false']")
    assert await page.locator("#confirm").count() == 1
    return first, cn


async def test_an_agent_works_a_batch_from_arrival_to_completion(live_server, live_admin_token, watched):
    open_page, violations = watched
    agent = _person(live_server, live_admin_token, "Rita Agent", ["ReservationAgent"])
    hotel, client_token = _hotel(live_server, live_admin_token, agent)
    page = await open_page(viewport={"width": 1280, "height": 900}, locale="en-US")
    await _sign_in(page, live_server, agent["email"], "/console/desk")
    await _shoot(page, "desk-hotels")
    first, cn = await _work_first_task(page, live_server, hotel, client_token, shots="desk")

    # A manual review arrives on a temporary order; the agent moves it to the active order of the booking.
    [review] = _ingest(live_server, client_token, hotel, [REVIEW])
    await page.goto(f"{live_server.url}/console/desk/tasks/{review['task_id']}")
    await page.wait_for_selector("#move")
    await page.fill("#target", cn)
    await page.press("#target", "Enter")
    target = page.locator("#move-form label", has_text=cn).locator("input")
    await target.wait_for()
    target_order = await target.get_attribute("value")
    assert target_order == str(first["order_id"])  # the booking's ACTIVE order
    await target.check()
    await page.click("#move-task")
    await page.wait_for_selector(f"main p a[href='/console/desk/orders/{target_order}']")
    await page.click(f"main p a[href='/console/desk/orders/{target_order}']")
    await page.wait_for_selector(f"#tasks tr[data-task='{review['task_id']}']")
    assert "data-status=\"ACTIVE\"" in await page.inner_html("#details")
    await _shoot(page, "desk-order")
    assert violations == []


async def test_a_second_agents_stale_confirm_shows_the_conflict(live_server, live_admin_token, watched):
    open_page, violations = watched
    rita = _person(live_server, live_admin_token, "Rita Agent", ["ReservationAgent"])
    otto = _person(live_server, live_admin_token, "Otto Agent", ["ReservationAgent"])
    hotel, client_token = _hotel(live_server, live_admin_token, rita, otto)
    [task] = _ingest(live_server, client_token, hotel, [_new_booking("CNFSTALE", {**BAD_DATE,
                                                                                  "arrival_date": "2026-03-01"})])
    path = f"/console/desk/tasks/{task['task_id']}"
    first, second = await open_page(), await open_page()
    await _sign_in(first, live_server, rita["email"], path)
    await _sign_in(second, live_server, otto["email"], path)
    await first.fill("#field-guest_name", "Ada Changed")
    await _version_becomes(first, 2)
    await second.click("#confirm")
    await second.wait_for_selector("#conflict-view")
    assert await second.get_attribute("#desk-error", "data-code") == "PRECONDITION_FAILED"
    assert "Ada Changed" in await second.text_content("#conflict-view tr[data-field='guest_name'] .theirs")
    await _shoot(second, "desk-conflict")
    await first.reload()
    assert await first.get_attribute("#task-state", "data-state") == "PENDING_CONFIRM"
    assert await first.input_value("#field-guest_name") == "Ada Changed"  # nothing was overwritten

    # An agent of another hotel gets nothing by editing the URL.
    stranger = _person(live_server, live_admin_token, "Sven Stranger", ["ReservationAgent"])
    _hotel(live_server, live_admin_token, stranger)
    other = await open_page()
    await _sign_in(other, live_server, stranger["email"], "/console/desk")
    for url in (path, f"/console/desk/orders/{task['order_id']}", f"/console/desk/hotels/{hotel}/orders"):
        answer = await other.goto(f"{live_server.url}{url}")
        assert answer is not None and answer.status == 404
        assert await other.locator("#card-form, #tasks, #queue").count() == 0
    assert violations == []


async def test_the_same_flow_in_chinese(live_server, live_admin_token, watched):
    open_page, violations = watched
    agent = _person(live_server, live_admin_token, "Li Lei", ["ReservationAgent"])
    hotel, client_token = _hotel(live_server, live_admin_token, agent)
    page = await open_page(viewport={"width": 1280, "height": 900}, locale="zh-CN")
    await _sign_in(page, live_server, agent["email"], "/console/desk")
    await page.wait_for_selector("html[lang='zh-CN']")
    assert await page.text_content("h1") == "预订工作台"
    await _work_first_task(page, live_server, hotel, client_token, shots=None)
    assert "待确认" in await page.text_content("#task-state")
    assert violations == []


async def test_rooming_list_rows_are_added_and_removed_in_place(live_server, live_admin_token, watched):
    open_page, violations = watched
    agent = _person(live_server, live_admin_token, "Rita Agent", ["ReservationAgent"])
    hotel, client_token = _hotel(live_server, live_admin_token, agent)
    rooming = {"result_type": "normal_task", "ai_task_type": "ROOMING_LIST", "current_or_history": "current",
               "case_keys": {"group_code": "GRPROOM"},
               "extracted_fields": {"rooming_list": [{"guest_name": "Ada"}, {"guest_name": "Bea"}]}}
    [task] = _ingest(live_server, client_token, hotel, [rooming])
    page = await open_page(viewport={"width": 1280, "height": 900})
    await _sign_in(page, live_server, agent["email"], f"/console/desk/tasks/{task['task_id']}")
    await page.click("#field-rooming_list button.add-row")  # htmx swaps the form in place: no page load
    await page.wait_for_selector("#field-rooming_list-2-guest_name")
    await page.fill("#field-rooming_list-2-guest_name", "Cleo")
    await _version_becomes(page, 3)  # the row was saved with the draft, then the name as typed
    await page.click("#field-rooming_list tr[data-row='0'] button")
    await page.wait_for_selector("#field-rooming_list-2-guest_name", state="detached")
    await page.reload()
    names = [await page.input_value(f"#field-rooming_list-{i}-guest_name") for i in range(2)]
    assert names == ["Bea", "Cleo"]
    await _shoot(page, "desk-rooming-list")
    assert violations == []


_FOCUSED = """() => {
    const e = document.activeElement;
    if (!e || e === document.body) return null;
    const r = e.getBoundingClientRect(), s = getComputedStyle(e);
    const label = e.labels && e.labels.length ? e.labels[0].textContent : "";
    return {id: e.id, tag: e.tagName, top: r.top + window.scrollY, bottom: r.bottom + window.scrollY,
            left: r.left + window.scrollX,
            name: (e.getAttribute("aria-label") || label || e.textContent || e.value || e.title || "").trim(),
            ring: s.outlineStyle !== "none" && parseFloat(s.outlineWidth) > 0,
            inMain: !!e.closest("main")};
}"""


async def _tab_through(page, until: str, limit: int = 80) -> list[dict]:
    """Tab from the top of the page until the element `until` has the focus: what had the focus on the way."""
    await page.evaluate("() => { document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0); }")
    walked: list[dict] = []
    for _ in range(limit):
        await page.keyboard.press("Tab")
        found = await page.evaluate(_FOCUSED)
        if found is None:
            continue
        walked.append(found)
        if found["id"] == until:
            return walked
    raise AssertionError(f"#{until} was not reached with Tab: {[w['id'] or w['name'][:20] for w in walked]}")


def _follows_the_eye(walked: list[dict]) -> list[str]:
    """The controls of the page's main part whose focus moves up to a line above, or left on the same line (boxes
    that share some height are on one line: a label over a select and one over an input, side by side)."""
    main = [w for w in walked if w["inMain"]]
    wrong = []
    for before, after in pairwise(main):
        same_line = after["top"] < before["bottom"] and before["top"] < after["bottom"]
        if (not same_line and after["bottom"] <= before["top"]) or (same_line and after["left"] < before["left"]):
            wrong.append(f"{before['id'] or before['name'][:20]} -> {after['id'] or after['name'][:20]}")
    return wrong


async def test_the_queue_and_the_card_work_with_the_keyboard_alone(live_server, live_admin_token, watched):
    """Tab only: the focus follows the visual order, every control it reaches is labelled and shows the focus
    ring, Enter opens the task from the queue and confirms the card."""
    open_page, violations = watched
    agent = _person(live_server, live_admin_token, "Kim Keys", ["ReservationAgent"])
    hotel, client_token = _hotel(live_server, live_admin_token, agent)
    [task] = _ingest(live_server, client_token, hotel, [_new_booking("CNFKEYS", {**BAD_DATE,
                                                                                 "arrival_date": "2026-03-01"})])
    page = await open_page(viewport={"width": 1280, "height": 900}, locale="en-US")
    await _sign_in(page, live_server, agent["email"], f"/console/desk/hotels/{hotel}/orders")
    await page.wait_for_selector(f"#waiting tr[data-task='{task['task_id']}']")

    walked = await _tab_through(page, f"open-task-{task['task_id']}")
    assert {"status", "q"} <= {w["id"] for w in walked}  # the filters come first, in order
    assert [w for w in walked if not w["name"]] == [], "a control without a name"
    assert [w["id"] or w["name"] for w in walked if not w["ring"]] == [], "a control without a focus ring"
    assert _follows_the_eye(walked) == []
    await page.wait_for_timeout(3500)  # the list is asked again (htmx): the focus stays on the link
    assert await page.evaluate("() => document.activeElement.id") == f"open-task-{task['task_id']}"
    await page.keyboard.press("Enter")
    await page.wait_for_url(f"{live_server.url}/console/desk/tasks/{task['task_id']}")
    await page.wait_for_selector("#card-form")

    walked = await _tab_through(page, "confirm", limit=120)
    reached = {w["id"] for w in walked}
    controls = await page.eval_on_selector_all(
        "#card-form input:not([type=hidden]):not([disabled]), #card-form select:not([disabled]), "
        "#card-form textarea:not([disabled]), #card-form button:not([disabled])",
        "els => els.filter(e => e.offsetParent !== null && e.tabIndex >= 0).map(e => e.id)")
    assert [c for c in controls if c not in reached and c != "confirm"] == [], "a control Tab does not reach"
    assert [w for w in walked if not w["name"]] == [], "a control without a name"
    assert [w["id"] or w["name"] for w in walked if not w["ring"]] == [], "a control without a focus ring"
    assert _follows_the_eye(walked) == []
    await page.keyboard.press("Enter")
    await page.wait_for_function("() => document.querySelector('#task-state')?.dataset.state === 'READY'",
                                 timeout=15_000)
    assert violations == []
