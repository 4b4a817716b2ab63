"""Sections and items: create, change, reorder, delete with the cascade, the two views, the audit rows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text

from tests.meetings.agenda.conftest import AgendaApi, World, new_id
from tests.support.outcomes import code


async def _audit(db, meeting_id: str) -> list:
    async with db.read_only() as session:
        return (await session.execute(text(
            "SELECT action, resource, resource_id, changes FROM meeting_attendance.audit_logs "
            "WHERE meeting_id = :m AND resource IN ('AGENDA_SECTION', 'AGENDA_ITEM', 'UPLOAD_TASK', 'ATTACHMENT') "
            "ORDER BY id"), {"m": meeting_id})).all()


class TestOrdering:
    @pytest.mark.invariant("MA-INV-21")
    async def test_sections_and_items_are_appended_in_order(self, agenda_api: AgendaApi, world: World, db, rules_hold):
        first = await agenda_api.section(world.manager, world.meeting_id, "Opening")
        second = await agenda_api.section(world.manager, world.meeting_id, "Reports")
        a = await agenda_api.item(world.manager, second["id"], "Sales")
        b = await agenda_api.item(world.manager, second["id"], "Support", code="2.2", time_minutes=15)
        assert (first["order"], second["order"], a["order"], b["order"]) == (0, 1, 0, 1)
        view = (await agenda_api.agenda(world.alice, world.meeting_id)).json()
        assert [s["title"] for s in view["sections"]] == ["Opening", "Reports"]
        assert [i["title"] for i in view["sections"][1]["items"]] == ["Sales", "Support"]
        await rules_hold()

    @pytest.mark.invariant("MA-INV-21")
    async def test_a_reorder_permutes_in_one_statement_and_must_name_every_live_section(
            self, agenda_api: AgendaApi, world: World, db, rules_hold):
        ids = [(await agenda_api.section(world.manager, world.meeting_id, t))["id"] for t in ("A", "B", "C")]
        path = f"/meetings/{world.meeting_id}/agenda/sections/order"
        swapped = await agenda_api.ok("PUT", path, world.manager, json={"ids": [ids[2], ids[0], ids[1]]})
        assert swapped["ids"] == [ids[2], ids[0], ids[1]]
        view = (await agenda_api.agenda(world.manager, world.meeting_id)).json()
        assert [(s["title"], s["order"]) for s in view["sections"]] == [("C", 0), ("A", 1), ("B", 2)]
        for wrong in ([ids[0], ids[1]], [*ids, new_id()], [ids[0], ids[0], ids[1]]):
            response = await agenda_api.call("PUT", path, world.manager, json={"ids": wrong})
            assert (response.status_code, code(response)) == (409, "AGENDA_ORDER_MISMATCH")
            assert response.json()["current_ids"] == [ids[2], ids[0], ids[1]]
        await rules_hold()

    @pytest.mark.invariant("MA-INV-21")
    async def test_items_reorder_and_move_between_sections_closing_gaps(self, agenda_api: AgendaApi, world: World,
                                                                         db, rules_hold):
        one = await agenda_api.section(world.manager, world.meeting_id, "One")
        two = await agenda_api.section(world.manager, world.meeting_id, "Two")
        items = [(await agenda_api.item(world.manager, one["id"], t))["id"] for t in ("x", "y", "z")]
        await agenda_api.ok("PUT", f"/agenda/sections/{one['id']}/items/order", world.manager,
                            json={"ids": list(reversed(items))})
        moved = await agenda_api.ok("PATCH", f"/agenda/items/{items[2]}", world.manager,
                                    json={"section_id": two["id"]})
        assert (moved["section_id"], moved["order"]) == (two["id"], 0)
        view = (await agenda_api.agenda(world.manager, world.meeting_id)).json()
        assert [(i["title"], i["order"]) for i in view["sections"][0]["items"]] == [("y", 0), ("x", 1)]
        elsewhere = await agenda_api.section(world.manager, (await agenda_api.ma.create_ok(world.manager))["id"])
        refused = await agenda_api.call("PATCH", f"/agenda/items/{items[0]}", world.manager,
                                        json={"section_id": elsewhere["id"]})
        assert (refused.status_code, code(refused)) == (404, "AGENDA_SECTION_NOT_FOUND")
        await rules_hold()


class TestDeletion:
    @pytest.mark.invariant("MA-INV-22", "MA-INV-28")
    async def test_deleting_a_section_soft_deletes_items_tasks_and_files_and_closes_the_gap(
            self, agenda_api: AgendaApi, world: World, db, rules_hold):
        keep = await agenda_api.section(world.manager, world.meeting_id, "Keep")
        gone = await agenda_api.section(world.manager, world.meeting_id, "Gone")
        last = await agenda_api.section(world.manager, world.meeting_id, "Last")
        item = await agenda_api.item(world.manager, gone["id"])
        assert (await agenda_api.assign(world.manager, item["id"], world.alice)).status_code == 201
        assert (await agenda_api.upload(world.manager, item["id"])).status_code == 201
        await agenda_api.ok("DELETE", f"/agenda/sections/{gone['id']}", world.manager, 204)
        view = (await agenda_api.agenda(world.manager, world.meeting_id)).json()
        assert [(s["id"], s["order"]) for s in view["sections"]] == [(keep["id"], 0), (last["id"], 1)]
        async with db.read_only() as session:
            live = (await session.execute(text("""
                SELECT (SELECT count(*) FROM meeting_attendance.meeting_agenda_items WHERE deleted_at IS NULL),
                       (SELECT count(*) FROM meeting_attendance.meeting_agenda_item_upload_tasks
                         WHERE deleted_at IS NULL),
                       (SELECT count(*) FROM meeting_attendance.meeting_agenda_item_attachments
                         WHERE deleted_at IS NULL),
                       (SELECT count(*) FROM meeting_attendance.meeting_agenda_item_attachments
                         WHERE deleted_at IS NOT NULL)"""))).one()
        assert tuple(live) == (0, 0, 0, 1)
        assert (await agenda_api.call("GET", "/me/upload-tasks", world.alice)).json()["items"] == []
        again = await agenda_api.call("DELETE", f"/agenda/sections/{gone['id']}", world.manager)
        assert (again.status_code, code(again)) == (404, "AGENDA_SECTION_NOT_FOUND")
        actions = [row.action for row in await _audit(db, world.meeting_id)]
        assert actions[-1] == "AGENDA_SECTION_DELETED"
        await rules_hold()

    @pytest.mark.invariant("MA-INV-22", "MA-INV-28")
    async def test_deleting_the_meeting_takes_its_agenda_and_meeting_files_with_it(
            self, agenda_api: AgendaApi, world: World, db, rules_hold):
        section = await agenda_api.section(world.manager, world.meeting_id)
        item = await agenda_api.item(world.manager, section["id"])
        await agenda_api.assign(world.manager, item["id"], world.bob)
        assert (await agenda_api.upload_meeting(world.manager, world.meeting_id)).status_code == 201
        await agenda_api.ok("DELETE", f"/meetings/{world.meeting_id}", world.manager, 204)
        async with db.read_only() as session:
            live = (await session.execute(text("""
                SELECT (SELECT count(*) FROM meeting_attendance.meeting_agenda_sections WHERE deleted_at IS NULL)
                     + (SELECT count(*) FROM meeting_attendance.meeting_agenda_items WHERE deleted_at IS NULL)
                     + (SELECT count(*) FROM meeting_attendance.meeting_attachments WHERE deleted_at IS NULL),
                       (SELECT status FROM meeting_attendance.meeting_agenda_item_upload_tasks)"""))).one()
        assert tuple(live) == (0, "CANCELLED")
        await rules_hold()


class TestAudit:
    @pytest.mark.invariant("MA-INV-28")
    async def test_each_change_writes_the_spec_constant_with_entity_and_before_after(
            self, agenda_api: AgendaApi, world: World, db, rules_hold):
        section = await agenda_api.section(world.manager, world.meeting_id, "Opening")
        await agenda_api.ok("PATCH", f"/agenda/sections/{section['id']}", world.manager, json={"title": "Intro"})
        item = await agenda_api.item(world.manager, section["id"], description="secret plans")
        await agenda_api.ok("PATCH", f"/agenda/items/{item['id']}", world.manager, json={"description": "other"})
        rows = await _audit(db, world.meeting_id)
        assert [(r.action, r.resource) for r in rows] == [
            ("AGENDA_SECTION_CREATED", "AGENDA_SECTION"), ("AGENDA_SECTION_UPDATED", "AGENDA_SECTION"),
            ("AGENDA_ITEM_CREATED", "AGENDA_ITEM"), ("AGENDA_ITEM_UPDATED", "AGENDA_ITEM")]
        updated = rows[1].changes
        assert updated["entityId"] == section["id"] and updated["entityType"] == "AGENDA_SECTION"
        assert (updated["before"], updated["after"]) == ({"title": "Opening"}, {"title": "Intro"})
        assert "agendaModifiedAfterMeetingEnd" not in updated and "meetingEndTime" in updated
        assert "secret" not in str(rows[2].changes) and rows[3].changes["after"] == {"description_changed": True}

    @pytest.mark.invariant("MA-INV-28")
    async def test_a_change_after_the_meeting_ended_is_flagged(self, agenda_api: AgendaApi, world: World, db, clock,
                                                               rules_hold):
        section = await agenda_api.section(world.manager, world.meeting_id)
        clock.advance(timedelta(hours=3))
        await agenda_api.item(world.manager, section["id"], "Minutes")
        rows = await _audit(db, world.meeting_id)
        assert rows[-1].changes["agendaModifiedAfterMeetingEnd"] is True
        assert (await agenda_api.agenda(world.manager, world.meeting_id)).json()["modified_after_meeting_end"] is True
        await rules_hold()


class TestViews:
    async def test_the_external_attendee_gets_titles_only(self, agenda_api: AgendaApi, world: World):
        section = await agenda_api.section(world.manager, world.meeting_id, "Opening")
        item = await agenda_api.item(world.manager, section["id"], "Welcome", description="private notes",
                                     presenter_user_id=str(world.organizer.id), code="1.1", category_tag="REPORT")
        await agenda_api.upload(world.manager, item["id"])
        await agenda_api.upload_meeting(world.manager, world.meeting_id)
        full = (await agenda_api.agenda(world.alice, world.meeting_id)).json()
        assert full["view"] == "full" and len(full["meeting_attachments"]) == 1
        shown = full["sections"][0]["items"][0]
        assert shown["presenter"] == {"user_id": str(world.organizer.id), "display_name": "Leo Leader"}
        assert shown["description"] == "private notes" and len(shown["attachments"]) == 1
        assert isinstance(shown["attachments"][0]["size"], str)
        restricted = await agenda_api.agenda(world.walk_in, world.meeting_id)
        assert restricted.json() == {"view": "restricted", "meeting_id": world.meeting_id, "sections": [
            {"id": section["id"], "order": 0, "title": "Opening",
             "items": [{"id": item["id"], "order": 0, "title": "Welcome"}]}]}
        assert "private notes" not in restricted.text
        hidden = await agenda_api.agenda(world.stranger, world.meeting_id)
        assert (hidden.status_code, code(hidden)) == (404, "MEETING_NOT_FOUND")

    async def test_presenters_must_be_active_accounts_and_titles_are_required(self, agenda_api: AgendaApi,
                                                                              world: World):
        section = await agenda_api.section(world.manager, world.meeting_id)
        unknown = await agenda_api.call("POST", f"/agenda/sections/{section['id']}/items", world.manager,
                                        json={"title": "x", "presenter_user_id": new_id()})
        assert (unknown.status_code, code(unknown)) == (422, "PRESENTER_NOT_FOUND")
        for n, title in enumerate(("   ", "a\u0000b")):
            refused = await agenda_api.call("POST", f"/meetings/{world.meeting_id}/agenda/sections", world.manager,
                                            json={"title": title}, headers={"Idempotency-Key": f"title-{n}"})
            assert (refused.status_code, code(refused)) == (422, "VALIDATION_FAILED")

    async def test_if_match_guards_concurrent_edits(self, agenda_api: AgendaApi, world: World):
        section = await agenda_api.section(world.manager, world.meeting_id)
        path = f"/agenda/sections/{section['id']}"
        ok = await agenda_api.call("PATCH", path, world.manager, json={"title": "B"}, headers={"If-Match": '"1"'})
        assert ok.status_code == 200 and ok.headers["ETag"] == '"2"'
        stale = await agenda_api.call("PATCH", path, world.manager, json={"title": "C"}, headers={"If-Match": '"1"'})
        assert (stale.status_code, code(stale), stale.json()["current_version"]) == (412, "PRECONDITION_FAILED", 2)

    async def test_a_cancelled_meeting_refuses_agenda_writes_but_still_reads(self, agenda_api: AgendaApi,
                                                                             world: World):
        section = await agenda_api.section(world.manager, world.meeting_id)
        await agenda_api.ok("POST", f"/meetings/{world.meeting_id}/cancel", world.manager)
        refused = await agenda_api.call("POST", f"/agenda/sections/{section['id']}/items", world.manager,
                                        json={"title": "x"})
        assert (refused.status_code, code(refused)) == (409, "MEETING_CANCELLED")
        assert (await agenda_api.agenda(world.alice, world.meeting_id)).status_code == 200
