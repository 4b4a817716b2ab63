"""Social races on real parallel connections: exactly one winner, a stable code for the loser, every SOC rule
holding afterwards. The revoke-vs-edit race also runs with the item lock made a no-op, to show the lock (not
luck) keeps the rule; the automation races run two schedulers and four drainers at once, and a worker killed in
the middle of a run."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from sqlalchemy import text

from tenet.db.database import Database
from tenet.kernel.db_errors import database_away
from tenet.social import automations, friends, inbox, items, profiles
from tenet.social.automations import commands as automation_commands
from tests.support.invariants import rules_hold
from tests.support.outcomes import outcome

WINDOW = 0.3
LA = "America/Los_Angeles"


@pytest.mark.invariant("SOC-INV-04", "SOC-INV-06")
async def test_crossed_requests_at_the_same_moment_end_as_one_accepted_row(committed_db, people, clock):
    ann, bob = await people.make(), await people.make()

    async def ask(a, b):
        async with committed_db.unit_of_work() as session:
            await friends.request(session, principal_id=a.id, target_id=b.id, cooldown=timedelta(0), inbox_limit=None,
                                  now=clock.now())

    outcomes = await asyncio.gather(outcome(ask(ann, bob)), outcome(ask(bob, ann)))
    assert outcomes == ["ok", "ok"]
    async with committed_db.read_only() as session:
        rows = (await session.execute(text("SELECT status FROM social.friendships"))).scalars().all()
        messages = (await session.execute(text("SELECT status FROM social.inbox_messages"))).scalars().all()
    assert rows == ["accepted"] and messages == ["accepted"]
    await rules_hold(committed_db, "SOC-")


@pytest.mark.invariant("SOC-INV-03")
async def test_twenty_concurrent_settings_merges_lose_nothing(committed_db, people, clock):
    ann = await people.make()
    patches = [{"preferences": {"theme": "dark"}}, {"preferences": {"language": "fr"}},
               {"privacy": {"profile_visible_to": "everyone"}}, {"privacy": {"activity_visible_to": "nobody"}},
               {"privacy": {"allow_friend_requests": False}}, {"notification": {"enabled": False}},
               {"notification": {"push_enabled": False}}, {"notification": {"email_enabled": True}},
               {"preferences": {"timezone": "Asia/Shanghai"}}]
    patches += [{"notification": {"quiet_hours_start": "22:00", "quiet_hours_end": "07:00"}}] * 11

    async def merge(patch):
        async with committed_db.unit_of_work() as session:
            await profiles.patch_settings(session, principal_id=ann.id, patch=patch, default_timezone=LA,
                                          now=clock.now())

    assert await asyncio.gather(*(outcome(merge(p)) for p in patches)) == ["ok"] * 20
    async with committed_db.read_only() as session:
        stored, version = (await session.execute(text(
            "SELECT settings, version FROM social.profiles WHERE id = :u"), {"u": ann.id})).one()
    assert stored == {"preferences": {"theme": "dark", "language": "fr", "timezone": "Asia/Shanghai"},
                      "privacy": {"profile_visible_to": "everyone", "activity_visible_to": "nobody",
                                  "allow_friend_requests": False},
                      "notification": {"enabled": False, "push_enabled": False, "email_enabled": True,
                                       "quiet_hours_start": "22:00", "quiet_hours_end": "07:00"}}
    assert version == 21


async def _shared_item(db, people, clock):
    owner, editor = await people.make(), await people.make()
    now = clock.now()
    async with db.unit_of_work() as session:
        item = await items.create_item(session, principal_id=owner.id, title="Plan", description=None,
                                       start_at=now, end_at=now + timedelta(hours=1), timezone=LA,
                                       recurrence_rule=None, source_type="manual", status="active", now=now)
        subscription = await items.share(session, item_id=item.id, principal_id=owner.id, subject_type="user",
                                         subject_id=editor.id, permission=["view", "edit"], notify_level="all",
                                         inbox_limit=None, now=now)
    async with db.unit_of_work() as session:
        await items.answer_offer(session, item_id=item.id, principal_id=editor.id, accept=True, now=now)
        await session.execute(text("UPDATE social.inbox_messages SET status = 'accepted', acted_at = now(), "
                                   "read_at = now() WHERE recipient_id = :u"), {"u": editor.id})
    return owner, editor, item.id, subscription.id


async def _revoke_while_editing(db, owner, editor, item_id, subscription_id, now):
    """The editor decides (and lingers) first; the revoke starts meanwhile. Answers the order in which the two
    committed, the outcomes and the final title and permission."""
    committed: list[str] = []

    async def edit():
        async with db.unit_of_work() as session:
            await items.update_item(session, item_id=item_id, principal_id=editor.id, changes={"title": "Edited"},
                                    expected_version=None, if_match=False, now=now)
        committed.append("edit")

    async def revoke():
        await asyncio.sleep(WINDOW / 3)
        async with db.unit_of_work() as session:
            await items.update_subscription(session, item_id=item_id, subscription_id=subscription_id,
                                            principal_id=owner.id, permission=["view"], notify_level=None, status=None,
                                            now=now)
        committed.append("revoke")

    outcomes = await asyncio.gather(outcome(edit()), outcome(revoke()))
    async with db.read_only() as session:
        title = (await session.execute(text("SELECT title FROM social.schedule_items WHERE id = :i"),
                                       {"i": item_id})).scalar()
        permission = (await session.execute(text(
            "SELECT permission FROM social.schedule_subscriptions WHERE id = :s"), {"s": subscription_id})).scalar()
    return committed, outcomes, title, permission


def _slow_decision(monkeypatch, editor):
    """Widen the editor's window between deciding and writing (the revoke decides at its normal pace)."""
    decide = items.decide

    async def slow(session, item_id, user_id):
        decision = await decide(session, item_id, user_id)
        if user_id == editor.id:
            await asyncio.sleep(WINDOW)
        return decision

    monkeypatch.setattr(items, "decide", slow)


@pytest.mark.invariant("SOC-INV-13")
async def test_revoke_during_an_edit_waits_for_it(committed_db, people, clock, monkeypatch):
    """With the item lock the revoke waits until the edit (decided while edit was held) commits: the edit is
    before the revoke, never after it."""
    owner, editor, item_id, subscription_id = await _shared_item(committed_db, people, clock)
    _slow_decision(monkeypatch, editor)
    order, outcomes, title, permission = await _revoke_while_editing(committed_db, owner, editor, item_id,
                                                                     subscription_id, clock.now())
    assert outcomes == ["ok", "ok"] and title == "Edited" and permission == ["view"]
    assert order == ["edit", "revoke"]  # the revoke queued behind the edit it raced


@pytest.mark.invariant("SOC-INV-13")
async def test_without_the_item_lock_an_edit_lands_after_its_revoke(committed_db, people, clock, monkeypatch):
    """The control experiment: the same timing with the lock a no-op lets the revoke commit first and the
    edit, decided on the old permission, land after it — a change by someone who no longer may."""
    owner, editor, item_id, subscription_id = await _shared_item(committed_db, people, clock)
    _slow_decision(monkeypatch, editor)
    async def no_lock(session, item_id):
        from tenet.social.models import ScheduleItem

        return await session.get(ScheduleItem, item_id, populate_existing=True)

    monkeypatch.setattr(items, "_lock_item", no_lock)
    order, outcomes, title, permission = await _revoke_while_editing(committed_db, owner, editor, item_id,
                                                                     subscription_id, clock.now())
    assert outcomes == ["ok", "ok"] and title == "Edited" and permission == ["view"]
    # The rule broken: the edit committed after the revoke, by someone who no longer held edit.
    assert order == ["revoke", "edit"]


@pytest.mark.invariant("SOC-INV-15")
async def test_accepting_one_message_twice_at_once_makes_one_membership(committed_db, people, clock):
    from tenet.social import groups

    ann, bob = await people.make(), await people.make()
    now = clock.now()
    async with committed_db.unit_of_work() as session:
        friendship, _ = await friends.request(session, principal_id=ann.id, target_id=bob.id, cooldown=timedelta(0),
                                              inbox_limit=None, now=now)
    async with committed_db.unit_of_work() as session:
        await friends.act(session, friendship_id=friendship.id, principal_id=bob.id, action="accept", now=now)
        group = await groups.create_group(session, principal_id=ann.id, name="G", description=None,
                                          visibility="private", creation_limit=None, now=now)
    async with committed_db.unit_of_work() as session:
        message = await groups.invite(session, group_id=group.id, principal_id=ann.id, user_id=bob.id, inbox_limit=None,
                                      max_members=10, now=now)

    async def accept():
        async with committed_db.unit_of_work() as session:
            await inbox.answer(session, message_id=message.id, principal_id=bob.id, accept=True, max_members=10,
                               now=now)

    outcomes = await asyncio.gather(outcome(accept()), outcome(accept()))
    assert sorted(outcomes) == ["INBOX_MESSAGE_ALREADY_ACTED", "ok"]
    async with committed_db.read_only() as session:
        members = (await session.execute(text(
            "SELECT count(*) FROM social.group_members WHERE group_id = :g AND user_id = :u"),
            {"g": group.id, "u": bob.id})).scalar()
    assert members == 1
    await rules_hold(committed_db, "SOC-")


async def _digest_jobs(db, people, clock, count: int) -> list[uuid.UUID]:
    owners = [await people.make() for _ in range(count)]
    ids = []
    async with db.unit_of_work() as session:
        for owner in owners:
            job = await automations.create_job(
                session, principal_id=owner.id, name="Digest", job_type="todo_digest", target_type="user",
                target_id=None, params={"skip_if_empty": False}, schedule_type="daily",
                schedule_time=(clock.now() + timedelta(minutes=1)).astimezone().time().replace(second=0,
                                                                                               microsecond=0),
                schedule_weekday=None, status="active", limit=20, default_timezone="UTC", now=clock.now())
            ids.append(job.id)
    return ids


@pytest.mark.invariant("SOC-INV-20", "SOC-INV-21")
async def test_two_schedulers_and_four_drainers_run_each_slot_exactly_once(committed_db, people, clock):
    jobs = await _digest_jobs(committed_db, people, clock, 12)
    clock.advance(timedelta(minutes=2))
    engines = [Database.from_url(committed_db.engine.url.render_as_string(hide_password=False), pool_size=2)
               for _ in range(4)]
    try:
        schedulers = [automations.schedule(db, now=clock.now(), default_timezone="UTC", max_attempts=3,
                                           retry_base_seconds=60) for db in engines[:2]]
        await asyncio.gather(*schedulers)
        drained = await asyncio.gather(*(automations.drain(db, clock=clock, default_timezone="UTC", lease_seconds=120,
                                                           retry_base_seconds=60) for db in engines))
    finally:
        for db in engines:
            await db.dispose()
    assert sum(d.get("succeeded", 0) for d in drained) == len(jobs)
    async with committed_db.read_only() as session:
        runs = (await session.execute(text("SELECT status, attempt FROM social.automation_runs"))).all()
        digests = (await session.execute(text(
            "SELECT count(*), count(DISTINCT automation_run_id) FROM social.inbox_messages "
            "WHERE message_type = 'todo_digest'"))).one()
    assert sorted(runs) == [("succeeded", 1)] * len(jobs)
    assert tuple(digests) == (len(jobs), len(jobs))
    await rules_hold(committed_db, "SOC-")


@pytest.mark.invariant("SOC-INV-21")
async def test_a_worker_killed_mid_run_is_recovered_and_the_run_finishes_once(committed_db, people, clock):
    (_job_id,) = await _digest_jobs(committed_db, people, clock, 1)
    clock.advance(timedelta(minutes=2))
    await automations.schedule(committed_db, now=clock.now(), default_timezone="UTC", max_attempts=3,
                               retry_base_seconds=60)
    victim = Database.from_url(committed_db.engine.url.render_as_string(hide_password=False), pool_size=1)
    inside = asyncio.Event()

    async def hanging(session, job, claimed, now, zone):
        await automations.EFFECTS["todo_digest"](session, job, claimed, now, zone)
        backend = (await session.execute(text("SELECT pg_backend_pid()"))).scalar()
        inside.set()
        hanging.backend = backend
        await asyncio.sleep(30)
        return {}

    task = asyncio.create_task(automations.drain(victim, clock=clock, default_timezone="UTC", lease_seconds=60,
                                                 retry_base_seconds=1, effects={"todo_digest": hanging}))
    await asyncio.wait_for(inside.wait(), 10)
    # While the victim holds the run, recovery (even after the lease) leaves it alone: it is alive.
    clock.advance(timedelta(minutes=2))
    async with committed_db.unit_of_work() as session:
        assert await automations.recover(session, now=clock.now(), retry_base_seconds=1) == 0
    # The worker process dies: nothing of it runs any more, and its connection goes.
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    async with committed_db.unit_of_work() as session:
        await session.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": hanging.backend})
    await victim.dispose()
    async with committed_db.unit_of_work() as session:
        assert await automations.recover(session, now=clock.now(), retry_base_seconds=1) == 1
    clock.advance(timedelta(minutes=5))
    await _drains_once_with_one_digest(committed_db, clock, attempt=2)


async def _drains_once_with_one_digest(db, clock, *, attempt: int) -> None:
    """The one run drains, succeeds on `attempt`, and its owner has exactly one digest (SOC-INV-21)."""
    drained = await automations.drain(db, clock=clock, default_timezone="UTC", lease_seconds=60,
                                      retry_base_seconds=1)
    assert drained == {"succeeded": 1}
    async with db.read_only() as session:
        run = (await session.execute(text("SELECT status, attempt FROM social.automation_runs"))).one()
        digests = (await session.execute(text(
            "SELECT count(*) FROM social.inbox_messages WHERE message_type = 'todo_digest'"))).scalar()
    assert tuple(run) == ("succeeded", attempt) and digests == 1
    await rules_hold(db, "SOC-")


async def _run_now_twice(db, owner, job_id, now) -> list[str]:
    """Two run-now requests of one job at once (a millisecond apart, as two HTTP requests are), each holding its
    transaction open a moment after queuing."""
    async def request(at):
        async with db.unit_of_work() as session:
            await automations.run_now(session, job_id=job_id, principal_id=owner, max_attempts=3, now=at)
            await asyncio.sleep(WINDOW)

    return sorted(await asyncio.gather(outcome(request(now)), outcome(request(now + timedelta(milliseconds=1)))))


@pytest.mark.invariant("SOC-INV-20")
async def test_one_manual_run_of_a_job_at_a_time(committed_db, people, clock):
    """The job's row lock queues the second request behind the first, which then sees the queued run: 409, one
    run. Once it has finished, the next manual run is accepted."""
    (job_id,) = await _digest_jobs(committed_db, people, clock, 1)
    async with committed_db.read_only() as session:
        owner = (await session.execute(text("SELECT owner_id FROM social.automation_jobs WHERE id = :j"),
                                       {"j": job_id})).scalar()
    outcomes = await _run_now_twice(committed_db, owner, job_id, clock.now())
    assert outcomes == ["AUTOMATION_RUN_IN_PROGRESS", "ok"]
    async with committed_db.read_only() as session:
        runs = (await session.execute(text("SELECT trigger, status FROM social.automation_runs"))).all()
    assert [tuple(r) for r in runs] == [("manual", "queued")]
    clock.advance(timedelta(seconds=1))
    assert await automations.drain(committed_db, clock=clock, default_timezone="UTC", lease_seconds=120,
                                   retry_base_seconds=60) == {"succeeded": 1}
    assert await _run_now_twice(committed_db, owner, job_id, clock.now()) == ["AUTOMATION_RUN_IN_PROGRESS", "ok"]
    await rules_hold(committed_db, "SOC-")


async def test_without_the_job_lock_two_manual_runs_are_queued(committed_db, people, clock, monkeypatch):
    """The control experiment: with the job read without its row lock, both requests check before either
    commits and both queue a run — the lock, not luck, keeps one."""
    (job_id,) = await _digest_jobs(committed_db, people, clock, 1)
    async with committed_db.read_only() as session:
        owner = (await session.execute(text("SELECT owner_id FROM social.automation_jobs WHERE id = :j"),
                                       {"j": job_id})).scalar()

    async def unlocked(session, job_id, owner_id):
        from tenet.social.models import AutomationJob

        return await session.get(AutomationJob, job_id, populate_existing=True)

    monkeypatch.setattr(automation_commands, "_own", unlocked)
    assert await _run_now_twice(committed_db, owner, job_id, clock.now()) == ["ok", "ok"]


@pytest.mark.invariant("SOC-INV-20", "SOC-INV-21")
async def test_a_batch_the_database_lost_gives_its_runs_back_with_their_attempt(committed_db, people, clock):
    """The worker lives but its connection dies in the middle of a batch (a PgBouncer or PostgreSQL restart): the
    batch is rolled back, so none of its runs was done. The drainer gives them back to the queue with their
    attempt returned instead of leaving them to their lease (an attempt spent each time: three outages in a row
    failed a daily digest in the soak). The run then succeeds on its first counted attempt, with one digest."""
    (_job_id,) = await _digest_jobs(committed_db, people, clock, 1)
    clock.advance(timedelta(minutes=2))
    await automations.schedule(committed_db, now=clock.now(), default_timezone="UTC", max_attempts=3,
                               retry_base_seconds=60)
    victim = Database.from_url(committed_db.engine.url.render_as_string(hide_password=False), pool_size=1)

    async def connection_lost(session, job, claimed, now, zone):
        await automations.EFFECTS["todo_digest"](session, job, claimed, now, zone)
        await session.execute(text("SELECT pg_terminate_backend(pg_backend_pid())"))
        return {}

    try:
        with pytest.raises(Exception) as lost:
            await automations.drain(victim, clock=clock, default_timezone="UTC", lease_seconds=60,
                                    retry_base_seconds=1, effects={"todo_digest": connection_lost})
    finally:
        await victim.dispose()
    assert database_away(lost.value), lost.value
    async with committed_db.read_only() as session:
        given_back = (await session.execute(text(
            "SELECT status, attempt, claimed_by FROM social.automation_runs"))).one()
    assert tuple(given_back) == ("queued", 0, None)
    await _drains_once_with_one_digest(committed_db, clock, attempt=1)
