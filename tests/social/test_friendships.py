"""Friendships (SOC-INV-04..06) through the API: requests through the inbox, accept, cancel, unfriend, and
blocks (SOC-INV-05, SOC-INV-12)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from tests.support.invariants import rules_hold
from tests.support.outcomes import code


class TestFriendships:
    @pytest.mark.invariant("SOC-INV-04", "SOC-INV-06")
    async def test_request_writes_the_inbox_and_accept_closes_it(self, api, ann, bob, db):
        friendship = await api.ok(api.post(ann, "/friendships", {"user_id": str(bob.id)}), 201)
        assert friendship["status"] == "pending"
        assert {friendship["user_a"], friendship["user_b"]} == {str(ann.id), str(bob.id)}
        assert friendship["user_a"] < friendship["user_b"]
        message = await api.pending_message(bob, "friend_request")
        assert message["related_id"] == friendship["id"] and message["sender_id"] == str(ann.id)
        await rules_hold(db, "SOC-")
        accepted = await api.ok(api.post(bob, f"/inbox/{message['id']}/accept"))
        assert accepted["status"] == "accepted" and accepted["effect"]["type"] == "friendship"
        assert (await api.ok(api.get(ann, f"/friendships/{friendship['id']}")))["status"] == "accepted"
        again = await api.post(bob, f"/inbox/{message['id']}/accept")
        assert again.status_code == 409 and code(again) == "INBOX_MESSAGE_ALREADY_ACTED"
        await rules_hold(db, "SOC-")

    @pytest.mark.invariant("SOC-INV-04")
    async def test_crossed_request_accepts_and_self_request_is_422(self, api, ann, bob):
        await api.ok(api.post(ann, "/friendships", {"user_id": str(bob.id)}), 201)
        crossed = await api.post(bob, "/friendships", {"user_id": str(ann.id)})
        assert crossed.status_code == 200 and crossed.json()["status"] == "accepted"
        self_request = await api.post(ann, "/friendships", {"user_id": str(ann.id)})
        assert self_request.status_code == 422 and code(self_request) == "FRIEND_REQUEST_TO_SELF"
        again = await api.post(ann, "/friendships", {"user_id": str(bob.id)})
        assert code(again) == "ALREADY_FRIENDS"

    @pytest.mark.invariant("SOC-INV-05")
    async def test_who_may_do_what_and_the_decline_cooldown(self, api, ann, bob, clock, db):
        friendship = await api.ok(api.post(ann, "/friendships", {"user_id": str(bob.id)}), 201)
        fid = friendship["id"]
        assert code(await api.post(ann, f"/friendships/{fid}/accept")) == "FRIENDSHIP_ACTION_FORBIDDEN"
        assert code(await api.post(bob, f"/friendships/{fid}/cancel")) == "FRIENDSHIP_ACTION_FORBIDDEN"
        assert code(await api.post(ann, "/friendships", {"user_id": str(bob.id)})) == "FRIEND_REQUEST_ALREADY_PENDING"
        declined = await api.ok(api.post(bob, f"/friendships/{fid}/decline"))
        assert declined["status"] == "declined" and declined["closed_reason"] == "declined"
        cooldown = await api.post(ann, "/friendships", {"user_id": str(bob.id)})
        assert cooldown.status_code == 409 and code(cooldown) == "FRIEND_REQUEST_COOLDOWN"
        # The decliner may change her mind at once.
        assert (await api.post(bob, "/friendships", {"user_id": str(ann.id)})).status_code == 201
        await api.ok(api.post(bob, f"/friendships/{fid}/cancel"))
        clock.advance(timedelta(days=31))
        assert (await api.post(ann, "/friendships", {"user_id": str(bob.id)})).status_code == 201
        await rules_hold(db, "SOC-")

    @pytest.mark.invariant("SOC-INV-05", "SOC-INV-06")
    async def test_block_hides_itself_dismisses_requests_and_only_the_blocker_unblocks(self, api, ann, bob, db):
        friendship = await api.ok(api.post(ann, "/friendships", {"user_id": str(bob.id)}), 201)
        fid = friendship["id"]
        blocked = await api.ok(api.post(bob, f"/friendships/{fid}/block"))
        assert blocked["status"] == "blocked" and blocked["blocked_by"] == str(bob.id)
        assert (await api.get(ann, f"/friendships/{fid}")).status_code == 404
        assert code(await api.post(ann, "/friendships", {"user_id": str(bob.id)})) == "RECIPIENT_UNAVAILABLE"
        assert code(await api.post(ann, f"/friendships/{fid}/unblock")) == "FRIENDSHIP_NOT_FOUND"
        assert (await api.ok(api.get(bob, "/inbox", status="pending")))["items"] == []
        unblocked = await api.ok(api.post(bob, f"/friendships/{fid}/unblock"))
        assert unblocked["status"] == "canceled" and unblocked["closed_reason"] == "unblocked"
        await rules_hold(db, "SOC-")

    async def test_unfriend_and_lists(self, api, ann, bob, cid):
        fid = await api.befriend(ann, bob)
        await api.ok(api.post(cid, "/friendships", {"user_id": str(ann.id)}), 201)
        incoming = await api.ok(api.get(ann, "/friendships", status="pending", direction="incoming"))
        assert [f["other_user_id"] for f in incoming["items"]] == [str(cid.id)]
        assert (await api.ok(api.get(ann, "/friendships", status="pending", direction="outgoing")))["items"] == []
        friends = await api.ok(api.get(ann, "/friendships", status="accepted"))
        assert [f["other_username"] for f in friends["items"]] == ["Bob"]
        assert (await api.delete(bob, f"/friendships/{fid}")).status_code == 204
        assert (await api.ok(api.get(ann, "/friendships", status="accepted")))["items"] == []

    async def test_privacy_refuses_requests_with_the_blocked_answer(self, api, ann, bob):
        await api.ok(api.patch(bob, "/me/settings", {"privacy": {"allow_friend_requests": False}}))
        refused = await api.post(ann, "/friendships", {"user_id": str(bob.id)})
        assert refused.status_code == 403 and code(refused) == "RECIPIENT_UNAVAILABLE"

    async def test_other_peoples_rows_answer_404(self, api, ann, bob, cid):
        fid = await api.befriend(ann, bob)
        assert (await api.get(cid, f"/friendships/{fid}")).status_code == 404
        assert (await api.post(cid, f"/friendships/{fid}/block")).status_code == 404
        message = (await api.ok(api.get(bob, "/inbox")))["items"][0]
        assert (await api.get(cid, f"/inbox/{message['id']}")).status_code == 404
        assert (await api.post(cid, f"/inbox/{message['id']}/read")).status_code == 404


class TestBlocks:
    @pytest.mark.invariant("SOC-INV-05", "SOC-INV-12")
    async def test_blocking_a_stranger_ends_their_offers(self, api, ann, bob, db):
        item = await api.item(ann)
        await api.offer(ann, item["id"], bob, accept=False)
        blocked = await api.ok(api.post(bob, "/friendships/blocks", {"user_id": str(ann.id)}))
        assert blocked["status"] == "blocked" and blocked["blocked_by"] == str(bob.id)
        assert (await api.ok(api.get(bob, "/inbox", status="pending")))["items"] == []
        again = await api.ok(api.post(bob, "/friendships/blocks", {"user_id": str(ann.id)}))
        assert again["id"] == blocked["id"]
        assert code(await api.post(ann, "/friendships/blocks", {"user_id": str(bob.id)})) == "FRIENDSHIP_BLOCKED"
        assert code(await api.post(ann, f"/schedule-items/{item['id']}/subscriptions",
                                   {"subject_type": "user", "subject_id": str(bob.id)})) == "RECIPIENT_UNAVAILABLE"
        await rules_hold(db, "SOC-")
