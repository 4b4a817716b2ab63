"""The soak's checks (ops/soak) on their own: each must be able to say something was lost.

The acknowledged-write check runs on writes the soak's own load generator made through the application
(committed for real), then on the same list after one row was deleted behind its back (a planted loss) and with
an id the service never gave: it names exactly those two. The mail check is fed deliveries as the SMTP server
records them."""

from __future__ import annotations

import uuid

import httpx
import psycopg

from ops.soak import checks, faults, report
from ops.soak.checks import Ack, Mail
from ops.soak.load import Record, Sample, VirtualUser
from tenet.app import create_app


async def test_the_acknowledged_write_check_finds_a_planted_loss(committed_db, settings, clock, database_url):
    app = create_app(settings, database=committed_db, clock=clock, run_background_tasks=False)
    record = Record()
    transport = httpx.ASGITransport(app=app, client=("203.0.113.7", 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        person = VirtualUser(client, record, 1, seed=3)
        await person.setup()
        for _ in range(40):
            await person.step()
    assert {"workspace", "todo", "invitation"} <= {a.kind for a in record.acks}, record.acks
    assert not record.abandoned and {s.status for s in record.samples} <= {200, 201}, record.samples

    with psycopg.connect(database_url, autocommit=True) as connection:
        assert checks.missing_writes(connection, record.acks) == []
        planted = next(a for a in record.acks if a.kind == "todo")
        connection.execute("DELETE FROM social.todos WHERE id = %s", (uuid.UUID(planted.id),))
        never_given = Ack("workspace", str(uuid.uuid4()))
        assert checks.missing_writes(connection, [*record.acks, never_given]) == [planted, never_given]


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
