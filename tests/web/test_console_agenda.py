"""The agenda editor of the console (issue 18) over plain HTTP: every action is the agenda service's (checked by
reading the agenda back through the API), the keyboard's move buttons and the island's order post answer the page
or the list alone, a refusal's code is a sentence next to its form, a stale form (412, an order that no longer
names the live rows) says someone else changed it and shows the new state, every form needs its CSRF token, and
a role the API refuses is refused here too (a table)."""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from tenet.iam.permissions import Role
from tests.web.test_console_http import BASE, csrf_of, sign_in

FRAGMENT = {"X-Agenda-Fragment": "1"}


@pytest.fixture
async def people(users):
    manager = await users.make(roles=[Role.MEETING_MANAGER], display_name="Mona Manager")
    alice = await users.make(roles=[Role.EMPLOYEE], display_name="Alice Attendee")
    leader = await users.make(roles=[Role.LEADER], display_name="Lea Leader")
    return manager, alice, leader


async def _ok(response, status=201):
    assert response.status_code == status, response.text
    return response.json() if response.content else None


async def _meeting(client, manager, clock, *attendees) -> str:
    start = clock.now() + timedelta(days=1)
    meeting = await _ok(await client.post(f"{BASE}/meetings", headers=manager.headers, json={
        "title": "Board meeting", "timezone": "Asia/Shanghai", "location": "Room 1", "start_time": start.isoformat(),
        "end_time": (start + timedelta(hours=2)).isoformat(),
        "required_attendee_ids": [str(a.id) for a in attendees]}))
    return meeting["id"]


async def _agenda(client, manager, meeting_id: str) -> dict:
    return await _ok(await client.get(f"{BASE}/meetings/{meeting_id}/agenda", headers=manager.headers), 200)


async def _shape(client, manager, meeting_id: str) -> list[tuple[str, list[str]]]:
    found = await _agenda(client, manager, meeting_id)
    return [(s["title"], [i["title"] for i in s["items"]]) for s in found["sections"]]


async def _built(client, manager, meeting_id: str, shape: dict[str, list[str]]) -> dict:
    """An agenda made through the API: sections with items (10 minutes each)."""
    for title, items in shape.items():
        section = await _ok(await client.post(f"{BASE}/meetings/{meeting_id}/agenda/sections",
                                              headers=manager.headers, json={"title": title}))
        for item in items:
            await _ok(await client.post(f"{BASE}/agenda/sections/{section['id']}/items", headers=manager.headers,
                                        json={"title": item, "time_minutes": 10}))
    return await _agenda(client, manager, meeting_id)


def _ids(found: dict) -> dict[str, str]:
    """Titles of sections and items -> their ids."""
    ids = {}
    for s in found["sections"]:
        ids[s["title"]] = s["id"]
        for i in s["items"]:
            ids[i["title"]] = i["id"]
    return ids


async def _page(client, meeting_id: str, **headers) -> tuple[str, str]:
    page = await client.get(f"/console/meetings/{meeting_id}/agenda", headers=headers)
    assert page.status_code == 200, page.text
    return page.text, csrf_of(page.text)


def _code(html: str, key: str) -> str | None:
    found = re.search(rf'id="{re.escape(key)}-error" class="error field-error" role="alert" data-code="([A-Z_]+)"',
                      html)
    return found.group(1) if found else None


async def test_a_manager_builds_an_agenda_with_the_forms(client, people, clock):
    manager, alice, _ = people
    mid = await _meeting(client, manager, clock, alice)
    await sign_in(client, manager.email)
    meeting_page = await client.get(f"/console/meetings/{mid}")
    assert f'href="/console/meetings/{mid}/agenda">Edit the agenda</a>' in meeting_page.text
    html, token = await _page(client, mid)
    assert 'id="no-sections"' in html and '<script src="/static/agenda-editor.js" defer></script>' in html
    assert "<script>" not in html and "style=" not in html

    for title in ("Opening", "Numbers"):
        added = await client.post(f"/console/meetings/{mid}/agenda/sections", data={"csrf_token": token,
                                                                                   "title": title})
        assert added.status_code == 303 and added.headers["location"] == f"/console/meetings/{mid}/agenda#new-section"
    ids = _ids(await _agenda(client, manager, mid))
    for title, minutes in (("Welcome", "10"), ("Last minutes", "")):
        quick = await client.post(f"/console/meetings/{mid}/agenda/sections/{ids['Opening']}/items/new",
                                  data={"csrf_token": token, "title": title, "time_minutes": minutes})
        assert quick.status_code == 303, quick.text

    # The full form: the presenter found by the people search (without JS: the search button), then saved.
    new = f"/console/meetings/{mid}/agenda/sections/{ids['Numbers']}/items/new"
    form = await client.get(new)
    assert form.status_code == 200 and 'id="presenter-choices"' in form.text
    typed = {"csrf_token": token, "title": "Budget", "time_minutes": "25", "description": "Slides\nand numbers",
             "q": "alice"}
    search = await client.post(new, data={**typed, "action": "search"})
    assert search.status_code == 200 and f'value="{alice.id}"' in search.text and "Alice Attendee" in search.text
    assert 'value="Budget"' in search.text and await _shape(client, manager, mid) == [
        ("Opening", ["Welcome", "Last minutes"]), ("Numbers", [])]
    fragment = await client.get(f"/console/meetings/{mid}/agenda/presenters", params={"q": "Attendee"})
    assert fragment.status_code == 200 and "<html" not in fragment.text and str(alice.id) in fragment.text
    saved = await client.post(new, data={**typed, "action": "save", "presenter_user_id": str(alice.id)})
    assert saved.status_code == 303 and saved.headers["location"].endswith(f"#section-{ids['Numbers']}")

    found = await _agenda(client, manager, mid)
    assert [(s["title"], [(i["title"], i["time_minutes"]) for i in s["items"]]) for s in found["sections"]] == [
        ("Opening", [("Welcome", 10), ("Last minutes", None)]), ("Numbers", [("Budget", 25)])]
    budget = found["sections"][1]["items"][0]
    assert budget["presenter"]["user_id"] == str(alice.id) and budget["description"] == "Slides\nand numbers"
    html, _ = await _page(client, mid)
    assert re.search(r'id="agenda-total"><strong>Total time</strong>: 35 min', html)
    assert f'id="section-{ids["Opening"]}-total">10 min' in html and "Presenter: Alice Attendee" in html


async def test_rename_and_a_stale_rename_shows_the_new_state(client, people, clock):
    manager, alice, _ = people
    mid = await _meeting(client, manager, clock, alice)
    ids = _ids(await _built(client, manager, mid, {"Opening": []}))
    await sign_in(client, manager.email)
    html, token = await _page(client, mid)
    version = re.search(rf'/sections/{ids["Opening"]}/rename".*?name="version" value="(\d+)"', html, re.S).group(1)
    rename = f"/console/meetings/{mid}/agenda/sections/{ids['Opening']}/rename"
    done = await client.post(rename, data={"csrf_token": token, "title": "Welcome", "version": version})
    assert done.status_code == 303
    empty = await client.post(rename, data={"csrf_token": token, "title": "  ", "version": str(int(version) + 1)})
    assert empty.status_code == 422 and _code(empty.text, f"section-{ids['Opening']}") == "VALIDATION_FAILED"
    assert f'aria-describedby="section-{ids["Opening"]}-error"' in empty.text
    stale = await client.post(rename, data={"csrf_token": token, "title": "Greetings", "version": version})
    assert stale.status_code == 412 and 'id="agenda-notice"' in stale.text
    assert "Someone else changed this in the meantime." in stale.text
    assert '<span class="section-title">Welcome</span>' in stale.text  # the new state
    assert await _shape(client, manager, mid) == [("Welcome", [])]


async def test_the_keyboard_moves_items_and_sections_with_plain_posts_or_the_list_alone(client, people, clock):
    manager, alice, _ = people
    mid = await _meeting(client, manager, clock, alice)
    ids = _ids(await _built(client, manager, mid, {"A": ["a1", "a2", "a3"], "B": ["b1"]}))
    await sign_in(client, manager.email)
    _, token = await _page(client, mid)
    down = await client.post(f"/console/meetings/{mid}/agenda/items/{ids['a1']}/move",
                             data={"csrf_token": token, "direction": "down"})
    assert down.status_code == 303 and down.headers["location"].endswith(f"#item-{ids['a1']}")
    assert await _shape(client, manager, mid) == [("A", ["a2", "a1", "a3"]), ("B", ["b1"])]
    up = await client.post(f"/console/meetings/{mid}/agenda/items/{ids['a3']}/move",
                           data={"csrf_token": token, "direction": "up"}, headers=FRAGMENT)
    assert up.status_code == 200 and "<html" not in up.text and 'id="sections"' in up.text
    assert up.text.index(f'id="item-{ids["a3"]}"') < up.text.index(f'id="item-{ids["a1"]}"')
    edge = await client.post(f"/console/meetings/{mid}/agenda/items/{ids['b1']}/move",
                             data={"csrf_token": token, "direction": "down"})
    assert edge.status_code == 303
    section = await client.post(f"/console/meetings/{mid}/agenda/sections/{ids['B']}/move",
                                data={"csrf_token": token, "direction": "up"})
    assert section.status_code == 303
    assert await _shape(client, manager, mid) == [("B", ["b1"]), ("A", ["a2", "a3", "a1"])]


async def test_the_island_posts_a_new_order_in_a_section_and_across_sections(client, people, clock):
    manager, alice, _ = people
    mid = await _meeting(client, manager, clock, alice)
    ids = _ids(await _built(client, manager, mid, {"A": ["a1", "a2", "a3"], "B": ["b1"]}))
    await sign_in(client, manager.email)
    _, token = await _page(client, mid)
    order = f"/console/meetings/{mid}/agenda/order"
    within = await client.post(order, headers={"X-CSRF-Token": token, **FRAGMENT}, data={
        "section_id": ids["A"], "item_id": ids["a3"], "ids": [ids["a3"], ids["a1"], ids["a2"]]})
    assert within.status_code == 200 and "<html" not in within.text
    across = await client.post(order, headers={"X-CSRF-Token": token, **FRAGMENT}, data={
        "section_id": ids["B"], "item_id": ids["a1"], "ids": [ids["a1"], ids["b1"]]})
    assert across.status_code == 200, across.text
    assert await _shape(client, manager, mid) == [("A", ["a3", "a2"]), ("B", ["a1", "b1"])]
    assert 'id="agenda-total"><strong>Total time</strong>: 40 min' in across.text
    # A page that did not see the last change: said so, with the agenda as it is now.
    stale = await client.post(order, headers={"X-CSRF-Token": token, **FRAGMENT}, data={
        "section_id": ids["A"], "ids": [ids["a2"], ids["a3"], ids["a1"]]})
    assert stale.status_code == 409 and _code(stale.text, "order") == "AGENDA_ORDER_MISMATCH"
    assert 'id="agenda-notice"' in stale.text and "<html" not in stale.text
    assert stale.text.index(f'id="item-{ids["a3"]}"') < stale.text.index(f'id="item-{ids["a2"]}"')
    sections = await client.post(order, headers={"X-CSRF-Token": token}, data={
        "kind": "sections", "ids": [ids["B"], ids["A"]]})
    assert sections.status_code == 303
    assert await _shape(client, manager, mid) == [("B", ["a1", "b1"]), ("A", ["a3", "a2"])]


async def test_edit_an_item_refusals_next_to_the_field_and_a_stale_edit(client, people, clock, users):
    manager, alice, _ = people
    mid = await _meeting(client, manager, clock, alice)
    found = await _built(client, manager, mid, {"A": ["a1"]})
    item = found["sections"][0]["items"][0]
    await sign_in(client, manager.email)
    edit = f"/console/meetings/{mid}/agenda/items/{item['id']}/edit"
    form = await client.get(edit)
    assert form.status_code == 200 and 'value="a1"' in form.text and 'value="10"' in form.text
    token = csrf_of(form.text)
    base = {"csrf_token": token, "title": "Opening words", "time_minutes": "15", "description": "Short",
            "version": str(item["version"]), "action": "save"}
    too_long = await client.post(edit, data={**base, "time_minutes": "2000"})
    assert too_long.status_code == 422 and _code(too_long.text, "time_minutes") == "VALIDATION_FAILED"
    assert 'aria-describedby="time_minutes-error"' in too_long.text and 'value="Opening words"' in too_long.text
    nobody = await client.post(edit, data={**base, "presenter_user_id": str(uuid.uuid4())})
    assert nobody.status_code == 422 and _code(nobody.text, "presenter_user_id") == "PRESENTER_NOT_FOUND"
    assert "The presenter must be a person with an active account." in nobody.text
    saved = await client.post(edit, data={**base, "presenter_user_id": str(manager.id)})
    assert saved.status_code == 303, saved.text
    changed = (await _agenda(client, manager, mid))["sections"][0]["items"][0]
    assert (changed["title"], changed["time_minutes"], changed["description"], changed["presenter"]["user_id"]) == (
        "Opening words", 15, "Short", str(manager.id))
    stale = await client.post(edit, data={**base, "title": "Mine"})  # the version the form first showed
    assert stale.status_code == 412 and 'id="item-notice"' in stale.text
    assert 'value="Opening words"' in stale.text and 'value="Mine"' not in stale.text
    cleared = await client.post(edit, data={**base, "version": str(changed["version"]), "time_minutes": "",
                                            "description": "", "presenter_user_id": ""})
    assert cleared.status_code == 303
    changed = (await _agenda(client, manager, mid))["sections"][0]["items"][0]
    assert (changed["time_minutes"], changed["description"], changed["presenter"]) == (None, None, None)


async def test_delete_an_item_and_a_section(client, people, clock):
    manager, alice, _ = people
    mid = await _meeting(client, manager, clock, alice)
    ids = _ids(await _built(client, manager, mid, {"A": ["a1", "a2"], "B": ["b1"]}))
    await sign_in(client, manager.email)
    _, token = await _page(client, mid)
    assert (await client.post(f"/console/meetings/{mid}/agenda/items/{ids['a1']}/delete",
                              data={"csrf_token": token})).status_code == 303
    assert (await client.post(f"/console/meetings/{mid}/agenda/sections/{ids['B']}/delete",
                              data={"csrf_token": token})).status_code == 303
    assert await _shape(client, manager, mid) == [("A", ["a2"])]
    gone = await client.post(f"/console/meetings/{mid}/agenda/items/{ids['a1']}/delete", data={"csrf_token": token})
    assert gone.status_code == 404 and 'data-code="AGENDA_ITEM_NOT_FOUND"' in gone.text


async def test_upload_tasks_assigned_with_a_due_date_refused_and_cancelled(client, people, clock, users):
    manager, alice, leader = people
    mid = await _meeting(client, manager, clock, alice)
    ids = _ids(await _built(client, manager, mid, {"A": ["a1"]}))
    await sign_in(client, manager.email)
    html, token = await _page(client, mid)
    assert f'<option value="{alice.id}">Alice Attendee</option>' in html
    assign = f"/console/meetings/{mid}/agenda/items/{ids['a1']}/tasks"
    done = await client.post(assign, data={"csrf_token": token, "assignee_user_id": str(alice.id),
                                           "due_at": "2030-05-06T09:30"})
    assert done.status_code == 303 and done.headers["location"].endswith(f"#tasks-{ids['a1']}")
    task = (await _agenda(client, manager, mid))["sections"][0]["items"][0]["upload_tasks"][0]
    assert datetime.fromisoformat(task["due_at"]) == datetime(2030, 5, 6, 9, 30, tzinfo=ZoneInfo("Asia/Shanghai"))
    assert (task["assignee_user_id"], task["status"]) == (str(alice.id), "PENDING")
    again = await client.post(assign, data={"csrf_token": token, "assignee_user_id": str(alice.id), "due_at": ""})
    assert again.status_code == 409 and _code(again.text, f"tasks-{ids['a1']}") == "UPLOAD_TASK_ALREADY_PENDING"
    outsider = await client.post(assign, data={"csrf_token": token, "assignee_user_id": str(leader.id),
                                               "due_at": "2030-05-06T09:30"})
    assert outsider.status_code == 422
    assert _code(outsider.text, f"tasks-{ids['a1']}") == "UPLOAD_TASK_ASSIGNEE_INVALID"
    assert 'value="2030-05-06T09:30"' in outsider.text  # what was typed stays
    bad_date = await client.post(assign, data={"csrf_token": token, "assignee_user_id": str(alice.id),
                                               "due_at": "tomorrow"})
    assert bad_date.status_code == 422 and _code(bad_date.text, f"tasks-{ids['a1']}") == "VALIDATION_FAILED"
    html, _ = await _page(client, mid)
    assert f'id="task-{task["id"]}" data-task="{task["id"]}" data-status="PENDING">Upload task for Alice' in html
    assert "(Asia/Shanghai)" in html
    cancel = f"/console/meetings/{mid}/agenda/tasks/{task['id']}/cancel"
    assert (await client.post(cancel, data={"csrf_token": token})).status_code == 303
    assert (await _agenda(client, manager, mid))["sections"][0]["items"][0]["upload_tasks"][0]["status"] == \
        "CANCELLED"
    twice = await client.post(cancel, data={"csrf_token": token})
    assert twice.status_code == 409 and _code(twice.text, "sections") == "UPLOAD_TASK_NOT_PENDING"


# --- who may: the API's table, action by action -----------------------------------------------------------

ACTIONS = {  # name -> (path under /console/meetings/{mid}/agenda, form fields); {A}, {a1}, {task}: ids
    "add a section": ("/sections", {"title": "X"}),
    "rename a section": ("/sections/{A}/rename", {"title": "X"}),
    "move a section": ("/sections/{A}/move", {"direction": "down"}),
    "delete a section": ("/sections/{A}/delete", {}),
    "add an item": ("/sections/{A}/items/new", {"title": "X", "action": "save"}),
    "edit an item": ("/items/{a1}/edit", {"title": "X", "action": "save"}),
    "move an item": ("/items/{a1}/move", {"direction": "down"}),
    "order the items": ("/order", {"section_id": "{A}", "ids": ["{a2}", "{a1}"]}),
    "delete an item": ("/items/{a1}/delete", {}),
    "assign a task": ("/items/{a1}/tasks", {"assignee_user_id": "{alice}"}),
    "cancel a task": ("/tasks/{task}/cancel", {}),
}


async def _table_setup(client, people, clock):
    manager, alice, leader = people
    mid = await _meeting(client, manager, clock, alice, leader)
    found = await _built(client, manager, mid, {"A": ["a1", "a2"], "B": []})
    ids = _ids(found)
    task = await _ok(await client.post(f"{BASE}/agenda/items/{ids['a1']}/upload-tasks", headers=manager.headers,
                                       json={"assignee_user_ids": [str(leader.id)]}))
    ids.update(task=task["items"][0]["id"], alice=str(alice.id))
    return mid, ids


def _filled(value, ids):
    if isinstance(value, list):
        return [_filled(v, ids) for v in value]
    return value.format(**ids)


@pytest.mark.parametrize("action", sorted(ACTIONS))
@pytest.mark.parametrize("role", ["Leader", "Employee"])
async def test_a_role_the_api_refuses_is_refused_and_nothing_changes(client, people, clock, action, role):
    manager, alice, leader = people
    mid, ids = await _table_setup(client, people, clock)
    before = await _agenda(client, manager, mid)
    await sign_in(client, (leader if role == "Leader" else alice).email)
    html, token = await _page(client, mid)  # participants read the agenda...
    assert "<form" not in html.split('id="agenda"')[1]  # ...with no form to change it
    path, fields = ACTIONS[action]
    refused = await client.post(f"/console/meetings/{mid}/agenda{_filled(path, ids)}",
                                data={"csrf_token": token, **{k: _filled(v, ids) for k, v in fields.items()}})
    assert refused.status_code == 403 and 'data-code="PERMISSION_DENIED"' in refused.text
    assert await _agenda(client, manager, mid) == before


@pytest.mark.parametrize("action", sorted(ACTIONS))
async def test_every_form_needs_its_csrf_token(client, people, clock, action):
    manager, _, _ = people
    mid, ids = await _table_setup(client, people, clock)
    before = await _agenda(client, manager, mid)
    await sign_in(client, manager.email)
    path, fields = ACTIONS[action]
    data = {k: _filled(v, ids) for k, v in fields.items()}
    for forged in ({}, {"csrf_token": "0" * 64}):
        refused = await client.post(f"/console/meetings/{mid}/agenda{_filled(path, ids)}", data={**data, **forged})
        assert refused.status_code == 403 and 'data-code="CSRF_REFUSED"' in refused.text
    assert await _agenda(client, manager, mid) == before


async def test_a_row_of_another_meeting_is_not_found_here(client, people, clock):
    manager, alice, _ = people
    mine = await _meeting(client, manager, clock, alice)
    other = await _meeting(client, manager, clock, alice)
    ids = _ids(await _built(client, manager, other, {"A": ["a1"]}))
    await sign_in(client, manager.email)
    _, token = await _page(client, mine)
    wrong = await client.post(f"/console/meetings/{mine}/agenda/sections/{ids['A']}/delete",
                              data={"csrf_token": token})
    assert wrong.status_code == 404 and 'data-code="AGENDA_SECTION_NOT_FOUND"' in wrong.text
    assert await _shape(client, manager, other) == [("A", ["a1"])]


async def test_a_stranger_gets_not_found_and_no_session_goes_to_sign_in(client, people, clock, users):
    manager, alice, _ = people
    mid = await _meeting(client, manager, clock, alice)
    anonymous = await client.get(f"/console/meetings/{mid}/agenda")
    assert anonymous.status_code == 303 and anonymous.headers["location"].endswith(
        f"next=/console/meetings/{mid}/agenda")
    stranger = await users.make(roles=[Role.EMPLOYEE], display_name="Stan Stranger")
    await sign_in(client, stranger.email)
    assert (await client.get(f"/console/meetings/{mid}/agenda")).status_code == 404


async def test_the_page_in_chinese(client, people, clock):
    manager, alice, _ = people
    mid = await _meeting(client, manager, clock, alice)
    await _built(client, manager, mid, {"A": ["a1"]})
    await sign_in(client, manager.email)
    html, _ = await _page(client, mid, **{"Accept-Language": "zh-CN"})
    assert "议程" in html and "添加分组" in html and "分配上传任务" in html and "Add the section" not in html


async def test_the_island_is_served_by_tenet(client):
    script = await client.get("/static/agenda-editor.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert "dragstart" in script.text and "X-Agenda-Fragment" in script.text
