"""Schedule items and their permissions (SOC-INV-10..13) through the API: invalid items, local time across DST,
offers that need consent, group shares and direct subscriptions, the canonical permission."""

from __future__ import annotations

import pytest
from tests.support.invariants import rules_hold
from tests.support.outcomes import code
from tests.support.rows import refused_by


class TestItemsAndPermissions:
    @pytest.mark.invariant("SOC-INV-10")
    @pytest.mark.parametrize("fields, error", [
        ({"end_at": "2026-03-02T16:00:00Z"}, "SCHEDULE_ITEM_INVALID"),
        ({"timezone": "Mars/Olympus"}, "TIMEZONE_INVALID"),
        ({"recurrence_rule": "FREQ=SECONDLY"}, "RECURRENCE_RULE_INVALID"),
        ({"recurrence_rule": "FREQ=DAILY;COUNT=3;UNTIL=20260401T000000Z"}, "RECURRENCE_RULE_INVALID"),
        ({"recurrence_rule": "FREQ=WEEKLY;BYDAY=TU"}, "RECURRENCE_RULE_INVALID"),
        ({"recurrence_rule": "FREQ=DAILY;COUNT=5000"}, "RECURRENCE_RULE_INVALID"),
    ])
    async def test_invalid_items_are_422(self, api, ann, fields, error):
        response = await api.post(ann, "/schedule-items", {
            "title": "x", "start_at": "2026-03-02T17:00:00Z", "end_at": "2026-03-02T18:00:00Z",
            "timezone": "America/Los_Angeles", **fields})
        assert response.status_code == 422 and code(response) == error, response.text

    @pytest.mark.invariant("SOC-INV-10")
    async def test_weekly_occurrences_keep_local_time_across_dst(self, api, ann):
        item = await api.item(ann, recurrence_rule="RRULE:FREQ=WEEKLY;BYDAY=MO;COUNT=3")
        assert item["recurrence_rule"] == "FREQ=WEEKLY;BYDAY=MO;COUNT=3"
        assert item["series_end_at"] == "2026-03-16T17:00:00Z"
        page = await api.ok(api.get(ann, f"/schedule-items/{item['id']}/occurrences",
                                    **{"from": "2026-03-01T00:00:00Z", "to": "2026-04-01T00:00:00Z"}))
        assert [o["start_at"] for o in page["items"]] == [
            "2026-03-02T17:00:00Z", "2026-03-09T16:00:00Z", "2026-03-16T16:00:00Z"]
        assert {o["local_start"][11:16] for o in page["items"]} == {"09:00"}

    @pytest.mark.invariant("SOC-INV-11", "SOC-INV-12", "SOC-INV-13", "SOC-INV-15")
    async def test_offers_need_consent_and_permissions_follow_the_spec_order(self, api, ann, bob, cid, db):
        item = await api.item(ann)
        iid = item["id"]
        assert (await api.get(bob, f"/schedule-items/{iid}")).status_code == 404
        subscription = await api.offer(ann, iid, bob, ["edit", "view"], accept=False)
        assert subscription["status"] == "pending" and subscription["permission"] == ["view", "edit"]
        assert (await api.get(bob, f"/schedule-items/{iid}")).status_code == 404
        await rules_hold(db, "SOC-")
        message = await api.pending_message(bob, "schedule_item_shared")
        accepted = await api.ok(api.post(bob, f"/inbox/{message['id']}/accept"))
        assert accepted["effect"]["type"] == "subscription"
        seen = await api.ok(api.get(bob, f"/schedule-items/{iid}"))
        assert seen["my_permission"] == ["view", "edit"]
        edited = await api.ok(api.patch(bob, f"/schedule-items/{iid}", {"title": "Renamed"}))
        assert edited["title"] == "Renamed"
        # edit without invite may not offer; nobody grants more than they hold.
        assert code(await api.post(bob, f"/schedule-items/{iid}/subscriptions",
                                   {"subject_type": "user", "subject_id": str(cid.id)})) == \
            "SCHEDULE_ITEM_PERMISSION_DENIED"
        assert code(await api.delete(bob, f"/schedule-items/{iid}")) == "SCHEDULE_ITEM_PERMISSION_DENIED"
        assert code(await api.post(ann, f"/schedule-items/{iid}/subscriptions",
                                   {"subject_type": "user", "subject_id": str(ann.id)})) == "CANNOT_SUBSCRIBE_OWNER"
        assert code(await api.post(ann, f"/schedule-items/{iid}/subscriptions",
                                   {"subject_type": "user", "subject_id": str(bob.id)})) == "SUBSCRIPTION_EXISTS"
        assert code(await api.post(ann, f"/schedule-items/{iid}/subscriptions",
                                   {"subject_type": "user", "subject_id": str(cid.id),
                                    "permission": ["invite"]})) == "PERMISSION_SET_INVALID"
        # Revoking edit: the next edit is refused.
        await api.ok(api.patch(ann, f"/schedule-items/{iid}/subscriptions/{subscription['id']}",
                               {"permission": ["view"]}))
        assert code(await api.patch(bob, f"/schedule-items/{iid}", {"title": "x"})) == \
            "SCHEDULE_ITEM_PERMISSION_DENIED"
        await rules_hold(db, "SOC-")

    @pytest.mark.invariant("SOC-INV-13")
    async def test_group_share_grants_within_each_role_and_a_direct_subscription_wins(self, api, ann, bob, cid, db):
        gid = await api.group(ann)
        await api.add_to_group(ann, gid, bob)
        await api.add_to_group(ann, gid, cid)
        await api.ok(api.patch(ann, f"/groups/{gid}/members/{bob.id}", {"role": "admin"}))
        item = await api.item(ann)
        iid = item["id"]
        shared = await api.ok(api.post(ann, f"/schedule-items/{iid}/subscriptions",
                                       {"subject_type": "group", "subject_id": gid}), 201)
        assert shared["status"] == "active" and shared["permission"] == ["view", "invite", "edit"]
        assert (await api.ok(api.get(bob, f"/schedule-items/{iid}")))["my_permission"] == ["view", "invite"]
        assert (await api.ok(api.get(cid, f"/schedule-items/{iid}")))["my_permission"] == ["view"]
        # A direct subscription, even narrower, is the explicit decision about that person.
        await api.offer(ann, iid, bob, ["view"])
        assert (await api.ok(api.get(bob, f"/schedule-items/{iid}")))["my_permission"] == ["view"]
        listed = await api.ok(api.get(cid, "/schedule-items", scope="subscribed"))
        assert [i["id"] for i in listed["items"]] == [iid]
        await api.ok(api.post(ann, f"/groups/{gid}/archive"))
        assert (await api.get(cid, f"/schedule-items/{iid}")).status_code == 404
        await rules_hold(db, "SOC-")

    @pytest.mark.invariant("SOC-INV-11")
    async def test_the_database_refuses_a_non_canonical_permission(self, api, ann, bob, db):
        item = await api.item(ann)
        subscription = await api.offer(ann, item["id"], bob)
        assert await refused_by(db, "UPDATE social.schedule_subscriptions SET permission = '[\"edit\", \"view\"]' "
                                  "WHERE id = :s", {"s": subscription["id"]}) == \
            "ck_schedule_subscriptions_permission_canonical"
