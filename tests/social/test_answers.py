"""A command's answer is the GET of the same thing: every social POST and PATCH that answers a resource answers
the body its GET gives right after (the command re-reads it through the GET's query function). Lists stand for
the GET where a resource has no route of its own (members, invitations, subscriptions, runs)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.social.conftest import SocialApi


async def _same(api: SocialApi, user, answer: Any, path: str, status: int = 200, **params: Any) -> dict[str, Any]:
    """The command's answer (a response awaitable, its status) equals GET `path` for the same user."""
    body = await api.ok(answer, status)
    assert body == await api.ok(api.get(user, path, **params))
    return body


async def _same_in_list(api: SocialApi, user, answer: Any, path: str, status: int = 200,
                        key: str = "id") -> dict[str, Any]:
    body = await api.ok(answer, status)
    listed = [row for row in (await api.ok(api.get(user, path)))["items"] if row[key] == body[key]]
    assert listed == [body]
    return body


class TestFriendships:
    async def test_request_accept_block_unblock_answer_the_get(self, api, ann, bob):
        made = await api.ok(api.post(ann, "/friendships", {"user_id": str(bob.id)}), 201)
        assert made == await api.ok(api.get(ann, f"/friendships/{made['id']}"))
        path = f"/friendships/{made['id']}"
        await _same(api, bob, api.post(bob, f"{path}/accept"), path)
        await _same(api, ann, api.post(ann, f"{path}/block"), path)
        await _same(api, ann, api.post(ann, f"{path}/unblock"), path)

    async def test_decline_cancel_a_crossed_request_and_a_block_of_a_stranger(self, api, ann, bob, cid, users):
        made = await api.ok(api.post(ann, "/friendships", {"user_id": str(bob.id)}), 201)
        await _same(api, bob, api.post(bob, f"/friendships/{made['id']}/decline"), f"/friendships/{made['id']}")
        asked = await api.ok(api.post(ann, "/friendships", {"user_id": str(cid.id)}), 201)
        await _same(api, ann, api.post(ann, f"/friendships/{asked['id']}/cancel"), f"/friendships/{asked['id']}")
        await api.ok(api.post(cid, "/friendships", {"user_id": str(ann.id)}), 201)
        await _same(api, ann, api.post(ann, "/friendships", {"user_id": str(cid.id)}), f"/friendships/{asked['id']}")
        stranger = await users.make(display_name="Dee")
        blocked = await api.ok(api.post(ann, "/friendships/blocks", {"user_id": str(stranger.id)}))
        assert blocked == await api.ok(api.get(ann, f"/friendships/{blocked['id']}"))


class TestGroups:
    async def test_create_patch_archive_unarchive_answer_the_get(self, api, ann):
        group = await api.ok(api.post(ann, "/groups", {"name": "Team", "visibility": "public"}), 201)
        path = f"/groups/{group['id']}"
        assert group == await api.ok(api.get(ann, path))
        await _same(api, ann, api.patch(ann, path, {"name": "Renamed", "description": "d"}), path)
        await _same(api, ann, api.post(ann, f"{path}/archive"), path)
        await _same(api, ann, api.post(ann, f"{path}/unarchive"), path)

    async def test_join_member_change_and_invitation_answer_their_lists(self, api, ann, bob, cid):
        gid = await api.group(ann, visibility="public")
        await _same_in_list(api, bob, api.post(bob, f"/groups/{gid}/join"), f"/groups/{gid}/members",
                            key="user_id")
        await _same_in_list(api, ann, api.patch(ann, f"/groups/{gid}/members/{bob.id}", {"role": "admin"}),
                            f"/groups/{gid}/members", key="user_id")
        await api.befriend(ann, cid)
        await _same_in_list(api, ann, api.post(ann, f"/groups/{gid}/invitations", {"user_id": str(cid.id)}),
                            f"/groups/{gid}/invitations", 201)


class TestItemsAndSubscriptions:
    async def test_create_and_patch_answer_the_get(self, api, ann):
        item = await api.item(ann)
        path = f"/schedule-items/{item['id']}"
        assert item == await api.ok(api.get(ann, path))
        await _same(api, ann, api.patch(ann, path, {"title": "Moved", "recurrence_rule": "FREQ=WEEKLY;COUNT=3"}),
                    path)

    async def test_an_editor_patching_answers_their_get(self, api, ann, bob):
        item = await api.item(ann)
        await api.befriend(ann, bob)
        await api.offer(ann, item["id"], bob, ["view", "edit"])
        path = f"/schedule-items/{item['id']}"
        await _same(api, bob, api.patch(bob, path, {"title": "Edited by Bob"}), path)

    async def test_offer_share_and_patch_answer_the_subscription_list(self, api, ann, bob, cid):
        item = await api.item(ann)
        subscriptions = f"/schedule-items/{item['id']}/subscriptions"
        await api.befriend(ann, bob)
        offer = await _same_in_list(api, ann, api.post(ann, subscriptions, {"subject_type": "user",
                                                                            "subject_id": str(bob.id)}),
                                    subscriptions, 201)
        gid = await api.group(ann)
        await _same_in_list(api, ann, api.post(ann, subscriptions, {"subject_type": "group", "subject_id": gid}),
                            subscriptions, 201)
        message = await api.pending_message(bob, "schedule_item_shared")
        await api.ok(api.post(bob, f"/inbox/{message['id']}/accept"))
        await _same_in_list(api, ann, api.patch(ann, f"{subscriptions}/{offer['id']}",
                                                {"permission": ["view", "invite"], "notify_level": "none"}),
                            subscriptions)
        await _same_in_list(api, bob, api.patch(bob, f"{subscriptions}/{offer['id']}", {"status": "paused"}),
                            subscriptions)


class TestInbox:
    async def test_read_dismiss_accept_and_reject_answer_the_get(self, api, ann, bob, cid):
        gid = await api.group(ann)
        await api.befriend(ann, bob)
        await api.befriend(ann, cid)
        for person in (bob, cid):
            await api.ok(api.post(ann, f"/groups/{gid}/invitations", {"user_id": str(person.id)}), 201)
        invitation = await api.pending_message(bob, "group_invitation")
        path = f"/inbox/{invitation['id']}"
        await _same(api, bob, api.post(bob, f"{path}/read"), path)
        accepted = await api.ok(api.post(bob, f"{path}/accept"))
        assert accepted["effect"]["type"] == "group_member"
        assert {k: v for k, v in accepted.items() if k != "effect"} == await api.ok(api.get(bob, path))
        rejected_id = (await api.pending_message(cid, "group_invitation"))["id"]
        rejected = await api.ok(api.post(cid, f"/inbox/{rejected_id}/reject"))
        assert rejected.pop("effect") is None and rejected == await api.ok(api.get(cid, f"/inbox/{rejected_id}"))
        item = await api.item(ann)
        await api.ok(api.post(ann, f"/schedule-items/{item['id']}/subscriptions",
                              {"subject_type": "group", "subject_id": gid}), 201)
        note = await api.pending_message(bob, "schedule_item_shared")
        await _same(api, bob, api.post(bob, f"/inbox/{note['id']}/dismiss"), f"/inbox/{note['id']}")


class TestTodos:
    async def test_create_patch_complete_and_extract_answer_the_get(self, api, ann):
        item = await api.item(ann, recurrence_rule="FREQ=DAILY;COUNT=3")
        todo = await api.ok(api.post(ann, "/todos", {"title": "Pay", "due_at": "2026-01-06T10:00:00Z",
                                                     "source_ids": [item["id"]]}), 201)
        path = f"/todos/{todo['id']}"
        assert todo == await api.ok(api.get(ann, path))
        await _same(api, ann, api.patch(ann, path, {"title": "Pay rent", "priority": "high"}), path)
        await _same(api, ann, api.post(ann, f"{path}/complete"), path)
        await _same(api, ann, api.patch(ann, path, {"status": "pending"}), path)
        extracted = await api.ok(api.post(ann, "/todos/extract", {"schedule_item_ids": [item["id"]]}))
        for listed in extracted["items"]:
            assert listed == await api.ok(api.get(ann, f"/todos/{listed['id']}"))


class TestAutomations:
    async def test_create_patch_enable_disable_and_run_now_answer_the_get(self, api, ann):
        job = await api.ok(api.post(ann, "/automations", {"name": "Digest", "job_type": "todo_digest",
                                                          "schedule_type": "daily", "schedule_time": "09:00"}), 201)
        path = f"/automations/{job['id']}"
        assert job == await api.ok(api.get(ann, path))
        await _same(api, ann, api.patch(ann, path, {"schedule_time": "10:30", "name": "Morning"}), path)
        await _same(api, ann, api.post(ann, f"{path}/disable"), path)
        await _same(api, ann, api.post(ann, f"{path}/enable"), path)
        await _same_in_list(api, ann, api.post(ann, f"{path}/run-now"), f"{path}/runs", 202)


class TestProfile:
    @pytest.mark.parametrize("path, change", [
        ("/me/profile", {"username": "Annie", "bio": "Hi"}),
        ("/me/settings", {"preferences": {"theme": "dark"}}),
        ("/me/agent", {"config": {"tone": "brief"}}),
    ])
    async def test_patches_answer_the_get(self, api, ann, path, change):
        await _same(api, ann, api.patch(ann, path, change), path)

    async def test_a_feed_reset_answers_the_get(self, api, ann):
        await _same(api, ann, api.post(ann, "/me/calendar-feed/reset"), "/me/calendar-feed")
