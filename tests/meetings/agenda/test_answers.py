"""An agenda command answers what the agenda's GET shows of the same section, item or upload task right after it
(issue 23: the answer is read back through the agenda's query, in the command's transaction)."""

from __future__ import annotations

from typing import Any


def _section(agenda: dict, section_id: str) -> dict[str, Any]:
    found = next(s for s in agenda["sections"] if s["id"] == section_id)
    return {k: v for k, v in found.items() if k != "items"}


def _item(agenda: dict, item_id: str) -> dict[str, Any]:
    found = next(i for s in agenda["sections"] for i in s["items"] if i["id"] == item_id)
    return {k: v for k, v in found.items() if k not in ("attachments", "upload_tasks")}


def _tasks(agenda: dict, item_id: str) -> dict[str, dict]:
    found = next(i for s in agenda["sections"] for i in s["items"] if i["id"] == item_id)
    return {t["id"]: t for t in found["upload_tasks"]}


async def test_sections_items_and_tasks_answer_what_the_agenda_shows(agenda_api, world):
    meeting, manager = world.meeting_id, world.manager

    async def agenda() -> dict:
        return (await agenda_api.agenda(manager, meeting)).json()

    section = await agenda_api.section(manager, meeting, "Opening")
    assert section == _section(await agenda(), section["id"])
    renamed = await agenda_api.ok("PATCH", f"/agenda/sections/{section['id']}", manager, json={"title": "Welcome"})
    assert renamed == _section(await agenda(), section["id"])

    item = await agenda_api.item(manager, section["id"], "Figures", presenter_user_id=str(world.alice.id),
                                 description="The quarter", code="1.1", time_minutes=15, category_tag="REPORT")
    assert item == _item(await agenda(), item["id"])
    other = await agenda_api.section(manager, meeting, "Later")
    moved = await agenda_api.ok("PATCH", f"/agenda/items/{item['id']}", manager,
                                json={"section_id": other["id"], "title": "Figures, again"})
    assert moved == _item(await agenda(), item["id"])

    assigned = await agenda_api.assign(manager, item["id"], world.alice, world.bob)
    assert assigned.status_code == 201, assigned.text
    shown = _tasks(await agenda(), item["id"])
    assert [shown[t["id"]] for t in assigned.json()["items"]] == assigned.json()["items"]
    task = assigned.json()["items"][0]
    cancelled = await agenda_api.ok("POST", f"/upload-tasks/{task['id']}/cancel", manager)
    assert cancelled == _tasks(await agenda(), item["id"])[task["id"]]
