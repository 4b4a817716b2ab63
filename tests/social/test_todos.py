"""Todos' own fields: a due date lies in the supported range (1900-01-01 to 2200-01-01, with an offset), so the
digest and every later sum of it stay inside datetime's range."""

from __future__ import annotations

import pytest
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
