"""Upload tasks: assignment, cancellation, deletion, "my tasks", the auto-flip of the spec's upload sequence, and
what the meeting's and the account's lifecycles do to pending tasks."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text

from tests.meetings.agenda.conftest import AgendaApi, World, new_id
from tests.support.outcomes import code


@pytest.fixture
async def item(agenda_api: AgendaApi, world: World) -> dict:
    section = await agenda_api.section(world.manager, world.meeting_id)
    return await agenda_api.item(world.manager, section["id"], "Quarterly numbers")


class TestAssignment:
    @pytest.mark.invariant("MA-INV-24")
    async def test_one_pending_task_per_assignee_and_only_for_participants(self, agenda_api: AgendaApi,
                                                                          world: World, item, rules_hold):
        created = await agenda_api.assign(world.manager, item["id"], world.alice, world.bob, world.organizer,
                                          due_at="2026-01-06T12:00:00+00:00")
        assert created.status_code == 201
        assert {t["status"] for t in created.json()["items"]} == {"PENDING"}
        again = await agenda_api.assign(world.manager, item["id"], world.alice)
        assert (again.status_code, code(again)) == (409, "UPLOAD_TASK_ALREADY_PENDING")
        for outsider in (world.walk_in, world.stranger):
            refused = await agenda_api.assign(world.manager, item["id"], outsider)
            assert (refused.status_code, code(refused)) == (422, "UPLOAD_TASK_ASSIGNEE_INVALID")
        unknown = await agenda_api.call("POST", f"/agenda/items/{item['id']}/upload-tasks", world.manager,
                                        json={"assignee_user_ids": [new_id()]})
        assert (unknown.status_code, code(unknown)) == (422, "UPLOAD_TASK_ASSIGNEE_INVALID")
        await rules_hold()

    @pytest.mark.invariant("MA-INV-24")
    async def test_cancel_is_final_and_delete_hides_the_task(self, agenda_api: AgendaApi, world: World, item,
                                                             rules_hold):
        [task] = (await agenda_api.assign(world.manager, item["id"], world.alice)).json()["items"]
        cancelled = await agenda_api.ok("POST", f"/upload-tasks/{task['id']}/cancel", world.manager)
        assert cancelled["status"] == "CANCELLED" and cancelled["cancelled_at"] is not None
        twice = await agenda_api.call("POST", f"/upload-tasks/{task['id']}/cancel", world.manager)
        assert (twice.status_code, code(twice)) == (409, "UPLOAD_TASK_NOT_PENDING")
        mine = await agenda_api.ok("GET", "/me/upload-tasks", world.alice)
        assert [t["status"] for t in mine["items"]] == ["CANCELLED"]
        await agenda_api.ok("DELETE", f"/upload-tasks/{task['id']}", world.manager, 204)
        assert (await agenda_api.ok("GET", "/me/upload-tasks", world.alice))["items"] == []
        gone = await agenda_api.call("DELETE", f"/upload-tasks/{task['id']}", world.manager)
        assert (gone.status_code, code(gone)) == (404, "UPLOAD_TASK_NOT_FOUND")
        await rules_hold()


class TestMyTasks:
    async def test_soonest_due_first_undated_last_paged_and_filtered(self, agenda_api: AgendaApi, world: World,
                                                                    rules_hold):
        section = await agenda_api.section(world.manager, world.meeting_id)
        dues = [None, "2026-01-08T00:00:00+00:00", "2026-01-06T00:00:00+00:00"]
        for n, due in enumerate(dues):
            entry = await agenda_api.item(world.manager, section["id"], f"item {n}")
            await agenda_api.assign(world.manager, entry["id"], world.alice, **({"due_at": due} if due else {}))
        first = await agenda_api.ok("GET", "/me/upload-tasks", world.alice, params={"limit": 2, "status": "PENDING"})
        rest = await agenda_api.ok("GET", "/me/upload-tasks", world.alice,
                                   params={"limit": 2, "status": "PENDING", "cursor": first["next_cursor"]})
        titles = [t["agenda_item"]["title"] for t in first["items"] + rest["items"]]
        assert titles == ["item 2", "item 1", "item 0"] and rest["next_cursor"] is None
        assert first["items"][0]["meeting"]["id"] == world.meeting_id
        assert (await agenda_api.ok("GET", "/me/upload-tasks", world.bob))["items"] == []
        assert (await agenda_api.ok("GET", "/me/upload-tasks", world.alice, params={"status": "UPLOADED"}))[
            "items"] == []
        await rules_hold()


class TestAutoFlip:
    @pytest.mark.invariant("MA-INV-25")
    async def test_an_assignee_upload_completes_the_task_at_the_same_instant(self, agenda_api: AgendaApi,
                                                                            world: World, item, db, rules_hold):
        [task] = (await agenda_api.assign(world.manager, item["id"], world.alice)).json()["items"]
        uploaded = await agenda_api.upload(world.alice, item["id"])
        assert uploaded.status_code == 201 and uploaded.json()["task_completed_id"] == task["id"]
        async with db.read_only() as session:
            row = (await session.execute(text(
                "SELECT t.status, t.completed_at = a.uploaded_at "
                "FROM meeting_attendance.meeting_agenda_item_upload_tasks t "
                "JOIN meeting_attendance.meeting_agenda_item_attachments a ON a.agenda_item_id = t.agenda_item_id "
                "WHERE t.id = :t"), {"t": task["id"]})).one()
        assert tuple(row) == ("UPLOADED", True)
        # A corrected version is still accepted (the task is UPLOADED), and flips nothing.
        second = await agenda_api.upload(world.alice, item["id"])
        assert second.status_code == 201 and second.json()["task_completed_id"] is None
        await rules_hold()

    @pytest.mark.invariant("MA-INV-25")
    async def test_without_a_task_a_participant_is_refused_and_a_manager_is_not(self, agenda_api: AgendaApi,
                                                                               world: World, item):
        refused = await agenda_api.upload(world.bob, item["id"])
        assert (refused.status_code, code(refused)) == (403, "UPLOAD_TASK_NOT_OWNED")
        assert (await agenda_api.upload(world.manager, item["id"])).status_code == 201

    @pytest.mark.invariant("MA-INV-25")
    async def test_a_detector_sees_a_task_flipped_without_its_file(self, agenda_api: AgendaApi, world: World, item,
                                                                  db, clock, rules_hold):
        [task] = (await agenda_api.assign(world.manager, item["id"], world.alice)).json()["items"]
        async with db.unit_of_work() as session:
            await session.execute(text(
                "UPDATE meeting_attendance.meeting_agenda_item_upload_tasks SET status = 'UPLOADED', "
                "completed_at = :t WHERE id = :id"), {"t": clock.now(), "id": task["id"]})

        with pytest.raises(AssertionError, match="MA-INV-25"):
            await rules_hold()


class TestLifecycles:
    @pytest.mark.invariant("MA-INV-29", "MA-INV-19")
    async def test_cancelling_the_meeting_cancels_its_pending_tasks(self, agenda_api: AgendaApi, world: World,
                                                                    item, rules_hold):
        await agenda_api.assign(world.manager, item["id"], world.alice, world.bob)
        await agenda_api.ok("POST", f"/meetings/{world.meeting_id}/cancel", world.manager)
        mine = await agenda_api.ok("GET", "/me/upload-tasks", world.alice)
        assert [t["status"] for t in mine["items"]] == ["CANCELLED"]
        refused = await agenda_api.assign(world.manager, item["id"], world.alice)
        assert (refused.status_code, code(refused)) == (409, "MEETING_CANCELLED")
        await rules_hold()

    @pytest.mark.invariant("MA-INV-29", "MA-INV-19")
    async def test_a_deleted_account_keeps_no_pending_task(self, agenda_api: AgendaApi, world: World, item,
                                                         users, client, rules_hold):
        await agenda_api.assign(world.manager, item["id"], world.alice)
        admin = await users.admin()
        deleted = await client.delete(f"/api/v1/iam/users/{world.alice.id}", headers=admin.headers)
        assert deleted.status_code in (200, 204), deleted.text
        view = (await agenda_api.agenda(world.manager, world.meeting_id)).json()
        assert [t["status"] for t in view["sections"][0]["items"][0]["upload_tasks"]] == ["CANCELLED"]
        await rules_hold()

    @pytest.mark.invariant("MA-INV-29", "MA-INV-19")
    async def test_the_detector_sees_a_pending_task_on_a_cancelled_meeting(self, agenda_api: AgendaApi,
                                                                           world: World, item, db, clock, rules_hold):
        await agenda_api.assign(world.manager, item["id"], world.alice)
        async with db.unit_of_work() as session:
            await session.execute(text(
                "UPDATE meeting_attendance.meetings SET status = 'CANCELLED', cancelled_at = :t, cancelled_by_id = "
                "created_by_id WHERE id = :m"), {"t": clock.now() + timedelta(seconds=1), "m": world.meeting_id})

        with pytest.raises(AssertionError, match="MA-INV-29"):
            await rules_hold()
