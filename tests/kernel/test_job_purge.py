"""procrastinate keeps every finished job: the hourly purge removes those that finished before the run history's
retention (with their events), and leaves everything that may still matter."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy import text

from tenet.kernel import tasks
from tenet.kernel.jobs import JobScope, run_now


@pytest.fixture
def moments(clock) -> tuple[datetime, datetime]:
    """An event before the retention's cut-off (the Tenet clock's now - 30 days) and one after it."""
    return clock.now() - tasks.JOB_RUN_RETENTION - timedelta(days=5), clock.now() - timedelta(days=4)


async def _job(session, status: str, *events: tuple[str, datetime]) -> int:
    job_id = (await session.execute(text(
        "INSERT INTO procrastinate_jobs (queue_name, task_name, status) VALUES ('default', 'test:purge', "
        "CAST(:status AS procrastinate_job_status)) RETURNING id"), {"status": status})).scalar_one()
    for kind, at in events:
        await session.execute(text(
            "INSERT INTO procrastinate_events (job_id, type, at) VALUES (:job, CAST(:kind AS "
            "procrastinate_job_event_type), :at)"), {"job": job_id, "kind": kind, "at": at})
    return int(job_id)


async def _remaining(session, ids: list[int]) -> set[int]:
    rows = await session.execute(text("SELECT id FROM procrastinate_jobs WHERE id = ANY(:ids)"), {"ids": ids})
    return {row[0] for row in rows}


async def test_jobs_finished_before_the_retention_go_with_their_events_and_the_rest_stay(db, job_runtime, moments):
    old, new = moments
    async with db.unit_of_work() as session:
        succeeded = await _job(session, "succeeded", ("deferred", old), ("started", old), ("succeeded", old))
        failed = await _job(session, "failed", ("deferred", old), ("failed", old))
        cancelled = await _job(session, "cancelled", ("deferred", old), ("cancelled", old))
        finished_lately = await _job(session, "succeeded", ("deferred", old), ("succeeded", new))
        failed_then_touched = await _job(session, "failed", ("failed", old), ("retried", new))
        waiting = await _job(session, "todo", ("deferred", old))
        running = await _job(session, "doing", ("deferred", old), ("started", old))
        named_by_a_periodic_defer = await _job(session, "succeeded", ("succeeded", old))
        defer_id = (await session.execute(text(
            "INSERT INTO procrastinate_periodic_defers (task_name, defer_timestamp, job_id, periodic_id) "
            "VALUES ('test:gone', 1, :job, '') RETURNING id"), {"job": named_by_a_periodic_defer})).scalar_one()

    counts = await run_now(tasks.purge_expired, job_runtime, timestamp=0)

    ids = [succeeded, failed, cancelled, finished_lately, failed_then_touched, waiting, running,
           named_by_a_periodic_defer]
    async with db.unit_of_work() as session:
        assert await _remaining(session, ids) == {finished_lately, failed_then_touched, waiting, running}
        orphan_events = (await session.execute(text(
            "SELECT count(*) FROM procrastinate_events WHERE job_id = ANY(:ids)"),
            {"ids": [succeeded, failed, cancelled]})).scalar_one()
        # procrastinate's delete trigger unlinks a periodic defer that named a purged job (its row stays: it is what
        # keeps a tick from being deferred twice).
        defer_job = (await session.execute(text(
            "SELECT job_id FROM procrastinate_periodic_defers WHERE id = :id"), {"id": defer_id})).one()
    assert orphan_events == 0 and defer_job == (None,)
    assert counts["finished_jobs"] >= 3  # other tests' committed jobs may be older than the cut-off too


async def test_a_large_backlog_is_purged_in_batches_until_none_is_left(db, job_runtime, clock, moments):
    old, _ = moments
    async with db.unit_of_work() as session:
        backlog = [await _job(session, "succeeded", ("succeeded", old)) for _ in range(5)]
    scope = JobScope(runtime=job_runtime, now=clock.now(), session=None)

    purged = await tasks._purge_finished_jobs(scope, batch=2)  # 2 + 2 + 1 (+ whatever else is that old)

    async with db.unit_of_work() as session:
        assert await _remaining(session, backlog) == set()
    assert purged >= 5
