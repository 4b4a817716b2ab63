"""A deleted account in social (SOC-INV-22, SOC-INV-01): it keeps nothing, its groups are handed over or
archived."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from tests.support.invariants import rules_hold

from tenet.iam import service as iam_service
from tenet.kernel.audit import Actor


class TestAccountDeletion:
    @pytest.mark.invariant("SOC-INV-22", "SOC-INV-01")
    async def test_a_deleted_account_keeps_nothing_and_its_group_is_handed_over(self, api, ann, bob, cid, db,
                                                                               clock, users):
        gid = await api.group(ann)
        await api.add_to_group(ann, gid, bob)
        await api.add_to_group(ann, gid, cid)
        await api.ok(api.patch(ann, f"/groups/{gid}/members/{cid.id}", {"role": "admin"}))
        item = await api.item(ann)
        await api.offer(ann, item["id"], bob)
        todo = (await api.ok(api.post(bob, "/todos/extract", {"schedule_item_ids": [item["id"]]})))["items"][0]
        await api.ok(api.post(ann, "/automations", {"name": "Digest", "job_type": "todo_digest",
                                                    "schedule_type": "daily", "schedule_time": "08:30"}), 201)
        async with db.unit_of_work() as session:
            await iam_service.delete_user(session, user_id=ann.id, now=clock.now(), actor=Actor.system())
        group = await api.ok(api.get(cid, f"/groups/{gid}"))
        assert group["owner_id"] == str(cid.id) and group["my_role"] == "creator"
        assert (await api.ok(api.get(bob, f"/todos/{todo['id']}")))["status"] == "archived"
        assert (await api.get(bob, f"/schedule-items/{item['id']}")).status_code == 404
        friends = await api.ok(api.get(bob, "/friendships", status="accepted"))
        assert str(ann.id) not in {f["other_user_id"] for f in friends["items"]}
        await rules_hold(db, "SOC-")

    @pytest.mark.invariant("SOC-INV-22")
    async def test_a_lonely_creator_s_group_is_archived(self, api, ann, db, clock):
        gid = await api.group(ann)
        async with db.unit_of_work() as session:
            await iam_service.delete_user(session, user_id=ann.id, now=clock.now(), actor=Actor.system())
        async with db.read_only() as session:
            status = (await session.execute(text("SELECT status FROM social.groups WHERE id = :g"),
                                            {"g": gid})).scalar()
        assert status == "archived"
        await rules_hold(db, "SOC-")
