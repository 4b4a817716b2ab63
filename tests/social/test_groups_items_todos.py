"""Groups (SOC-INV-07..09), schedule items and permissions (SOC-INV-10..13), the inbox (SOC-INV-14/15), todos
(SOC-INV-16/17), the calendar feed (SOC-INV-18) and account deletion (SOC-INV-22) through the API."""

from __future__ import annotations

import pytest
from icalendar import Calendar
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from tests.support.invariants import rules_hold
from tests.support.outcomes import code

from tenet.iam import service as iam_service
from tenet.kernel.audit import Actor
from tenet.kernel.db_errors import violated_constraint


async def _refused(db, sql: str, params: dict) -> str | None:
    """The statement in a unit of work; the name PostgreSQL gives for its refusal. Commit-time (deferred) checks
    run at once: the test's transaction never commits."""
    with pytest.raises(IntegrityError) as refusal:
        async with db.unit_of_work() as session:
            await session.execute(text("SET CONSTRAINTS ALL IMMEDIATE"))
            await session.execute(text(sql), params)
    return violated_constraint(refusal.value)


class TestGroups:
    @pytest.mark.invariant("SOC-INV-07", "SOC-INV-08", "SOC-INV-09")
    async def test_invite_accept_roles_hand_over_and_the_creator_stays_one(self, api, ann, bob, cid, db):
        gid = await api.group(ann)
        await api.add_to_group(ann, gid, bob)
        members = await api.ok(api.get(ann, f"/groups/{gid}/members"))
        # The frozen clock gives both the same joined_at: the order is then by id.
        assert sorted((m["username"], m["role"]) for m in members["items"]) == [("Ann", "creator"), ("Bob", "member")]
        assert code(await api.delete(ann, f"/groups/{gid}/members/{ann.id}")) == "GROUP_CREATOR_CANNOT_LEAVE"
        assert code(await api.post(bob, f"/groups/{gid}/invitations", {"user_id": str(cid.id)})) == \
            "GROUP_ROLE_FORBIDDEN"
        await api.ok(api.patch(ann, f"/groups/{gid}/members/{bob.id}", {"role": "admin"}))
        # Only friends of the inviter: Bob and Cid are not friends yet.
        assert code(await api.post(bob, f"/groups/{gid}/invitations", {"user_id": str(cid.id)})) == \
            "INVITEE_NOT_FRIEND"
        await api.ok(api.patch(ann, f"/groups/{gid}/members/{bob.id}", {"role": "creator"}))
        group = await api.ok(api.get(ann, f"/groups/{gid}"))
        assert group["owner_id"] == str(bob.id) and group["my_role"] == "admin"
        await api.ok(api.delete(ann, f"/groups/{gid}/members/{ann.id}"), 204)
        await rules_hold(db, "SOC-")

    @pytest.mark.invariant("SOC-INV-09")
    async def test_second_invitation_and_archive_dismisses_open_ones(self, api, ann, bob, db):
        gid = await api.group(ann)
        await api.befriend(ann, bob)
        await api.ok(api.post(ann, f"/groups/{gid}/invitations", {"user_id": str(bob.id)}), 201)
        again = await api.post(ann, f"/groups/{gid}/invitations", {"user_id": str(bob.id)})
        assert again.status_code == 409 and code(again) == "GROUP_INVITATION_ALREADY_PENDING"
        await api.ok(api.post(ann, f"/groups/{gid}/archive"))
        message = (await api.ok(api.get(bob, "/inbox", message_type="group_invitation")))["items"][0]
        assert message["status"] == "dismissed"
        assert code(await api.post(bob, f"/inbox/{message['id']}/accept")) == "INBOX_MESSAGE_ALREADY_ACTED"
        assert (await api.get(bob, f"/groups/{gid}")).status_code == 404
        await rules_hold(db, "SOC-")

    @pytest.mark.invariant("SOC-INV-07")
    async def test_the_database_refuses_a_second_creator_and_a_group_without_one(self, api, ann, bob, db):
        gid = await api.group(ann)
        await api.add_to_group(ann, gid, bob)
        assert await _refused(db, "UPDATE social.group_members SET role = 'creator' WHERE group_id = :g AND "
                                  "user_id = :u", {"g": gid, "u": bob.id}) == "uq_group_members_current_creator"
        assert await _refused(db, "UPDATE social.group_members SET role = 'admin' WHERE group_id = :g AND "
                                  "user_id = :u", {"g": gid, "u": ann.id}) == "group_member_keeps_creator"

    async def test_public_groups_can_be_joined_and_private_ones_are_invisible(self, api, ann, bob):
        public = await api.group(ann, "Open", visibility="public")
        private = await api.group(ann, "Closed")
        assert (await api.get(bob, f"/groups/{private}")).status_code == 404
        assert (await api.post(bob, f"/groups/{private}/join")).status_code == 404
        await api.ok(api.post(bob, f"/groups/{public}/join"))
        assert code(await api.post(bob, f"/groups/{public}/join")) == "ALREADY_GROUP_MEMBER"
        await api.ok(api.delete(ann, f"/groups/{public}/members/{bob.id}"), 204)
        assert code(await api.post(bob, f"/groups/{public}/join")) == "GROUP_REJOIN_NEEDS_INVITATION"


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
        assert await _refused(db, "UPDATE social.schedule_subscriptions SET permission = '[\"edit\", \"view\"]' "
                                  "WHERE id = :s", {"s": subscription["id"]}) == \
            "ck_schedule_subscriptions_permission_canonical"


class TestInboxAndTodos:
    @pytest.mark.invariant("SOC-INV-14")
    async def test_informational_messages_are_dismissed_requests_are_answered(self, api, ann, bob, db):
        await api.ok(api.post(ann, "/friendships", {"user_id": str(bob.id)}), 201)
        message = await api.pending_message(bob, "friend_request")
        assert code(await api.post(bob, f"/inbox/{message['id']}/dismiss")) == "INBOX_ACTION_REQUIRED"
        read = await api.ok(api.post(bob, f"/inbox/{message['id']}/read"))
        assert read["status"] == "read" and read["read_at"]
        await api.ok(api.post(bob, f"/inbox/{message['id']}/reject"))
        assert await _refused(db, "UPDATE social.inbox_messages SET status = 'pending', acted_at = NULL "
                                  "WHERE id = :m", {"m": message["id"]}) == "inbox_messages_terminal_is_final"
        assert (await api.ok(api.get(bob, "/inbox/summary")))["pending_count"] == 0

    @pytest.mark.invariant("SOC-INV-15")
    async def test_an_accepted_message_without_its_action_is_refused_at_commit(self, api, ann, bob, db):
        await api.ok(api.post(ann, "/friendships", {"user_id": str(bob.id)}), 201)
        message = await api.pending_message(bob, "friend_request")
        assert await _refused(db, "UPDATE social.inbox_messages SET status = 'accepted', acted_at = now(), "
                                  "read_at = now() WHERE id = :m", {"m": message["id"]}) == "inbox_accept_has_effect"

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


class TestCalendarFeed:
    @staticmethod
    async def _feed_hits(db, token: str) -> int:
        async with db.read_only() as session:
            return (await session.execute(text("SELECT coalesce(sum(hits), 0) FROM kernel.rate_limit_counter "
                                               "WHERE bucket = :b"), {"b": f"social-calendar-feed:{token[5:27]}"})
                    ).scalar_one()

    @pytest.mark.invariant("SOC-INV-18")
    async def test_the_feed_parses_with_icalendar_and_reset_kills_the_old_token(self, api, ann, bob, client, db):
        item = await api.item(ann, recurrence_rule="FREQ=WEEKLY;BYDAY=MO;COUNT=10")
        await api.item(bob, title="Bob's")
        feed = await api.ok(api.get(ann, "/me/calendar-feed"))
        assert feed["url"].endswith(feed["token"]) and feed["token"].startswith("scal_")
        response = await client.get("/api/v1/social/me/calendar.ics", params={"token": feed["token"]})
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/calendar")
        calendar = Calendar.from_ical(response.content)
        events = [c for c in calendar.walk("VEVENT")]
        assert [str(e["uid"]) for e in events] == [f"{item['id']}@tenet"]
        assert sorted(events[0]["rrule"].to_ical().split(b";")) == sorted(b"FREQ=WEEKLY;BYDAY=MO;COUNT=10".split(b";"))
        assert events[0]["dtstart"].dt.tzinfo is not None and calendar.walk("VTIMEZONE")
        reset = await api.ok(api.post(ann, "/me/calendar-feed/reset"))
        assert reset["token"] != feed["token"]
        # The old token still verifies; its feed is gone, so it is not counted (issue 24: nothing written for it).
        counted = await self._feed_hits(db, feed["token"])
        assert (await client.get("/api/v1/social/me/calendar.ics", params={"token": feed["token"]})).status_code == 404
        assert await self._feed_hits(db, feed["token"]) == counted == 1
        forged = feed["token"][:-1] + ("A" if feed["token"][-1] != "A" else "B")
        assert (await client.get("/api/v1/social/me/calendar.ics", params={"token": forged})).status_code == 404
        assert (await client.get("/api/v1/social/me/calendar.ics", params={"token": reset["token"]})
                ).status_code == 200


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
