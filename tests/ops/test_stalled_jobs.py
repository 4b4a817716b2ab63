"""A worker killed while it holds a job (SIGKILL: no chance to give the job back) does not leave the job
`doing` for ever: once its heartbeat is older than TENET_STALLED_WORKER_SECONDS, another worker puts the job
back in the queue and runs it, once."""

from __future__ import annotations

import time

import psycopg
import pytest
from sqlalchemy import text

from tenet.worker import build_job_app
from tests.support.live import LiveProcess, service_env

pytestmark = pytest.mark.live_server

# A job of the catalog that takes an advisory lock first (`lock=`): holding that lock from the test keeps
# the first worker inside the job, deterministically, until it is killed.
TASK = "reservations:reservation_migrate_card_contracts"
LOCK = "reservation.card_contracts"


def wait_for(predicate, timeout: float, message) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(message() if callable(message) else message)
        time.sleep(0.2)


def start_worker(env: dict[str, str], log_path) -> LiveProcess:
    worker = LiveProcess(["worker", "--concurrency", "1"], env=env, log_path=log_path).start()
    wait_for(lambda: "worker started" in worker.output or worker.process.poll() is not None, 60,
             lambda: worker.output[-3000:])
    assert worker.process.poll() is None, worker.output[-3000:]
    return worker


async def test_a_job_held_by_a_killed_worker_is_run_to_completion_exactly_once_by_another(
        live_database_url, tmp_path):
    env = service_env(DATABASE_URL=live_database_url, TENET_DATA_DIR=str(tmp_path),
                      TENET_WORKER_HEARTBEAT_SECONDS="1", TENET_STALLED_WORKER_SECONDS="4")
    state = psycopg.connect(live_database_url, autocommit=True)
    blocker = psycopg.connect(live_database_url, autocommit=True)
    workers: list[LiveProcess] = []
    try:
        blocker.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (LOCK,))
        job_app = build_job_app(live_database_url)
        async with job_app.open_async():
            job_id = await job_app.configure_task(TASK).defer_async()

        def job() -> tuple[str, int]:
            return state.execute("SELECT status::text, attempts FROM procrastinate_jobs WHERE id = %s",
                                 (job_id,)).fetchone()

        def first_waits_on_the_lock() -> bool:
            return job()[0] == "doing" and state.execute(
                "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE l.locktype = 'advisory'"
                " AND NOT l.granted AND a.application_name = 'tenet-worker'").fetchone()[0] == 1

        first = start_worker(env, tmp_path / "first.log")
        workers.append(first)
        wait_for(first_waits_on_the_lock, 60, lambda: f"the first worker did not take the job:\n{first.output}")
        workers.append(start_worker(env, tmp_path / "second.log"))

        first.process.kill()
        first.process.wait(10)
        blocker.close()
        wait_for(lambda: job()[0] == "succeeded", 90,
                 lambda: f"job {job()} was not run again:\n{workers[1].output[-3000:]}")

        runs = state.execute("SELECT status, attempt, error FROM kernel.job_run WHERE procrastinate_job_id = %s "
                             "ORDER BY id", (job_id,)).fetchall()
        # Run once to completion; the killed attempt's history says how it ended instead of `running`.
        assert [(status, attempt) for status, attempt, _ in runs] == [("failed", 0), ("succeeded", 1)], runs
        assert "stopped" in runs[0][2]
        assert job() == ("succeeded", 2)  # procrastinate counts both attempts: the stalled one and the run
        assert f"retried stalled job {job_id}" in workers[1].output
    finally:
        for worker in workers:
            worker.stop()
        state.close()
        blocker.close()


async def test_only_the_jobs_of_silent_workers_go_back_and_a_periodic_one_already_queued_again_is_closed(
        committed_db, database_url, clock):
    """The recovery on procrastinate's own tables: a job whose worker still beats is left alone (it would run
    twice); a silent worker's job goes back to the queue; a periodic job's stalled run whose next tick already
    waits (one waiting run per queueing lock) is closed as failed instead of colliding with it."""
    from tenet.kernel.jobs import recover_stalled_jobs

    job_app = build_job_app(database_url)
    async with job_app.open_async():
        manager = job_app.job_manager
        live, silent = await manager.register_worker(), await manager.register_worker()
        tick = job_app.configure_task("kernel:purge_expired", queueing_lock="periodic:purge_expired")
        beating = await job_app.configure_task(TASK).defer_async()
        orphan = await job_app.configure_task(TASK).defer_async()
        first_tick = await tick.defer_async(timestamp=1)
        # Jobs are fetched oldest first: the live worker takes the first, the silent one the other two.
        fetched = [(await manager.fetch_job(queues=None, worker_id=worker)).id for worker in (live, silent, silent)]
        assert fetched == [beating, orphan, first_tick]
        next_tick = await tick.defer_async(timestamp=2)  # allowed: the first tick is `doing`, not waiting
        async with committed_db.engine.begin() as connection:
            await connection.execute(text("UPDATE procrastinate_workers SET last_heartbeat = now() - interval "
                                          "'10 minutes' WHERE id = :id"), {"id": silent})

        retried = await recover_stalled_jobs(manager, committed_db, stalled_after=60, now=clock.now())

        statuses = {job.id: job.status for job in await manager.list_jobs_async()}
    assert retried == [orphan]
    assert {job_id: statuses[job_id] for job_id in (beating, orphan, first_tick, next_tick)} == {
        beating: "doing", orphan: "todo", first_tick: "failed", next_tick: "todo"}
