"""Background jobs on procrastinate, each owning its unit of work.

A domain declares its jobs on a `procrastinate.Blueprint` (its `tasks.py`, named in its `Domain`) with the
`job` decorator below. The decorated body receives a `JobScope` and is the boundary: the wrapper opens the
unit of work (committed when the body returns, rolled back when it raises), takes the per-key advisory
lock when asked (one mailbox at a time, whichever worker runs it), records a `kernel.job_run` row when the
domain wants history, and lets procrastinate retry with backoff. Periodic jobs say `cron=`; procrastinate
defers each tick once however many workers run (its periodic defers are unique per task and timestamp).

The worker passes the process's `JobRuntime` (database, clock, settings) to every job through
procrastinate's `additional_context`; `run_now` runs a job's body the same way without procrastinate
(tests, the CLI). There is no global runtime.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Concatenate, ParamSpec, TypeVar

import procrastinate
import procrastinate.exceptions
import procrastinate.jobs
import procrastinate.manager
from sqlalchemy import func, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from tenet.db.database import Database
from tenet.kernel.clock import Clock
from tenet.kernel.models import JobRun
from tenet.kernel.settings import KernelSettings

log = logging.getLogger(__name__)

RUNTIME_KEY = "tenet.runtime"
# Job name -> the function that declared it (names are unique across the service).
_DECLARED: dict[str, str] = {}

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class JobRuntime:
    """What a job needs from its process: the database, the clock, the settings (the composed object)."""

    db: Database
    clock: Clock
    settings: KernelSettings


@dataclass(frozen=True)
class JobScope:
    """What a job body gets: its runtime, the moment it started, and its session when it has a unit of work."""

    runtime: JobRuntime
    now: datetime
    session: AsyncSession | None
    job_id: int | None = None
    attempt: int = 0

    @property
    def db(self) -> Database:
        return self.runtime.db

    @property
    def settings(self) -> KernelSettings:
        return self.runtime.settings

    @property
    def clock(self) -> Clock:
        return self.runtime.clock

    @property
    def uow(self) -> AsyncSession:
        if self.session is None:
            raise RuntimeError("this job was declared with unit_of_work=False; open units of work from scope.db")
        return self.session


JobBody = Callable[Concatenate[JobScope, P], Awaitable[R]]
LockKey = str | Callable[[Mapping[str, Any]], str]


@dataclass(frozen=True)
class JobSpec:
    name: str
    unit_of_work: bool
    lock: LockKey | None
    history: bool


def _lock_key(spec: JobSpec, kwargs: Mapping[str, Any]) -> str | None:
    if spec.lock is None:
        return None
    return spec.lock if isinstance(spec.lock, str) else spec.lock(kwargs)


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    return str(value)


async def _start_run(db: Database, spec: JobSpec, key: str | None, job_id: int | None, attempt: int,
                     now: datetime) -> int:
    # Its own short transaction, committed at once: a running job is visible while it runs.
    async with db.unit_of_work() as session:
        run_id: int = (await session.execute(insert(JobRun).values(
            job_name=spec.name, lock_key=key, procrastinate_job_id=job_id, attempt=attempt, status="running",
            started_at=now,
        ).returning(JobRun.id))).scalar_one()
    return run_id


async def _finish_run(db: Database, run_id: int, *, status: str, finished_at: datetime, result: Any = None,
                      error: str | None = None) -> None:
    async with db.unit_of_work() as session:
        await session.execute(update(JobRun).where(JobRun.id == run_id).values(
            status=status, finished_at=finished_at, result=_jsonable(result), error=error))


async def _advisory_xact_lock(session: AsyncSession, key: str) -> None:
    await session.execute(select(func.pg_advisory_xact_lock(func.hashtextextended(key, 0))))


async def _advisory_session_lock(connection: AsyncConnection, key: str) -> None:
    await connection.execute(text("SELECT pg_advisory_lock(hashtextextended(:key, 0))"), {"key": key})
    await connection.commit()


async def execute(spec: JobSpec, body: Callable[..., Awaitable[Any]], runtime: JobRuntime,
                  kwargs: Mapping[str, Any], *, job_id: int | None = None, attempt: int = 0) -> Any:
    """Run one job body as a boundary: lock, unit of work, run history."""
    now = runtime.clock.now()
    key = _lock_key(spec, kwargs)
    run_id = await _start_run(runtime.db, spec, key, job_id, attempt, now) if spec.history else None
    try:
        if spec.unit_of_work:
            async with runtime.db.unit_of_work() as session:
                if key is not None:
                    await _advisory_xact_lock(session, key)
                result = await body(JobScope(runtime, now, session, job_id, attempt), **kwargs)
        else:
            async with AsyncExitStack() as stack:
                if key is not None:
                    # A job of several units of work holds a session-level lock on a connection of its own (the
                    # direct one behind PgBouncer: a pooled one would lend its server session to others).
                    connection = await stack.enter_async_context(runtime.db.session_connection())
                    await _advisory_session_lock(connection, key)
                    stack.push_async_callback(connection.execute, text(
                        "SELECT pg_advisory_unlock(hashtextextended(:key, 0))"), {"key": key})
                result = await body(JobScope(runtime, now, None, job_id, attempt), **kwargs)
    except Exception as exc:
        if run_id is not None:
            summary = "".join(traceback.format_exception_only(exc)).strip()[:2000]
            try:
                await _finish_run(runtime.db, run_id, status="failed", finished_at=runtime.clock.now(), error=summary)
            except Exception:
                log.exception("could not record the failure of job %s", spec.name)
        raise
    if run_id is not None:
        await _finish_run(runtime.db, run_id, status="succeeded", finished_at=runtime.clock.now(), result=result)
    return result


def job(
    blueprint: procrastinate.Blueprint,
    *,
    name: str,
    cron: str | None = None,
    retry: procrastinate.RetryStrategy | int | None = None,
    lock: LockKey | None = None,
    unit_of_work: bool = True,
    history: bool = False,
    queueing_lock: str | None = None,
) -> Callable[[JobBody[P, R]], Any]:
    """Declare a job on `blueprint`.

    - `cron`: run periodically (procrastinate's cron syntax); the body then receives `timestamp`.
    - `retry`: attempts or a `procrastinate.RetryStrategy` (backoff); default none — periodic jobs simply
      run again at the next tick.
    - `lock`: a key (or a function of the job's arguments giving one) held as a PostgreSQL advisory lock
      while the job runs, so jobs with the same key never run at the same time.
    - `unit_of_work`: the body gets `scope.session` in one transaction; False for bodies that commit in
      batches (`scope.db.unit_of_work()` per batch).
    - `history`: record each run in `kernel.job_run` (status, timing, result or error).
    - `queueing_lock`: at most one waiting job of this task (defaults to the name for periodic jobs).
    """
    spec = JobSpec(name=name, unit_of_work=unit_of_work, lock=lock, history=history)

    def decorate(body: JobBody[P, R]) -> Any:
        owner = f"{body.__module__}.{body.__qualname__}"
        if _DECLARED.setdefault(name, owner) != owner:
            # Names are global: run history and the periodic jobs' queueing locks are keyed by them.
            raise ValueError(f"job name {name!r} is already declared by {_DECLARED[name]}")
        async def task(context: procrastinate.JobContext, **kwargs: Any) -> Any:
            runtime = context.additional_context.get(RUNTIME_KEY)
            if not isinstance(runtime, JobRuntime):
                raise RuntimeError("no job runtime: jobs run inside `tenet worker` (tenet.worker.run_worker)")
            job_id = context.job.id if context.job else None
            attempt = context.job.attempts if context.job else 0
            return await execute(spec, body, runtime, kwargs, job_id=job_id, attempt=attempt)

        task.__name__ = body.__name__
        task.__qualname__ = body.__qualname__
        task.__doc__ = body.__doc__
        registered = blueprint.task(
            name=name, pass_context=True, retry=retry if retry is not None else False,
            queueing_lock=queueing_lock if queueing_lock is not None else (f"periodic:{name}" if cron else None),
        )(task)
        if cron:
            registered = blueprint.periodic(cron=cron)(registered)  # type: ignore[arg-type]  # takes `timestamp`
        # What `run_now` needs to run the body the way the worker does.
        setattr(registered, "tenet_spec", spec)  # noqa: B010
        setattr(registered, "tenet_body", body)  # noqa: B010
        return registered

    return decorate


async def run_now(task: Any, runtime: JobRuntime, **kwargs: Any) -> Any:
    """Run a declared job's body now, in this process, as the worker would (lock, unit of work, history)."""
    return await execute(task.tenet_spec, task.tenet_body, runtime, kwargs)


def runtime_context(runtime: JobRuntime) -> dict[str, Any]:
    """The `additional_context` a procrastinate worker needs to run Tenet's jobs."""
    return {RUNTIME_KEY: runtime}


async def count_jobs(connection: AsyncConnection) -> dict[tuple[str, str], int]:
    """Background jobs per (queue, status), read from procrastinate's table (for /metrics)."""
    rows = await connection.execute(text(
        "SELECT queue_name, status::text, count(*) FROM procrastinate_jobs GROUP BY 1, 2"))
    return {(queue, status): count for queue, status, count in rows}


# A job is ready once it is `todo` and its scheduled time (if any) has passed: procrastinate's own fetch condition,
# on the database's clock as procrastinate's is. It has been ready since the later of that time and its last
# entry into `todo` (deferred, deferred again for a retry, retried by hand). Only `todo` rows are read (the partial
# indexes on status = 'todo'), and their few events by job id: the finished jobs never count.
_READY_JOBS = """
    SELECT j.queue_name, count(*) AS ready,
           coalesce(extract(epoch FROM now() - min(greatest(j.scheduled_at, entered.at))), 0) AS oldest_seconds
      FROM procrastinate_jobs j
      LEFT JOIN LATERAL (SELECT max(e.at) AS at FROM procrastinate_events e
                          WHERE e.job_id = j.id AND e.type IN ('deferred', 'deferred_for_retry', 'retried')
                        ) entered ON true
     WHERE j.status = 'todo' AND (j.scheduled_at IS NULL OR j.scheduled_at <= now())
     GROUP BY j.queue_name"""


async def ready_jobs(connection: AsyncConnection) -> dict[str, tuple[int, float]]:
    """Per queue: how many jobs are ready to run now and how long (seconds) the oldest of them has waited (for
    /metrics: a queue whose oldest job keeps waiting is a worker short, or none running). The default queue is
    always there, with 0 and 0 when empty, so its graphs have no gaps."""
    found = {queue: (int(ready), max(0.0, float(oldest)))
             for queue, ready, oldest in await connection.execute(text(_READY_JOBS))}
    return {procrastinate.jobs.DEFAULT_QUEUE: (0, 0.0), **found}


# --- stalled jobs ----------------------------------------------------------------------------------
# A worker killed while it runs a job (SIGKILL, the OOM killer, its machine lost) cannot give the job back:
# procrastinate leaves it `doing` for ever and never retries it. Every worker records a heartbeat; the jobs
# of a worker whose heartbeat is older than the stalled bound go back to the queue (procrastinate's own
# `get_stalled_jobs` and `retry_job`), one recovery at a time across all workers (an advisory lock), and
# their `kernel.job_run` rows say how the attempt ended instead of `running` for ever.
STALLED_RECOVERY_LOCK = "kernel.recover_stalled_jobs"
ABANDONED = "abandoned: the worker running it stopped (no heartbeat); the job was put back in the queue"


async def recover_stalled_jobs(job_manager: procrastinate.manager.JobManager, db: Database, *,
                               stalled_after: float, now: datetime) -> list[int]:
    """Put the jobs of workers silent for more than `stalled_after` seconds back in the queue; answer their ids.

    A periodic job's stalled run whose next tick already waits (the queueing lock allows one) is closed as
    failed instead: the waiting one does its work."""
    async with db.unit_of_work() as session:
        locked = (await session.execute(text("SELECT pg_try_advisory_xact_lock(hashtextextended(:key, 0))"),
                                        {"key": STALLED_RECOVERY_LOCK})).scalar_one()
        if not locked:
            return []  # another worker is recovering right now
        retried: list[int] = []
        closed: list[int] = []
        for stalled in await job_manager.get_stalled_jobs(seconds_since_heartbeat=stalled_after):
            assert stalled.id is not None
            try:
                await job_manager.retry_job(stalled)
                retried.append(stalled.id)
                log.warning("retried stalled job %s (%s): its worker stopped sending heartbeats", stalled.id,
                            stalled.task_name)
            except procrastinate.exceptions.UniqueViolation:
                await job_manager.finish_job(stalled, status=procrastinate.jobs.Status.FAILED, delete_job=False)
                closed.append(stalled.id)
                log.warning("closed stalled job %s (%s) as failed: its next run already waits", stalled.id,
                            stalled.task_name)
            except procrastinate.exceptions.ConnectorException:
                log.info("stalled job %s ended before it could be retried", stalled.id)
        if retried or closed:
            await session.execute(update(JobRun).where(
                JobRun.procrastinate_job_id.in_(retried + closed), JobRun.status == "running",
            ).values(status="failed", finished_at=now, error=ABANDONED))
        await job_manager.prune_stalled_workers(stalled_after)
    return retried
