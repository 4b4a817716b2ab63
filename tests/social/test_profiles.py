"""Profiles, settings, agents (SOC-INV-01..03) and the public profile through the API."""

from __future__ import annotations

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


class TestPublicProfile:
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
