"""The inbox (SOC-INV-14/15) through the API: informational messages are dismissed, requests answered, an
accepted message has its effect; old answered messages are purged."""

from __future__ import annotations

from datetime import timedelta

import pytest
from tests.support.outcomes import code
from tests.support.rows import refused_by


class TestInbox:
    @pytest.mark.invariant("SOC-INV-14")
    async def test_informational_messages_are_dismissed_requests_are_answered(self, api, ann, bob, db):
        await api.ok(api.post(ann, "/friendships", {"user_id": str(bob.id)}), 201)
        message = await api.pending_message(bob, "friend_request")
        assert code(await api.post(bob, f"/inbox/{message['id']}/dismiss")) == "INBOX_ACTION_REQUIRED"
        read = await api.ok(api.post(bob, f"/inbox/{message['id']}/read"))
        assert read["status"] == "read" and read["read_at"]
        await api.ok(api.post(bob, f"/inbox/{message['id']}/reject"))
        assert await refused_by(db, "UPDATE social.inbox_messages SET status = 'pending', acted_at = NULL "
                                  "WHERE id = :m", {"m": message["id"]}) == "inbox_messages_terminal_is_final"
        assert (await api.ok(api.get(bob, "/inbox/summary")))["pending_count"] == 0

    @pytest.mark.invariant("SOC-INV-15")
    async def test_an_accepted_message_without_its_action_is_refused_at_commit(self, api, ann, bob, db):
        await api.ok(api.post(ann, "/friendships", {"user_id": str(bob.id)}), 201)
        message = await api.pending_message(bob, "friend_request")
        assert await refused_by(db, "UPDATE social.inbox_messages SET status = 'accepted', acted_at = now(), "
                                  "read_at = now() WHERE id = :m", {"m": message["id"]}) == "inbox_accept_has_effect"


async def test_retention_purges_old_answered_and_read_messages_only(api, ann, bob, clock, db):
    from tenet.social import inbox

    await api.ok(api.post(ann, "/friendships", {"user_id": str(bob.id)}), 201)
    message = await api.pending_message(bob, "friend_request")
    await api.ok(api.post(bob, f"/inbox/{message['id']}/reject"))
    await api.ok(api.post(bob, "/friendships", {"user_id": str(ann.id)}), 201)  # the decliner asks back
    clock.advance(timedelta(days=200))
    counts = await inbox.purge(db, now=clock.now(), retention=timedelta(days=180))
    assert counts["inbox_messages"] == 1
    assert (await api.ok(api.get(bob, "/inbox")))["items"] == []
    assert [m["status"] for m in (await api.ok(api.get(ann, "/inbox")))["items"]] == ["pending"]
