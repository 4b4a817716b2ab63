"""Todos (SOC-INV-16/17) through the API: extraction from schedule items is idempotent per occurrence, deleting
an item archives its pending todos only; a due date lies in the supported range (1900-01-01 to 2200-01-01, with an
offset), so the digest and every later sum of it stay inside datetime's range."""

from __future__ import annotations

import pytest
from tests.support.invariants import rules_hold
from tests.support.outcomes import code

OUT_OF_RANGE = ["9999-12-31T23:59:59Z", "9999-12-31T23:00:00-05:00", "0001-01-01T00:00:00Z",
                "0001-01-01T00:00:00+05:00", "2200-01-01T00:00:00Z", "1899-12-31T23:59:59Z",
                "2026-03-02T09:00:00"]


class TestDueDates:
    @pytest.mark.parametrize("due_at", OUT_OF_RANGE)
    async def test_a_due_date_outside_the_supported_range_is_422(self, api, ann, due_at):
        created = await api.post(ann, "/todos", {"title": "t", "due_at": due_at})
        assert created.status_code == 422 and code(created) == "SCHEDULE_ITEM_INVALID", created.text
        todo = await api.ok(api.post(ann, "/todos", {"title": "t"}), 201)
        patched = await api.patch(ann, f"/todos/{todo['id']}", {"due_at": due_at})
        assert patched.status_code == 422 and code(patched) == "SCHEDULE_ITEM_INVALID", patched.text
        assert (await api.ok(api.get(ann, f"/todos/{todo['id']}")))["due_at"] is None

    @pytest.mark.parametrize("due_at", ["1900-01-01T00:00:00Z", "2199-12-31T23:59:59Z", "2199-12-31T20:00:00-03:00"])
    async def test_the_ends_of_the_range_are_accepted(self, api, ann, due_at):
        todo = await api.ok(api.post(ann, "/todos", {"title": "t", "due_at": due_at}), 201)
        listed = await api.ok(api.get(ann, "/todos", status="pending"))
        assert [t["id"] for t in listed["items"]] == [todo["id"]]


class TestExtraction:
    @pytest.mark.invariant("SOC-INV-16")
    async def test_extraction_is_idempotent_per_occurrence(self, api, ann, clock, db):
        weekly = await api.item(ann, recurrence_rule="FREQ=WEEKLY;BYDAY=MO")
        single = await api.item(ann, title="Review", start_at="2026-01-20T10:00:00Z", end_at="2026-01-20T11:00:00Z")
        body = {"schedule_item_ids": [weekly["id"], single["id"]], "from": "2026-03-01T00:00:00Z",
                "to": "2026-03-20T00:00:00Z"}
        first = await api.ok(api.post(ann, "/todos/extract", body))
        assert len(first["created_ids"]) == 4 and first["existing_ids"] == []
        second = await api.ok(api.post(ann, "/todos/extract", body))
        assert second["created_ids"] == [] and sorted(second["existing_ids"]) == sorted(first["created_ids"])
        weekly_todos = [t for t in first["items"] if t["source_ids"] == [weekly["id"]]]
        assert [t["occurrence_start"] for t in weekly_todos] == [
            "2026-03-02T17:00:00Z", "2026-03-09T16:00:00Z", "2026-03-16T16:00:00Z"]
        done = await api.ok(api.post(ann, f"/todos/{weekly_todos[0]['id']}/complete"))
        assert done["status"] == "done" and done["completed_at"]
        pending = await api.ok(api.get(ann, "/todos", status="pending"))
        assert len(pending["items"]) == 3
        reopened = await api.ok(api.patch(ann, f"/todos/{done['id']}", {"status": "pending"}))
        assert reopened["completed_at"] is None
        await rules_hold(db, "SOC-")

    @pytest.mark.invariant("SOC-INV-17")
    async def test_deleting_an_item_archives_its_pending_todos_only(self, api, ann, bob, db):
        item = await api.item(ann)
        other = await api.item(ann, title="Other")
        await api.offer(ann, item["id"], bob)
        mine = (await api.ok(api.post(ann, "/todos/extract", {"schedule_item_ids": [item["id"]]})))["items"][0]
        theirs = (await api.ok(api.post(bob, "/todos/extract", {"schedule_item_ids": [item["id"]]})))["items"][0]
        done = await api.ok(api.post(ann, "/todos", {"title": "done one", "source_ids": [item["id"]]}), 201)
        await api.ok(api.post(ann, f"/todos/{done['id']}/complete"))
        two = await api.ok(api.post(ann, "/todos", {"title": "two", "source_ids": [item["id"], other["id"]]}), 201)
        assert (await api.delete(ann, f"/schedule-items/{item['id']}")).status_code == 204
        assert (await api.ok(api.get(ann, f"/todos/{mine['id']}")))["status"] == "archived"
        assert (await api.ok(api.get(bob, f"/todos/{theirs['id']}")))["status"] == "archived"
        assert (await api.ok(api.get(ann, f"/todos/{done['id']}")))["status"] == "done"
        assert (await api.ok(api.get(ann, f"/todos/{two['id']}")))["status"] == "pending"
        await rules_hold(db, "SOC-")
