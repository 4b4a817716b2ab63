"""Detectors of rules the database holds read the catalog, so `tenet invariants check` costs the same at any table
size (docs/decisions.md, "Social at scale"). Each must still fail: a guard dropped, added NOT VALID, made invalid,
not unique, disabled or no longer generated is reported by every rule that relies on it. The changes are made
inside the test's transaction and rolled back."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from tests.support.invariants import rules_hold

from tenet.kernel.invariants import check, get
from tenet.social.models import (
    EXTRACTED_INDEX,
    FRIEND_PAIR_UNIQUE,
    INBOX_TERMINAL_TRIGGER,
    OWNER_FIXED_TRIGGER,
    OWNER_NOT_SUBSCRIBED_TRIGGER,
    RUN_SLOT_UNIQUE,
    RUN_TERMINAL_TRIGGER,
    SUBSCRIPTION_UNIQUE,
)

# (rule, table, constraint): each CHECK or foreign key a catalog detector relies on instead of reading the rows.
CONSTRAINTS = [
    ("SOC-INV-04", "friendships", "ck_friendships_pair_ordered"),
    ("SOC-INV-04", "friendships", "ck_friendships_initiator_in_pair"),
    ("SOC-INV-06", "inbox_messages", "ck_inbox_messages_requests_are_actionable"),
    ("SOC-INV-06", "inbox_messages", "ck_inbox_messages_related_type_matches"),
    ("SOC-INV-09", "inbox_messages", "ck_inbox_messages_requests_are_actionable"),
    ("SOC-INV-09", "inbox_messages", "ck_inbox_messages_related_type_matches"),
    ("SOC-INV-10", "schedule_items", "ck_schedule_items_end_after_start"),
    ("SOC-INV-10", "schedule_items", "ck_schedule_items_duration_bounded"),
    ("SOC-INV-10", "schedule_items", "ck_schedule_items_timezone_shape"),
    ("SOC-INV-10", "schedule_items", "ck_schedule_items_recurrence_shape"),
    ("SOC-INV-10", "schedule_items", "ck_schedule_items_series_end"),
    ("SOC-INV-11", "schedule_subscriptions", "ck_schedule_subscriptions_permission_canonical"),
    ("SOC-INV-11", "schedule_subscriptions", "ck_schedule_subscriptions_group_never_pending"),
    ("SOC-INV-11", "schedule_subscriptions", "ck_schedule_subscriptions_subject_type"),
    ("SOC-INV-11", "schedule_subscriptions", "fk_schedule_subscriptions_subscriber_user_id_user_account"),
    ("SOC-INV-11", "schedule_subscriptions", "fk_schedule_subscriptions_subscriber_group_id_groups"),
    ("SOC-INV-14", "inbox_messages", "ck_inbox_messages_status"),
    ("SOC-INV-14", "inbox_messages", "ck_inbox_messages_acted_has_time"),
    ("SOC-INV-14", "inbox_messages", "ck_inbox_messages_read_has_time"),
    ("SOC-INV-14", "inbox_messages", "ck_inbox_messages_answer_needs_action"),
    ("SOC-INV-14", "inbox_messages", "ck_inbox_messages_actionable"),
    ("SOC-INV-16", "todos", "ck_todos_completed_has_time"),
    ("SOC-INV-16", "todos", "ck_todos_source_ids"),
    ("SOC-INV-16", "todos", "ck_todos_source_item_listed"),
    ("SOC-INV-20", "automation_runs", "ck_automation_runs_status"),
    ("SOC-INV-20", "automation_runs", "ck_automation_runs_running_is_claimed"),
    ("SOC-INV-20", "automation_runs", "ck_automation_runs_finished_has_time"),
    ("SOC-INV-21", "automation_runs", "ck_automation_runs_status"),
]
UNIQUE_INDEXES = [
    ("SOC-INV-04", "friendships", FRIEND_PAIR_UNIQUE),
    ("SOC-INV-11", "schedule_subscriptions", SUBSCRIPTION_UNIQUE),
    ("SOC-INV-16", "todos", EXTRACTED_INDEX),
    ("SOC-INV-20", "automation_runs", RUN_SLOT_UNIQUE),
]
TRIGGERS = [
    ("SOC-INV-11", "schedule_subscriptions", OWNER_NOT_SUBSCRIBED_TRIGGER),
    ("SOC-INV-11", "schedule_items", OWNER_FIXED_TRIGGER),
    ("SOC-INV-14", "inbox_messages", INBOX_TERMINAL_TRIGGER),
    ("SOC-INV-20", "automation_runs", RUN_TERMINAL_TRIGGER),
]


def _tagged(params: list[tuple[str, str, str]]) -> list[object]:
    """One case per (rule, table, guard), tagged with its rule."""
    return [pytest.param(rule, table, name, id=f"{rule}-{name}", marks=pytest.mark.invariant(rule))
            for rule, table, name in params]


async def _problems(session, invariant_id: str) -> list[str]:
    found = await check(await session.connection(), [get(invariant_id)])
    assert all(v.error is None for v in found), found
    return sorted(str(row["problem"]) for v in found for row in v.sample)


@pytest.mark.parametrize(("invariant_id", "table", "name"), _tagged(CONSTRAINTS))
@pytest.mark.parametrize("how", ["dropped", "NOT VALID"])
async def test_a_constraint_dropped_or_not_validated_is_reported(db, invariant_id, table, name, how):
    async with db.unit_of_work() as session:
        assert await _problems(session, invariant_id) == []
        definition = (await session.execute(text(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conname = :n AND conrelid = CAST(:t AS regclass)"),
            {"n": name, "t": f"social.{table}"})).scalar_one()
        await session.execute(text(f"ALTER TABLE social.{table} DROP CONSTRAINT {name}"))
        if how == "NOT VALID":
            await session.execute(text(f"ALTER TABLE social.{table} ADD CONSTRAINT {name} {definition} NOT VALID"))
        assert await _problems(session, invariant_id) == [f"constraint {name} missing or not validated"]
        await session.rollback()


@pytest.mark.parametrize(("invariant_id", "table", "name"), _tagged(UNIQUE_INDEXES))
@pytest.mark.parametrize("how", ["dropped", "not unique", "invalid"])
async def test_a_unique_index_dropped_not_unique_or_invalid_is_reported(db, invariant_id, table, name, how):
    async with db.unit_of_work() as session:
        assert await _problems(session, invariant_id) == []
        definition = (await session.execute(text("SELECT pg_get_indexdef(CAST(:i AS regclass))"),
                                            {"i": f"social.{name}"})).scalar_one()
        if how == "invalid":  # what an interrupted CREATE UNIQUE INDEX CONCURRENTLY leaves (the test server's
            # role is a superuser; the catalog change is rolled back with the rest)
            await session.execute(text("UPDATE pg_index SET indisvalid = false "
                                       "WHERE indexrelid = CAST(:i AS regclass)"), {"i": f"social.{name}"})
        else:
            is_constraint = (await session.execute(text(
                "SELECT count(*) FROM pg_constraint WHERE conname = :n"), {"n": name})).scalar_one()
            await session.execute(text(f"ALTER TABLE social.{table} DROP CONSTRAINT {name}" if is_constraint
                                       else f"DROP INDEX social.{name}"))
            if how == "not unique":
                assert definition.startswith("CREATE UNIQUE INDEX ")
                await session.execute(text(definition.replace("CREATE UNIQUE INDEX ", "CREATE INDEX ", 1)))
        assert await _problems(session, invariant_id) == [f"unique index {name} missing, invalid or not unique"]
        await session.rollback()


@pytest.mark.parametrize(("invariant_id", "table", "name"), _tagged(TRIGGERS))
@pytest.mark.parametrize("how", ["DISABLE", "ENABLE REPLICA"])
async def test_a_trigger_disabled_is_reported(db, invariant_id, table, name, how):
    async with db.unit_of_work() as session:
        assert await _problems(session, invariant_id) == []
        await session.execute(text(f"ALTER TABLE social.{table} {how} TRIGGER {name}"))
        # ENABLE REPLICA: the trigger fires only for replication sessions, never for the service's.
        assert await _problems(session, invariant_id) == [f"trigger {name} missing or disabled"]
        await session.execute(text(f"DROP TRIGGER {name} ON social.{table}"))
        assert await _problems(session, invariant_id) == [f"trigger {name} missing or disabled"]
        await session.rollback()


@pytest.mark.invariant("SOC-INV-11")
@pytest.mark.parametrize("column", ["subscriber_user_id", "subscriber_group_id"])
async def test_a_subject_column_no_longer_generated_is_reported(db, column):
    async with db.unit_of_work() as session:
        assert await _problems(session, "SOC-INV-11") == []
        await session.execute(text(f"ALTER TABLE social.schedule_subscriptions ALTER COLUMN {column} DROP EXPRESSION"))
        assert await _problems(session, "SOC-INV-11") == [f"column {column} is not generated"]
        await session.rollback()


@pytest.mark.invariant("SOC-INV-16")
async def test_a_check_function_that_lets_bad_arrays_through_is_reported(db):
    async with db.unit_of_work() as session:
        assert await _problems(session, "SOC-INV-16") == []
        # Duplicates accepted: the CHECK would let through what the rule refuses.
        await session.execute(text("""
            CREATE OR REPLACE FUNCTION social.is_uuid_array(a jsonb, m int) RETURNS boolean
            LANGUAGE sql IMMUTABLE AS $$ SELECT jsonb_typeof(a) = 'array' AND jsonb_array_length(a) <= m $$"""))
        assert await _problems(session, "SOC-INV-16") == ["social.is_uuid_array accepts what it must refuse"]
        await session.rollback()


@pytest.mark.invariant("SOC-INV-11")
async def test_the_database_refuses_an_owner_subscription_and_an_owner_change(api, ann, bob, db):
    from sqlalchemy.exc import IntegrityError

    from tenet.kernel.db_errors import violated_constraint

    item = await api.item(ann)
    with pytest.raises(IntegrityError) as refused:
        async with db.unit_of_work() as session:
            await session.execute(text(
                "INSERT INTO social.schedule_subscriptions (id, item_id, subject_type, subscriber_id, status, "
                "created_at, updated_at) VALUES (gen_random_uuid(), :i, 'user', :u, 'active', now(), now())"),
                {"i": item["id"], "u": ann.id})
    assert violated_constraint(refused.value) == OWNER_NOT_SUBSCRIBED_TRIGGER
    await api.offer(ann, item["id"], bob)
    with pytest.raises(IntegrityError) as refused:
        async with db.unit_of_work() as session:
            await session.execute(text("UPDATE social.schedule_items SET owner_id = :u WHERE id = :i"),
                                  {"i": item["id"], "u": bob.id})
    assert violated_constraint(refused.value) == OWNER_FIXED_TRIGGER
    await rules_hold(db, "SOC-")


@pytest.mark.invariant("SOC-INV-06")
async def test_open_request_messages_are_found_through_the_open_index(api, ann, bob, db):
    friendship_id = (await api.ok(api.post(ann, "/friendships", {"user_id": str(bob.id)}), 201))["id"]
    message = await api.pending_message(bob, "friend_request")
    async with db.unit_of_work() as session:
        assert await _problems(session, "SOC-INV-06") == []
        # The friendship accepted behind the message's back: the message is still open.
        await session.execute(text("UPDATE social.friendships SET status = 'accepted', accepted_at = now() "
                                   "WHERE id = :f"), {"f": friendship_id})
        found = await check(await session.connection(), [get("SOC-INV-06")])
        assert [(str(r["id"]), r["problem"]) for r in found[0].sample] == [
            (message["id"], "open request message without its pending friendship")]
        await session.rollback()


@pytest.mark.invariant("SOC-INV-09")
async def test_an_open_invitation_to_an_archived_group_is_found(api, ann, bob, db):
    gid = await api.group(ann)
    await api.befriend(ann, bob)
    await api.ok(api.post(ann, f"/groups/{gid}/invitations", {"user_id": str(bob.id)}), 201)
    message = await api.pending_message(bob, "group_invitation")
    async with db.unit_of_work() as session:
        assert await _problems(session, "SOC-INV-09") == []
        await session.execute(text("UPDATE social.groups SET status = 'archived', archived_at = now() WHERE id = :g"),
                              {"g": gid})
        found = await check(await session.connection(), [get("SOC-INV-09")])
        assert [(str(r["message_id"]), r["problem"]) for r in found[0].sample] == [(message["id"], "archived")]
        await session.rollback()
