"""The soak's checks (ops/soak) on their own: each must be able to say something was lost.

The acknowledged-write check runs on writes the soak's own load generator made through the application
(committed for real), then on the same list after one row was deleted behind its back (a planted loss) and with
an id the service never gave: it names exactly those two. The mail check is fed deliveries as the SMTP server
records them."""

from __future__ import annotations

import uuid
from datetime import timedelta

import httpx
import psycopg

from ops.soak import checks, faults, report
from ops.soak import world as soak_world
from ops.soak.checks import Ack, Mail
from ops.soak.load import Record, Sample, VirtualUser
from tenet.app import create_app
from tenet.iam import service as iam_service
from tenet.iam.passwords import Passwords
from tenet.iam.permissions import Role
from tenet.kernel.audit import Actor
from tenet.kernel.clock import FrozenClock, SystemClock
from tenet.social import automations


async def _world(app, record: Record, client: httpx.AsyncClient, committed_db, users: int = 2):
    """The soak's world as prepare() makes it through the API, after an administrator made as create-admin does."""
    async with committed_db.unit_of_work() as session:
        await iam_service.create_user(session, passwords=Passwords(), email=soak_world.ADMIN_EMAIL,
                                      password=soak_world.ADMIN_PASSWORD, display_name="Soak admin",
                                      now=SystemClock().now(), actor=Actor.system(), roles=[Role.ADMINISTRATOR])
    people = [VirtualUser(client, record, n, seed=n + 3) for n in range(users)]
    for person in people:
        await person.setup()
    made = await soak_world.prepare(client, people, duration=170, automations_per_minute=2)
    for person in people:
        person.world = made
    return people, made


async def test_the_acknowledged_write_check_finds_a_planted_loss(committed_db, settings, database_url):
    """Every kind of write the load makes is acknowledged by the real application and found; a deleted row and an
    id never given are named."""
    app = create_app(settings, database=committed_db, clock=SystemClock(), run_background_tasks=False)
    record = Record()
    transport = httpx.ASGITransport(app=app, client=("203.0.113.7", 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        people, _ = await _world(app, record, client, committed_db)
        for _ in range(60):
            for person in people:
                await person.step()
    assert set(checks.TABLES) <= {a.kind for a in record.acks}, {a.kind for a in record.acks}
    assert not record.abandoned and {s.status for s in record.samples} <= {200, 201}, \
        [s for s in record.samples if s.status not in (200, 201)]

    with psycopg.connect(database_url, autocommit=True) as connection:
        assert checks.missing_writes(connection, record.acks) == []
        planted = next(a for a in record.acks if a.kind == "todo")
        connection.execute("DELETE FROM social.todos WHERE id = %s", (uuid.UUID(planted.id),))
        never_given = Ack("ai_batch", "9007199254740993")
        # By kind, in the kinds' order.
        assert checks.missing_writes(connection, [*record.acks, never_given]) == [never_given, planted]


async def test_uploads_are_checked_by_their_bytes_and_a_file_stored_twice_is_counted(committed_db, settings,
                                                                                    database_url):
    app = create_app(settings, database=committed_db, clock=SystemClock(), run_background_tasks=False)
    record = Record()
    transport = httpx.ASGITransport(app=app, client=("203.0.113.7", 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        (person,), made = await _world(app, record, client, committed_db, users=1)
        await person.upload()
        await person.upload()
        items = [m.item_id for m in made.meetings]
        with psycopg.connect(database_url, autocommit=True) as connection:
            assert checks.unacknowledged_uploads(connection, items, record.uploads) == 0
            assert checks.unacknowledged_uploads(connection, items, record.uploads[:1]) == 1
        forged = checks.Upload(record.uploads[0].id, "0" * 64, record.uploads[0].download_url)
        differ = await checks.downloads_differ(client, (soak_world.ADMIN_EMAIL, soak_world.ADMIN_PASSWORD),
                                               [*record.uploads, forged])
    assert differ == [f"{forged.id} (200)"]


async def test_the_slot_check_wants_one_succeeded_run_with_one_digest_per_slot(committed_db, settings, database_url):
    app = create_app(settings, database=committed_db, clock=SystemClock(), run_background_tasks=False)
    record = Record()
    transport = httpx.ASGITransport(app=app, client=("203.0.113.7", 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        _, made = await _world(app, record, client, committed_db)
    first, second = made.automations[:2]
    assert first.slot == second.slot
    after = FrozenClock(first.slot + timedelta(seconds=1))
    await automations.schedule(committed_db, now=after.now(), default_timezone=soak_world.ZONE, max_attempts=3,
                               retry_base_seconds=5)
    await automations.drain(committed_db, clock=after, default_timezone=soak_world.ZONE, lease_seconds=20,
                            retry_base_seconds=5, budget_seconds=30)
    later = [(a.id, a.slot) for a in made.automations if a.slot > first.slot][:1]
    with psycopg.connect(database_url, autocommit=True) as connection:
        ran = checks.check_slots(connection, [(first.id, first.slot), (second.id, second.slot)])
        assert ran.ok and ran.ran_once == 2
        # A run that went through on its first attempt was never cut short by a killed worker: the check of the
        # runs a kill cut says so.
        (run,) = connection.execute("SELECT id FROM social.automation_runs WHERE job_id = %s",
                                    (uuid.UUID(first.id),)).fetchone()
        assert not checks.check_runs_cut(connection, [str(run)]).ok
        connection.execute("DELETE FROM social.inbox_messages WHERE automation_run_id = (SELECT id FROM "
                           "social.automation_runs WHERE job_id = %s)", (uuid.UUID(second.id),))
        verdict = checks.check_slots(connection, [(first.id, first.slot), (second.id, second.slot), *later])
    assert not verdict.ok and verdict.ran_once == 1
    assert verdict.effects_not_once == [f"{second.id} (0 messages)"] and verdict.missing == [i for i, _ in later]


def test_the_mail_check_accepts_a_retried_send_and_refuses_a_lost_or_doubled_message():
    retried = [Mail("a@example.com", "<1@tenet.example>"), Mail("a@example.com", "<1@tenet.example>"),
               Mail("B@example.com", "<2@tenet.example>")]
    verdict = checks.check_mail(["a@example.com", "b@example.com"], retried)
    assert verdict.ok and verdict.duplicates == 1 and verdict.received == 3

    lost = checks.check_mail(["a@example.com", "c@example.com"], retried)
    assert not lost.ok and lost.never_received == ["c@example.com"]

    doubled = checks.check_mail(["a@example.com"], [Mail("a@example.com", "<1@x>"), Mail("a@example.com", "<9@x>")])
    assert not doubled.ok and doubled.split == ["a@example.com"]


def test_the_short_schedule_has_one_fault_of_each_kind_and_the_full_one_repeats_them():
    short = faults.schedule(120)
    assert sorted(f.kind for f in short) == sorted(faults.KINDS)
    assert all(15 <= f.at < 120 for f in short) and short == sorted(short, key=lambda f: f.at)
    full = faults.schedule(600)
    assert len(full) == 5 * len(faults.KINDS) and full[-1].at < 600


def test_phases_count_errors_500s_and_503s_apart():
    plan = [faults.Fault(10.0, "primary-restart")]
    samples = [Sample(1.0, "me", 200, 0.01), Sample(2.0, "me", 200, 0.03),
               Sample(11.0, "me", 503, 0.02, retry_after=True), Sample(12.0, "me", 500, 0.5),
               Sample(13.0, "me", 0, 3.0), Sample(14.0, "me", 201, 0.04)]
    baseline, restart = report.phases(samples, plan)
    assert (baseline["requests"], baseline["errors"], baseline["p95_ms"]) == (2, 0, 30.0)
    assert (restart["requests"], restart["errors"], restart["status_500"]) == (4, 3, 1)
    assert restart["status_503_with_retry_after"] == 1 and restart["error_rate"] == 0.75


def test_the_rss_bound():
    assert checks.rss_within(100_000, 150_000 + 98_304, factor=1.5, slack_kib=98_304)
    assert not checks.rss_within(100_000, 150_001 + 98_304, factor=1.5, slack_kib=98_304)
