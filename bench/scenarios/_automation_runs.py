"""automation_runs: materialise and execute N due automation runs with two worker processes, next to procrastinate
running N no-op jobs with two worker processes, on the same embedded PostgreSQL (issue 9).

    .venv/bin/python -m bench.scenarios._automation_runs [N]      # default 2000

Not a wrk scenario (it measures the worker, not HTTP), hence the leading underscore. Tenet's side: N active
`todo_digest` jobs (skip_if_empty off: every run writes one inbox message) due a minute ago; each worker process
runs the scheduler pass (recover, materialise; running it in both processes at once is the exactly-once race)
and then drains with two drainers, as `tenet worker` does with the two periodic jobs. The baseline: procrastinate
on the same server, N no-op jobs deferred in batches, two worker processes of concurrency 2. Reported: runs/s
(first scheduler start to nothing queued or running), and the checks: N succeeded runs, N digests with distinct
run ids, no duplicate slot.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import procrastinate
import psycopg

from tenet.db import migrate
from tenet.db.database import Database
from tenet.db.embedded import ensure_database, start_embedded_server
from tenet.kernel.clock import SystemClock

PROCESSES = 2


def _setup(url: str, n: int) -> None:
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("""
            INSERT INTO iam.user_account (id, email, email_normalized, email_normalization, display_name, password_hash,
                                          status, created_at, updated_at)
            VALUES ('00000000-0000-4000-8000-0000000000aa', 'auto@bench.example', 'auto@bench.example', 'email-v1',
                    'Auto', '$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA', 'active', now(), now())""")
        connection.execute("""
            INSERT INTO social.profiles (id, username, calendar_feed_id, created_at, updated_at)
            VALUES ('00000000-0000-4000-8000-0000000000aa', 'Auto', 'AAAAAAAAAAAAAAAAAAAAAA', now(), now())""")
        connection.execute("""
            INSERT INTO social.user_agents (id, user_id, llm_id, agent_type, created_at, updated_at)
            VALUES (gen_random_uuid(), '00000000-0000-4000-8000-0000000000aa', gen_random_uuid(), 'TASK_EXECUTION',
                    now(), now())""")
        connection.execute("""
            INSERT INTO social.automation_jobs (id, owner_id, name, job_type, target_type, target_id, params,
                                                schedule_type, schedule_time, status, next_run_at, created_at,
                                                updated_at)
            SELECT gen_random_uuid(), '00000000-0000-4000-8000-0000000000aa', 'Digest ' || i, 'todo_digest', 'user',
                   '00000000-0000-4000-8000-0000000000aa', '{"skip_if_empty": false}', 'daily',
                   date_trunc('minute', now() AT TIME ZONE 'America/Los_Angeles' - interval '1 minute')::time,
                   'active', now() - interval '1 minute', now(), now()
              FROM generate_series(1, %s) AS i""", (n,))


async def _tenet_worker(url: str) -> None:
    from tenet.domains import load_all
    from tenet.social import automations

    load_all()
    db = Database.from_url(url, pool_size=3, max_overflow=0)
    clock = SystemClock()
    try:
        await automations.schedule(db, now=clock.now(), default_timezone="America/Los_Angeles", max_attempts=3,
                                   retry_base_seconds=60)
        await asyncio.gather(*(automations.drain(db, clock=clock, default_timezone="America/Los_Angeles",
                                                 lease_seconds=120, retry_base_seconds=60, budget_seconds=3600)
                               for _ in range(2)))
    finally:
        await db.dispose()


def _run_tenet_worker(url: str) -> None:
    asyncio.run(_tenet_worker(url))


def _procrastinate_app(url: str) -> procrastinate.App:
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))

    @app.task(name="noop")
    async def noop(i: int) -> None:
        return None

    return app


async def _procrastinate_worker(url: str) -> None:
    app = _procrastinate_app(url)
    async with app.open_async():
        await app.run_worker_async(concurrency=2, wait=False, install_signal_handlers=False)


def _run_procrastinate_worker(url: str) -> None:
    asyncio.run(_procrastinate_worker(url))


async def _defer(url: str, n: int) -> None:
    app = _procrastinate_app(url)
    async with app.open_async():
        task = app.tasks["noop"]
        for start in range(0, n, 1000):
            await task.batch_defer_async(*({"i": i} for i in range(start, min(n, start + 1000))))


def _timed(target, url: str) -> float:
    context = multiprocessing.get_context("spawn")
    started = time.perf_counter()
    processes = [context.Process(target=target, args=(url,)) for _ in range(PROCESSES)]
    for process in processes:
        process.start()
    for process in processes:
        process.join()
        if process.exitcode != 0:
            raise SystemExit(f"a worker process exited with {process.exitcode}")
    return time.perf_counter() - started


def main(n: int) -> None:
    with tempfile.TemporaryDirectory(prefix="tenet-bench-auto-") as scratch:
        server = start_embedded_server(Path(scratch) / "pgdata")
        tenet_url = ensure_database(server, "auto_tenet")
        migrate.upgrade(tenet_url)
        baseline_url = ensure_database(server, "auto_baseline")
        migrate.upgrade(baseline_url)  # procrastinate's schema comes with our first migration
        _setup(tenet_url, n)
        tenet_seconds = _timed(_run_tenet_worker, tenet_url)
        with psycopg.connect(tenet_url) as connection:
            runs = dict(connection.execute(
                "SELECT status, count(*) FROM social.automation_runs GROUP BY status").fetchall())
            slots = connection.execute("SELECT count(*) - count(DISTINCT (job_id, scheduled_at)) "
                                       "FROM social.automation_runs").fetchone()[0]
            digests, distinct = connection.execute(
                "SELECT count(*), count(DISTINCT automation_run_id) FROM social.inbox_messages "
                "WHERE message_type = 'todo_digest'").fetchone()
        asyncio.run(_defer(baseline_url, n))
        baseline_seconds = _timed(_run_procrastinate_worker, baseline_url)
        with psycopg.connect(baseline_url) as connection:
            (done,) = connection.execute(
                "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'").fetchone()
    print(f"## automation_runs ({n} runs, {PROCESSES} worker processes each side, "
          f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ})\n")
    print("| Metric | Tenet automations | procrastinate no-op | Tenet / procrastinate |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| Seconds | {tenet_seconds:.1f} | {baseline_seconds:.1f} | {tenet_seconds / baseline_seconds:.2f} |")
    print(f"| Runs/s | {n / tenet_seconds:,.0f} | {n / baseline_seconds:,.0f} | "
          f"{baseline_seconds / tenet_seconds:.2f} |")
    print(f"\nChecks: runs {runs} (expected {{'succeeded': {n}}}), duplicate slots {slots}, digests {digests} with "
          f"{distinct} distinct run ids; procrastinate succeeded {done}.")
    if runs != {"succeeded": n} or slots or digests != n or distinct != n or done != n:
        raise SystemExit("a check failed: runs lost or duplicated")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
