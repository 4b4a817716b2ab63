"""Dual write (issue 20, spec 000 §G phase 2): the capture triggers log the old app's inserts, updates and
deletes; `sync` applies them to the new model; a change that cannot apply lands in the difference log with its
operation, and replaying its time window applies it once what it lacked is there."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import pytest
from sqlalchemy import text
from tests.support.invariants import rules_hold

from tenet.social.legacy import sync
from tenet.social.legacy.backfill import backfill


async def _value(setup, statement: str, params: dict | None = None):
    async with setup.db.unit_of_work() as session:
        return (await session.execute(text(statement), params or {})).scalar()


async def _mapped(setup, table: str, legacy_id: int):
    return await _value(setup, "SELECT new_id FROM social_legacy.id_map WHERE source_table = :t AND legacy_id = :i",
                        {"t": table, "i": legacy_id})


async def _started(setup):
    ctx = await setup.context()
    await backfill(setup.db, setup.legacy, "legacy", ctx)
    lines = await sync.install(setup.legacy, "legacy")
    assert "capturing todos" in lines
    return ctx


@pytest.mark.invariant("SOC-INV-06", "SOC-INV-11", "SOC-INV-16")
async def test_captured_inserts_updates_and_deletes_reach_the_new_model(clean):
    ctx = await _started(clean)
    legacy = clean.legacy
    await legacy.execute("INSERT INTO legacy.users (email, name) VALUES ('new.person@example.com', 'New Person')")
    await legacy.execute("INSERT INTO legacy.schedule_items (owner_id, title, starts_at, ends_at, tz) "
                         "VALUES (1, 'Added while dual writing', '2026-04-01 09:00Z', '2026-04-01 10:00Z', 'UTC')")
    await legacy.execute("UPDATE legacy.schedule_items SET title = 'Renamed in the old app' WHERE id = 1")
    todo_gone = await _mapped(clean, "todos", 2)
    await legacy.execute("DELETE FROM legacy.todos WHERE id = 2")
    await legacy.execute("UPDATE legacy.todos SET done = true WHERE id = 1")
    await legacy.execute("UPDATE legacy.friend_requests SET status = 'accepted' WHERE id = 2")  # was pending
    await legacy.execute("DELETE FROM legacy.item_shares WHERE id = 1")
    assert await clean.scalar("SELECT count(*) FROM social_legacy.changes WHERE applied_at IS NULL") == 7

    assert await sync.apply_log(clean.db, legacy, ctx) == (7, 0)
    assert await _value(clean, "SELECT display_name FROM iam.user_account WHERE email = 'new.person@example.com'") \
        == "New Person"
    assert await _value(clean, "SELECT count(*) FROM social.schedule_items WHERE title = 'Added while dual writing' "
                               "AND source_type = 'imported'") == 1
    item = await _mapped(clean, "schedule_items", 1)
    assert await _value(clean, "SELECT title FROM social.schedule_items WHERE id = :i", {"i": item}) \
        == "Renamed in the old app"
    assert await _value(clean, "SELECT count(*) FROM social.todos WHERE id = :i", {"i": todo_gone}) == 0
    assert await _mapped(clean, "todos", 2) is None
    assert await _value(clean, "SELECT status FROM social.todos WHERE id = :i",
                        {"i": await _mapped(clean, "todos", 1)}) == "done"
    assert await _value(clean, "SELECT status FROM social.friendships WHERE id = :i",
                        {"i": await _mapped(clean, "friend_requests", 2)}) == "accepted"
    assert await _value(clean, "SELECT count(*) FROM social.schedule_subscriptions WHERE id = :i AND status = 'active'",
                        {"i": await _mapped(clean, "item_shares", 1)}) == 0
    assert await clean.scalar("SELECT count(*) FROM social_legacy.changes WHERE applied_at IS NULL") == 0
    assert await sync.apply_log(clean.db, legacy, ctx) == (0, 0)  # nothing left: a second run does nothing
    await rules_hold(clean.db)


@pytest.mark.invariant("SOC-INV-10")
async def test_a_divergence_is_logged_with_its_operation_and_replays_by_time_window(clean):
    ctx = await _started(clean)
    legacy = clean.legacy
    # The old app writes an item that ends before it starts: Tenet refuses it, and says so.
    await legacy.execute("UPDATE legacy.schedule_items SET ends_at = starts_at - interval '1 hour' WHERE id = 3")
    # A user made while capture was off for users (an outage of the trigger), then a todo for them.
    await legacy.execute("ALTER TABLE legacy.users DISABLE TRIGGER tenet_capture_change")
    await legacy.execute("INSERT INTO legacy.users (email, name) VALUES ('late@example.com', 'Late')")
    await legacy.execute("ALTER TABLE legacy.users ENABLE TRIGGER tenet_capture_change")
    late = await clean.scalar("SELECT id FROM legacy.users WHERE email = 'late@example.com'")
    await legacy.execute("INSERT INTO legacy.todos (user_id, title) VALUES (%(u)s, 'Todo of a late user')", {"u": late})

    assert await sync.apply_log(clean.db, legacy, ctx) == (0, 2)
    async with clean.db.unit_of_work() as session:
        logged = (await session.execute(text(
            "SELECT source_table, operation, code, change_id IS NOT NULL, captured_at FROM social_legacy.differences "
            "WHERE phase = 'sync' ORDER BY id"))).all()
    assert [tuple(r[:4]) for r in logged] == [("schedule_items", "UPDATE", "SCHEDULE_ITEM_INVALID", True),
                                              ("todos", "INSERT", "UNKNOWN_USER", True)]
    await rules_hold(clean.db)

    # The back-fill, run again, brings the user the trigger missed; the window of the todo's capture replays.
    await backfill(clean.db, legacy, "legacy", ctx)
    todo_captured = logged[1][4]
    window = {"since": todo_captured, "until": todo_captured + timedelta(microseconds=1)}  # this capture only
    assert await sync.replay(clean.db, ctx, **window) == (1, 0)
    assert await _value(clean, "SELECT count(*) FROM social.todos WHERE title = 'Todo of a late user'") == 1
    # The invalid item is still refused when replayed: it stays in the log, unresolved.
    everything = {"since": logged[0][4] - timedelta(days=1), "until": todo_captured + timedelta(days=1)}
    assert await sync.replay(clean.db, ctx, **everything) == (0, 1)
    assert await _value(clean, "SELECT count(*) FROM social_legacy.differences WHERE resolved_at IS NULL "
                               "AND phase = 'sync'") == 1
    await rules_hold(clean.db)


async def _membership(setup, member_id):
    async with setup.db.unit_of_work() as session:
        return tuple((await session.execute(text(
            "SELECT m.role, m.status, m.removal_reason FROM social.group_members m WHERE m.id = :i"),
            {"i": member_id})).one())


@pytest.mark.invariant("SOC-INV-07")
async def test_a_role_changed_or_a_member_removed_in_the_old_app_is_mirrored_but_never_the_creator(clean):
    ctx = await _started(clean)
    legacy = clean.legacy
    rows = await (await legacy.execute(
        "SELECT id, role FROM legacy.group_members WHERE group_id = 1 ORDER BY id")).fetchall()
    owner = next(i for i, role in rows if role == "owner")
    others = [(i, role) for i, role in rows if role != "owner"]
    promoted, removed = others[0], others[1]
    new_role = "member" if promoted[1] == "admin" else "admin"
    tenet_ids = {i: await _mapped(clean, "group_members", i) for i in (owner, promoted[0], removed[0])}
    await legacy.execute("UPDATE legacy.group_members SET role = %s WHERE id = %s", (new_role, promoted[0]))
    await legacy.execute("DELETE FROM legacy.group_members WHERE id = %s", (removed[0],))
    await legacy.execute("UPDATE legacy.group_members SET role = 'member' WHERE id = %s", (owner,))  # not mirrored
    await legacy.execute("DELETE FROM legacy.group_members WHERE id = %s", (owner,))  # not mirrored either

    assert await sync.apply_log(clean.db, legacy, ctx) == (2, 2)
    assert await _membership(clean, tenet_ids[promoted[0]]) == (new_role, "active", None)
    assert (await _membership(clean, tenet_ids[removed[0]]))[1:] == ("removed", "removed")
    assert (await _membership(clean, tenet_ids[owner]))[:2] == ("creator", "active")  # one creator, kept
    async with clean.db.unit_of_work() as session:
        logged = (await session.execute(text(
            "SELECT operation, code FROM social_legacy.differences WHERE phase = 'sync' AND source_table = "
            "'group_members' ORDER BY id"))).all()
        actors = (await session.execute(text(
            "SELECT actor_type FROM kernel.audit_log WHERE action IN ('social.group.member.role_changed', "
            "'social.group.member.removed') AND data->>'source' = 'social legacy sync'"))).scalars().all()
    assert [tuple(r) for r in logged] == [("UPDATE", "NOT_MIRRORED"), ("DELETE", "NOT_MIRRORED")]
    assert sorted(actors) == ["system", "system"]
    await rules_hold(clean.db)


async def test_uninstall_stops_the_capture(clean):
    await _started(clean)
    await sync.uninstall(clean.legacy, "legacy")
    await clean.legacy.execute("UPDATE legacy.todos SET title = 'Unobserved' WHERE id = 1")
    assert await clean.scalar("SELECT count(*) FROM social_legacy.changes") == 0


async def test_a_second_sync_beside_a_running_one_refuses(clean):
    import psycopg

    from tenet.db.database import libpq_url

    ctx = await _started(clean)
    async with await psycopg.AsyncConnection.connect(libpq_url(clean.url), autocommit=True) as running:
        await running.execute("SELECT pg_advisory_lock(hashtext('tenet.social_legacy.sync'))")
        running_pid = running.info.backend_pid
        with pytest.raises(sync.SyncBusy):
            await sync.apply_log(clean.db, clean.legacy, ctx)
    # The server drops a closed session's locks when its backend has exited, a moment after the client hung up.
    for _ in range(200):
        gone = await clean.legacy.execute("SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = %s)",
                                          (running_pid,))
        if (await gone.fetchone())[0]:
            break
        await asyncio.sleep(0.05)
    assert await sync.apply_log(clean.db, clean.legacy, ctx) == (0, 0)  # the first one gone, the log is free


@pytest.fixture
def other_legacy_url(scratch_database) -> str:
    return scratch_database("sl_legacy_elsewhere")  # a plain database: the old app's, not Tenet's


async def test_the_legacy_tables_in_another_database(tenet_url, other_legacy_url):
    """`--legacy-url`: the tables, the capture and its change log live in the old app's database."""
    import psycopg
    from tests.social.legacy.conftest import _setup

    from tenet.db.database import libpq_url
    from tenet.social.legacy import sample

    async with await psycopg.AsyncConnection.connect(libpq_url(other_legacy_url), autocommit=True) as legacy:
        await sample.create(legacy, "legacy", sample.generate(6, dirty=False), replace=True)
        async for tenet in _setup(tenet_url, size=None, dirty=False):
            ctx = await tenet.context()
            await backfill(tenet.db, legacy, "legacy", ctx)
            await sync.install(legacy, "legacy")
            await legacy.execute("UPDATE legacy.todos SET title = 'Renamed elsewhere' WHERE id = 1")
            assert await sync.apply_log(tenet.db, legacy, ctx) == (1, 0)
            assert await _value(tenet, "SELECT title FROM social.todos WHERE id = :i",
                                {"i": await _mapped(tenet, "todos", 1)}) == "Renamed elsewhere"
            await rules_hold(tenet.db)
        cursor = await legacy.execute("SELECT count(*) FROM social_legacy.changes WHERE applied_at IS NOT NULL")
        assert (await cursor.fetchone())[0] == 1


async def test_the_worker_syncs_every_minute_while_it_is_switched_on(clean, tmp_path):
    from tests.conftest import test_settings
    from tests.social.legacy.conftest import NOW_ISO

    from tenet.kernel.clock import FrozenClock
    from tenet.kernel.jobs import JobRuntime, run_now
    from tenet.social.legacy import tasks

    await _started(clean)
    await clean.legacy.execute("UPDATE legacy.todos SET title = 'Synced by the worker' WHERE id = 1")
    clock = FrozenClock(datetime.fromisoformat(NOW_ISO))
    off = JobRuntime(db=clean.db, clock=clock, settings=test_settings(data_dir=tmp_path))
    assert await run_now(tasks.social_legacy_sync, off, timestamp=0) == {"off": 1}
    on = JobRuntime(db=clean.db, clock=clock, settings=test_settings(data_dir=tmp_path, social_legacy_sync=True))
    assert await run_now(tasks.social_legacy_sync, on, timestamp=60) == {"applied": 1, "refused": 0}
    assert await _value(clean, "SELECT title FROM social.todos WHERE id = :i",
                        {"i": await _mapped(clean, "todos", 1)}) == "Synced by the worker"
