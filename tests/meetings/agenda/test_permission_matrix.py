"""Spec 001 §权限矩阵, row by row (tenet.meetings.agenda.permissions.PERMISSION_TABLE): one case per row, each asserting
every caller's answer. Callers: Administrator, MeetingManager, the organizer (a Leader, a participant), a required
attendee (an Employee), an external attendee (a signed-in walk-in) and an unrelated Employee."""

from __future__ import annotations

from typing import Any

import pytest

from tenet.meetings.agenda.permissions import PERMISSION_TABLE
from tests.meetings.agenda.conftest import AgendaApi, World
from tests.support.outcomes import code

CALLERS = ("admin", "manager", "organizer", "alice", "walk_in", "stranger")
FULL_KEYS = {"view", "meeting_id", "modified_after_meeting_end", "sections", "meeting_attachments"}
FULL_ITEM_KEYS = {"id", "section_id", "order", "title", "description", "code", "time_minutes", "presenter",
                  "category_tag", "created_by_id", "created_at", "updated_at", "version", "attachments",
                  "upload_tasks"}


async def _setup(api: AgendaApi, world: World) -> dict[str, Any]:
    section = await api.section(world.manager, world.meeting_id)
    item = await api.item(world.manager, section["id"], "Budget", description="numbers",
                          presenter_user_id=str(world.organizer.id))
    [task] = (await api.assign(world.manager, item["id"], world.alice)).json()["items"]
    upload = (await api.upload(world.manager, item["id"])).json()
    return {"section": section, "item": item, "task": task, "upload": upload}


def _who(world: World, name: str):
    return getattr(world, name)


async def row_1_and_2_views(api: AgendaApi, world: World, ctx) -> dict[str, Any]:
    seen = {}
    for name in CALLERS:
        response = await api.agenda(_who(world, name), world.meeting_id)
        if response.status_code != 200:
            seen[name] = (response.status_code, code(response))
            continue
        body = response.json()
        item = body["sections"][0]["items"][0]
        seen[name] = (body["view"], set(body) == FULL_KEYS and set(item) == FULL_ITEM_KEYS
                      if body["view"] == "full" else set(item) == {"id", "order", "title"})
    return seen


def _mutation(method: str, path_of, body_of=None, expect_ok: int = 200):
    async def run(api: AgendaApi, world: World, ctx) -> dict[str, Any]:
        seen = {}
        for name in CALLERS:
            fresh = await _setup(api, world) if name != CALLERS[0] else ctx
            response = await api.call(method, path_of(world, fresh), _who(world, name),
                                      json=body_of(world, fresh) if body_of else None)
            seen[name] = response.status_code if response.status_code == expect_ok else (
                response.status_code, code(response))
        return seen
    return run


async def row_8_my_tasks(api: AgendaApi, world: World, ctx) -> dict[str, Any]:
    seen = {}
    for name in CALLERS:
        response = await api.call("GET", "/me/upload-tasks", _who(world, name))
        seen[name] = (response.status_code, len(response.json()["items"]))
    return seen


async def row_9_upload_without_task(api: AgendaApi, world: World, ctx) -> dict[str, Any]:
    seen = {}
    for name in CALLERS:
        who = world.bob if name == "alice" else _who(world, name)  # bob: a required attendee without a task
        response = await api.upload(who, ctx["item"]["id"])
        seen[name] = response.status_code if response.status_code == 201 else (response.status_code, code(response))
    return seen


async def row_10_upload_with_task(api: AgendaApi, world: World, ctx) -> dict[str, Any]:
    response = await api.upload(world.alice, ctx["item"]["id"])
    walk_in = await api.upload(world.walk_in, ctx["item"]["id"])
    return {"alice": (response.status_code, response.json().get("task_completed_id") == ctx["task"]["id"]),
            "walk_in": (walk_in.status_code, code(walk_in))}


async def row_11_meeting_upload(api: AgendaApi, world: World, ctx) -> dict[str, Any]:
    seen = {}
    for name in CALLERS:
        response = await api.upload_meeting(_who(world, name), world.meeting_id)
        seen[name] = response.status_code if response.status_code == 201 else (response.status_code, code(response))
    return seen


async def row_12_download(api: AgendaApi, world: World, ctx) -> dict[str, Any]:
    seen = {}
    for name in CALLERS:
        response = await api.ma.client.get(ctx["upload"]["download_url"], headers=api.ma.headers(_who(world, name)))
        seen[name] = response.status_code if response.status_code == 200 else (response.status_code, code(response))
    return seen


async def row_13_delete_own(api: AgendaApi, world: World, ctx) -> dict[str, Any]:
    own = (await api.upload(world.alice, ctx["item"]["id"])).json()["id"]
    response = await api.call("DELETE", f"/attachments/agenda-item/{own}", world.alice)
    manager_own = (await api.upload(world.manager, ctx["item"]["id"])).json()["id"]
    managed = await api.call("DELETE", f"/attachments/agenda-item/{manager_own}", world.manager)
    return {"alice": response.status_code, "manager": managed.status_code}


async def row_14_forced_delete(api: AgendaApi, world: World, ctx) -> dict[str, Any]:
    seen = {}
    for name in CALLERS:
        target = (await api.upload(world.alice, ctx["item"]["id"])).json()["id"]
        who = world.bob if name == "alice" else _who(world, name)  # bob: a participant deleting alice's file
        response = await api.call("DELETE", f"/attachments/agenda-item/{target}", who)
        seen[name] = response.status_code if response.status_code == 204 else (response.status_code, code(response))
    return seen


async def row_15_restore(api: AgendaApi, world: World, ctx) -> dict[str, Any]:
    seen = {}
    for name in CALLERS:
        target = (await api.upload(world.manager, ctx["item"]["id"])).json()["id"]
        await api.ok("DELETE", f"/attachments/agenda-item/{target}", world.manager, 204)
        response = await api.call("POST", f"/attachments/agenda-item/{target}/restore", _who(world, name))
        seen[name] = response.status_code if response.status_code == 204 else (response.status_code, code(response))
    return seen


DENIED = (403, "PERMISSION_DENIED")
MANAGERS_ONLY = {"organizer": DENIED, "alice": DENIED, "walk_in": DENIED, "stranger": DENIED}
MATRIX = [
    ("1-2 view: full for participants, titles only for externals", row_1_and_2_views, {
        "admin": ("full", True), "manager": ("full", True), "organizer": ("full", True), "alice": ("full", True),
        "walk_in": ("restricted", True), "stranger": (404, "MEETING_NOT_FOUND")}),
    ("3 sections", _mutation("POST", lambda w, c: f"/meetings/{w.meeting_id}/agenda/sections",
                             lambda w, c: {"title": "New"}, 201), {"admin": 201, "manager": 201, **MANAGERS_ONLY}),
    ("4 items", _mutation("PATCH", lambda w, c: f"/agenda/items/{c['item']['id']}", lambda w, c: {"title": "X"}),
     {"admin": 200, "manager": 200, **MANAGERS_ONLY}),
    ("5 reorder", _mutation("PUT", lambda w, c: f"/agenda/sections/{c['section']['id']}/items/order",
                            lambda w, c: {"ids": [c["item"]["id"]]}), {"admin": 200, "manager": 200, **MANAGERS_ONLY}),
    ("6 assign", _mutation("POST", lambda w, c: f"/agenda/items/{c['item']['id']}/upload-tasks",
                           lambda w, c: {"assignee_user_ids": [str(w.bob.id)]}, 201),
     {"admin": 201, "manager": 201, **MANAGERS_ONLY}),
    ("7 cancel task", _mutation("POST", lambda w, c: f"/upload-tasks/{c['task']['id']}/cancel"),
     {"admin": 200, "manager": 200, **MANAGERS_ONLY}),
    ("8 my tasks", row_8_my_tasks, {"admin": (200, 0), "manager": (200, 0), "organizer": (200, 0),
                                    "alice": (200, 1), "walk_in": (200, 0), "stranger": (200, 0)}),
    ("9 upload without a task", row_9_upload_without_task, {
        "admin": 201, "manager": 201, "organizer": (403, "UPLOAD_TASK_NOT_OWNED"),
        "alice": (403, "UPLOAD_TASK_NOT_OWNED"), "walk_in": (403, "UPLOAD_TASK_NOT_OWNED"),
        "stranger": (404, "AGENDA_ITEM_NOT_FOUND")}),
    ("10 upload with one's task", row_10_upload_with_task, {"alice": (201, True),
                                                             "walk_in": (403, "UPLOAD_TASK_NOT_OWNED")}),
    ("11 meeting-level upload", row_11_meeting_upload, {"admin": 201, "manager": 201, **MANAGERS_ONLY}),
    ("12 download", row_12_download, {"admin": 200, "manager": 200, "organizer": 200, "alice": 200,
                                      "walk_in": (403, "MEETING_ACTION_FORBIDDEN"),
                                      "stranger": (404, "ATTACHMENT_NOT_FOUND")}),
    ("13 delete one's own", row_13_delete_own, {"alice": 204, "manager": 204}),
    ("14 delete another's (forced)", row_14_forced_delete, {
        "admin": 204, "manager": 204, "organizer": (403, "ATTACHMENT_NOT_OWN"), "alice": (403, "ATTACHMENT_NOT_OWN"),
        "walk_in": (404, "ATTACHMENT_NOT_FOUND"), "stranger": (404, "ATTACHMENT_NOT_FOUND")}),
    ("15 restore", row_15_restore, {"admin": 204, "manager": DENIED, **MANAGERS_ONLY}),
]


@pytest.mark.parametrize(("row", "run", "expected"), MATRIX, ids=[m[0].split(" ")[0] for m in MATRIX])
async def test_matrix(agenda_api: AgendaApi, world: World, row, run, expected):
    context = await _setup(agenda_api, world)
    assert await run(agenda_api, world, context) == expected, row


def test_every_row_of_the_written_table_has_a_case():
    rows = [line.split("|")[1].strip() for line in PERMISSION_TABLE.splitlines()[2:] if line.startswith("| ")]
    covered = {n for label, *_ in MATRIX for n in label.split(" ")[0].split("-")}
    assert set(rows) == covered == {str(n) for n in range(1, 16)}
