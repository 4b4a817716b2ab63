"""Profiles, settings, agents (SOC-INV-01..03) and friendships (SOC-INV-04..06) through the API."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text
from tests.support.invariants import rules_hold
from tests.support.outcomes import code

from tenet.social import settings_schema


class TestProfileAndAgent:
    @pytest.mark.invariant("SOC-INV-01")
    async def test_every_new_account_has_its_profile_and_agent(self, api, ann, db):
        profile = await api.ok(api.get(ann, "/me/profile"))
        agent = await api.ok(api.get(ann, "/me/agent"))
        assert profile["id"] == str(ann.id) and profile["username"] == "Ann"
        assert agent["user_id"] == str(ann.id) and agent["agent_type"] == "TASK_EXECUTION"
        assert agent["status"] == "active"
        await rules_hold(db, "SOC-")

    @pytest.mark.invariant("SOC-INV-01")
    async def test_a_second_live_agent_is_refused_by_the_database(self, ann, db):
        from sqlalchemy.exc import IntegrityError

        from tenet.kernel.db_errors import violated_constraint

        with pytest.raises(IntegrityError) as refused:
            async with db.unit_of_work() as session:
                await session.execute(text(
                    "INSERT INTO social.user_agents (id, user_id, llm_id, agent_type, created_at, updated_at) "
                    "VALUES (gen_random_uuid(), :u, gen_random_uuid(), 'TASK_EXECUTION', now(), now())"),
                    {"u": ann.id})
        assert violated_constraint(refused.value) == "uq_user_agents_user_live"

    @pytest.mark.invariant("SOC-INV-01")
    async def test_the_detector_finds_an_account_without_an_agent(self, ann, db):
        from tenet.kernel.invariants import check, get

        async with db.unit_of_work() as session:
            await session.execute(text("DELETE FROM social.user_agents WHERE user_id = :u"), {"u": ann.id})
            found = await check(await session.connection(), [get("SOC-INV-01")])
            await session.rollback()
        assert found and str(found[0].sample[0]["user_id"]) == str(ann.id)

    async def test_profile_patch_and_agent_patch(self, api, ann):
        profile = await api.ok(api.patch(ann, "/me/profile", {"username": "Annie", "bio": "hi",
                                                              "avatar_url": "https://x.example/a.png"}))
        assert profile["username"] == "Annie" and profile["bio"] == "hi"
        assert (await api.patch(ann, "/me/profile", {"avatar_url": "http://insecure"})).status_code == 422
        agent = await api.ok(api.patch(ann, "/me/agent", {"config": {"tone": "brief"}, "status": "paused"}))
        agent = await api.ok(api.patch(ann, "/me/agent", {"config": {"lang": "en"}}))
        assert agent["config"] == {"tone": "brief", "lang": "en"} and agent["status"] == "paused"
        assert (await api.patch(ann, "/me/agent", {"status": "migrating"})).status_code == 422


class TestSettings:
    @pytest.mark.invariant("SOC-INV-03")
    async def test_merge_keeps_untouched_keys_and_null_restores_the_default(self, api, ann):
        first = await api.ok(api.patch(ann, "/me/settings", {"preferences": {"theme": "dark"}}))
        assert first["settings"]["preferences"]["theme"] == "dark"
        second = await api.ok(api.patch(ann, "/me/settings", {"notification": {"enabled": False}}))
        assert second["settings"]["preferences"]["theme"] == "dark"
        assert second["settings"]["notification"]["enabled"] is False
        third = await api.ok(api.patch(ann, "/me/settings", {"preferences": {"theme": None}}))
        assert third["settings"]["preferences"]["theme"] == "system"
        assert third["settings_version"] == 1

    @pytest.mark.invariant("SOC-INV-02")
    @pytest.mark.parametrize("patch", [
        {"theme": "dark"}, {"preferences": {"colour": "red"}}, {"notification": {"enabled": "yes"}},
        {"preferences": {"timezone": "Mars/Olympus"}}, {"privacy": {"profile_visible_to": "aliens"}},
        {"notification": {"quiet_hours_start": "22:00"}}, {"version": 2}, [1, 2],
    ])
    async def test_unknown_keys_wrong_types_and_half_quiet_hours_are_422(self, api, ann, patch):
        response = await api.patch(ann, "/me/settings", patch)
        assert response.status_code == 422, response.text
        assert code(response) == "VALIDATION_FAILED"

    @pytest.mark.invariant("SOC-INV-02")
    async def test_the_database_refuses_an_invalid_document(self, ann, db):
        from sqlalchemy.exc import IntegrityError

        with pytest.raises(IntegrityError, match="ck_profiles_settings_valid"):
            async with db.unit_of_work() as session:
                await session.execute(text("UPDATE social.profiles SET settings = '{\"x\": 1}' WHERE id = :u"),
                                      {"u": ann.id})

    @pytest.mark.invariant("SOC-INV-02")
    @pytest.mark.parametrize("document", [
        {}, {"preferences": {"theme": "dark", "language": "zh-CN", "timezone": "Asia/Shanghai"}},
        {"notification": {"quiet_hours_start": "22:00", "quiet_hours_end": "08:00", "enabled": True}},
        {"notification": {"quiet_hours_start": "22:00"}}, {"privacy": {"allow_friend_requests": 1}},
        {"preferences": {"theme": "blue"}}, {"preferences": {"language": "english!"}}, {"other": {}},
        {"privacy": []}, {"notification": {"enabled": None}},
        # A Python `$` matched before a trailing newline: the schema let these through, the SQL function not.
        {"preferences": {"language": "en\n"}},
        {"notification": {"quiet_hours_start": "22:00\n", "quiet_hours_end": "08:00"}},
    ])
    async def test_python_schema_and_sql_function_agree(self, db, document):
        import json

        async with db.read_only() as session:
            valid_in_sql = (await session.execute(text("SELECT social.settings_valid(CAST(:d AS jsonb), 1)"),
                                                  {"d": json.dumps(document)})).scalar()
        assert valid_in_sql == (settings_schema.document_problems(document) == [])


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


async def test_every_social_table_has_the_rls_baseline(db):
    """The eleven tables, each with RLS on and its restrictive deny-all policy (KERNEL-INV-03 walks them too)."""
    async with db.read_only() as session:
        rows = (await session.execute(text(
            "SELECT c.relname, c.relrowsecurity, EXISTS (SELECT 1 FROM pg_policies p WHERE p.schemaname = 'social' "
            "AND p.tablename = c.relname AND p.permissive = 'RESTRICTIVE') FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'social' AND c.relkind = 'r'"))).all()
    assert len(rows) == 11 and all(rls and policy for _, rls, policy in rows), rows


class TestPublicProfileAndBlocks:
    async def test_a_profile_is_visible_as_its_privacy_setting_says(self, api, ann, bob, cid):
        assert (await api.get(bob, f"/users/{ann.id}/profile")).status_code == 404  # default: friends only
        await api.befriend(ann, bob)
        assert (await api.ok(api.get(bob, f"/users/{ann.id}/profile")))["username"] == "Ann"
        assert (await api.get(cid, f"/users/{ann.id}/profile")).status_code == 404
        await api.ok(api.patch(ann, "/me/settings", {"privacy": {"profile_visible_to": "everyone"}}))
        assert (await api.get(cid, f"/users/{ann.id}/profile")).status_code == 200
        await api.ok(api.patch(ann, "/me/settings", {"privacy": {"profile_visible_to": "nobody"}}))
        assert (await api.get(bob, f"/users/{ann.id}/profile")).status_code == 404
        assert (await api.get(ann, f"/users/{ann.id}/profile")).status_code == 200

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
