"""Runs of automations, executed exactly once (spec 000 §F; SOC-INV-20, SOC-INV-21): the scheduler and the drainer.

Misfires (D-19). When the scheduler finds `next_run_at <= now` it computes every slot in [next_run_at, now],
materialises only the latest, and only if it is within the job type's grace (digest 12 h, reminder 1 h,
todo_from_schedule 12 h), recording how many slots were skipped in `missed_slots`.

Exactly once. Runs are materialised with `INSERT .. ON CONFLICT (job_id, scheduled_at) DO NOTHING` by a
scheduler that locks the due jobs FOR UPDATE SKIP LOCKED, so any number of schedulers at once make one run per
slot. A drainer claims queued runs (`FOR UPDATE SKIP LOCKED`, a short committed transaction: attempt + 1, a
claim token, a lease), then executes the batch in one transaction, each run in a savepoint that first locks the run
row FOR UPDATE conditioned on its claim, writes the effects and marks it succeeded: effects and success commit
together or not at all (SOC-INV-21). A failure rolls the run's effects back to its savepoint and puts it back to
queued with an exponential backoff (D-20), or fails it after `max_attempts`, in the same transaction. A worker
that dies mid-batch releases the row locks with its connection; once the lease has expired the scheduler's
recovery (which skips locked rows, so never a live run) re-queues its runs, and another drainer finishes them.

A manual run (run-now) is claimed by its own job, deferred by the request that made it (`tenet.social.tasks`),
so it starts as soon as a worker is free instead of at the next minute's drain.
"""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import time as monotonic_time
import uuid
from datetime import datetime, timedelta
from typing import Any

import procrastinate
import psycopg
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.db.database import Database
from tenet.kernel.clock import Clock
from tenet.kernel.db_errors import database_away, once_the_database_answers
from tenet.kernel.statements import statements
from tenet.social.automations.effects import EFFECTS, Claim, Effect, PermanentError
from tenet.social.automations.registry import REGISTRY, slot_of
from tenet.social.models import AutomationJob

log = logging.getLogger(__name__)

BATCH = 500
CLAIM_BATCH = 20
MAX_BACKOFF = 3600
# The job that runs one manual run (tenet.social.tasks), as the worker registers it (each domain's blueprint under
# its name: tenet.worker), and the queue it is deferred to (a worker may be given it alone).
RUN_NOW_JOB = "social_automation_run_now"
RUN_NOW_TASK = f"social:{RUN_NOW_JOB}"
RUN_NOW_QUEUE = "social_run_now"
# Only builds the deferral's statement (procrastinate's own SQL): it runs on the request's connection, never on a
# pool of this app's.
_DEFERRER = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=""))


# --- the scheduler: recover, materialise ----------------------------------------------------------------


def backoff(attempt: int, base_seconds: int) -> timedelta:
    seconds = min(base_seconds * 2 ** max(attempt - 1, 0), MAX_BACKOFF)
    return timedelta(seconds=seconds * random.uniform(0.8, 1.2))


_FAILED_MESSAGE = """
    INSERT INTO social.inbox_messages (id, recipient_id, message_type, content, related_type, related_id, actionable,
                                       status, dedup_key, created_at)
    SELECT gen_random_uuid(), j.owner_id, 'automation_failed',
           jsonb_build_object('job_name', j.name, 'run_id', r.id::text, 'error_code', r.error_code),
           'automation_job', j.id, false, 'pending', 'automation_failed:' || r.id::text, %(now)s
      FROM social.automation_runs r JOIN social.automation_jobs j ON j.id = r.job_id
     WHERE r.id = ANY(%(ids)s) AND r.status = 'failed'
    ON CONFLICT (recipient_id, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
"""
_RECOVER = """
    UPDATE social.automation_runs SET
           status = CASE WHEN attempt >= max_attempts THEN 'failed' ELSE 'queued' END,
           available_at = %(now)s + make_interval(secs => least(%(base)s * power(2, greatest(attempt - 1, 0)), 3600)),
           finished_at = CASE WHEN attempt >= max_attempts THEN %(now)s END,
           claimed_by = NULL, lease_expires_at = NULL, error_code = 'WORKER_LOST',
           error_message = 'the worker stopped during the run'
     WHERE id IN (SELECT id FROM social.automation_runs WHERE status = 'running' AND lease_expires_at < %(now)s
                   ORDER BY id LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
    RETURNING id
"""


async def recover(session: AsyncSession, *, now: datetime, retry_base_seconds: int) -> int:
    """Runs whose worker died: lease expired and row not locked (a live execution holds it FOR UPDATE)."""
    run = await statements(session)
    moved = [row["id"] for row in await run.all(_RECOVER, {"now": now, "base": retry_base_seconds, "limit": BATCH})]
    if moved:
        await run.execute(_FAILED_MESSAGE, {"ids": moved, "now": now})
    return len(moved)


_DUE_JOBS = """
    SELECT j.id, j.job_type, j.schedule_type, j.schedule_time, j.schedule_weekday, j.next_run_at,
           coalesce(p.settings #>> '{preferences,timezone}', %(tz)s) AS zone, u.status AS owner_status
      FROM social.automation_jobs j
      JOIN iam.user_account u ON u.id = j.owner_id
      LEFT JOIN social.profiles p ON p.id = j.owner_id
     WHERE j.status = 'active' AND j.next_run_at <= %(now)s
     ORDER BY j.next_run_at, j.id LIMIT %(limit)s FOR UPDATE OF j SKIP LOCKED
"""
_MATERIALISE = """
    INSERT INTO social.automation_runs (id, job_id, scheduled_at, trigger, status, attempt, max_attempts,
                                        available_at, missed_slots, created_at)
    VALUES (%(id)s, %(job)s, %(at)s, 'schedule', 'queued', 0, %(max)s, %(at)s, %(missed)s, %(now)s)
    ON CONFLICT (job_id, scheduled_at) DO NOTHING
"""
_MOVE_NEXT_RUN = "UPDATE social.automation_jobs SET next_run_at = %(at)s WHERE id = %(id)s"


async def materialise(session: AsyncSession, *, now: datetime, default_timezone: str, max_attempts: int) -> int:
    """One batch of due jobs (SKIP LOCKED): their latest due slot within grace as a queued run, next_run_at
    moved past now. Answers the number of jobs handled."""
    run = await statements(session)
    rows = await run.all(_DUE_JOBS, {"now": now, "tz": default_timezone, "limit": BATCH})
    runs: list[dict[str, Any]] = []
    moves: list[dict[str, Any]] = []
    for row in rows:
        probe = AutomationJob(schedule_type=row["schedule_type"], schedule_time=row["schedule_time"],
                              schedule_weekday=row["schedule_weekday"])
        slots = [row["next_run_at"]]
        while len(slots) < 1000:
            following = slot_of(probe, slots[-1], row["zone"])
            if following > now:
                break
            slots.append(following)
        latest = slots[-1]
        grace = REGISTRY[row["job_type"]].grace
        if row["owner_status"] == "active" and now - latest <= grace:
            runs.append({"id": uuid.uuid4(), "job": row["id"], "at": latest, "max": max_attempts,
                         "missed": len(slots) - 1, "now": now})
        elif len(slots) > 0:
            log.info("automation slots skipped", extra={"job_id": str(row["id"]), "slots": len(slots)})
        moves.append({"id": row["id"], "at": slot_of(probe, now, row["zone"])})
    if not rows:
        return 0
    # The batch's inserts and moves travel together: one round trip, not one per job.
    async with run.pipeline():
        for values in runs:
            await run.execute(_MATERIALISE, values)
        for values in moves:
            await run.execute(_MOVE_NEXT_RUN, values)
    return len(rows)


async def schedule(db: Database, *, now: datetime, default_timezone: str, max_attempts: int,
                   retry_base_seconds: int) -> dict[str, int]:
    """The scheduler's pass: recover dead workers' runs, then materialise every due slot, batch by batch."""
    async with db.unit_of_work() as session:
        recovered = await recover(session, now=now, retry_base_seconds=retry_base_seconds)
    jobs = 0
    while True:
        async with db.unit_of_work() as session:
            handled = await materialise(session, now=now, default_timezone=default_timezone,
                                        max_attempts=max_attempts)
        jobs += handled
        if handled < BATCH:
            return {"recovered": recovered, "jobs": jobs}


# --- a manual run: deferred, then claimed by its own job ------------------------------------------------


async def defer_manual_run(session: AsyncSession, run_id: uuid.UUID) -> None:
    """Queue the job that runs `run_id`, in the unit of work's transaction: the job row and its NOTIFY (the
    workers listen) take effect when the run is committed, and a rolled-back request leaves neither."""
    connection = await session.connection()
    driver = (await connection.get_raw_connection()).driver_connection
    if not isinstance(driver, psycopg.AsyncConnection):
        raise TypeError("deferring a job in the unit of work needs the psycopg async driver")
    await _DEFERRER.configure_task(RUN_NOW_TASK, queue=RUN_NOW_QUEUE, connection=driver).defer_async(
        run_id=str(run_id))


async def run_manual(db: Database, *, run_id: uuid.UUID, clock: Clock, default_timezone: str, lease_seconds: int,
                     retry_base_seconds: int) -> dict[str, int]:
    """The first attempt of one manual run, at once. Nothing to do when a drainer took it first (or the job was
    deleted); a retry is the drainers' (its backoff)."""
    async with db.unit_of_work() as session:
        claims = await claim(session, now=clock.now(), lease_seconds=lease_seconds, manual_run=run_id)
    outcomes: dict[str, int] = {}
    if claims:
        for outcome in await _execute_or_give_back(db, claims, clock=clock, default_timezone=default_timezone,
                                                   retry_base_seconds=retry_base_seconds):
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return outcomes


# --- the drainer: claim, execute -----------------------------------------------------------------------


def worker_token() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


_CLAIM = """
    UPDATE social.automation_runs r
       SET status = 'running', attempt = r.attempt + 1, started_at = %(now)s, claimed_by = %(token)s,
           lease_expires_at = %(now)s + make_interval(secs => %(lease)s)
     WHERE r.id IN (SELECT id FROM social.automation_runs WHERE {due}
                     ORDER BY available_at, id LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
    RETURNING r.id, r.job_id, r.attempt, r.scheduled_at
"""
_CLAIM_DUE = _CLAIM.format(due="status = 'queued' AND available_at <= %(now)s")
# A manual run's own job claims it whatever the clocks of the request's and the worker's hosts say: it is due by
# definition. Only its first attempt: a retry waits for its backoff and the drainers.
_CLAIM_MANUAL = _CLAIM.format(due="id = %(run)s AND status = 'queued' AND attempt = 0 AND trigger = 'manual'")


async def claim(session: AsyncSession, *, now: datetime, lease_seconds: int, limit: int = CLAIM_BATCH,
                manual_run: uuid.UUID | None = None) -> list[Claim]:
    """Claim due queued runs (or the first attempt of one manual run): attempt + 1, a claim token, a lease."""
    token = worker_token()
    sql = _CLAIM_DUE if manual_run is None else _CLAIM_MANUAL
    rows = await (await statements(session)).all(sql, {"now": now, "token": token, "lease": lease_seconds,
                                                       "limit": limit, "run": manual_run})
    return [Claim(r["id"], r["job_id"], r["attempt"], r["scheduled_at"], token) for r in rows]


async def execute_batch(db: Database, claims: list[Claim], *, clock: Clock, default_timezone: str,
                        retry_base_seconds: int, effects: dict[str, Effect] | None = None) -> list[str]:
    """Claimed runs in one transaction, each in a savepoint: a run's effects and its success commit together
    (with the batch) or not at all; a run that fails is rolled back to its savepoint and put back to queued (or
    failed) in the same transaction. One commit per batch instead of one per run. A worker that dies loses the
    whole batch's work, and the recovery re-queues each run (its attempt consumed). Outcomes: succeeded,
    retried, failed, lost (the claim was recovered meanwhile) or gone (job deleted)."""
    outcomes = []
    async with db.unit_of_work() as session:
        for claimed in claims:
            try:
                async with session.begin_nested():
                    outcome = await _run_one(session, claimed, clock=clock, default_timezone=default_timezone,
                                             effects=effects or EFFECTS)
            except Exception as exc:
                if database_away(exc):
                    raise  # not the run's failure: the batch is lost, and its claims are given back (drain)
                permanent = isinstance(exc, PermanentError)
                code = exc.code if isinstance(exc, PermanentError) else "JOB_FAILED"
                message = (str(exc) or type(exc).__name__)[:2000] if permanent else \
                    f"{type(exc).__name__}: {exc}"[:2000]
                if not permanent:
                    log.warning("automation run failed",
                                extra={"run_id": str(claimed.run_id), "error": type(exc).__name__})
                outcome = await _record_failure(session, claimed, code=code, message=message, permanent=permanent,
                                                now=clock.now(), retry_base_seconds=retry_base_seconds)
            outcomes.append(outcome)
    return outcomes


# The owner's account first (the global lock order), in the statement that finds it.
_OWNER_ACTIVE = """
    SELECT u.status = 'active' AS active FROM social.automation_jobs j JOIN iam.user_account u ON u.id = j.owner_id
     WHERE j.id = %(j)s FOR SHARE OF u
"""
_HOLD_CLAIM = """
    SELECT 1 FROM social.automation_runs
     WHERE id = %(id)s AND status = 'running' AND attempt = %(a)s AND claimed_by = %(t)s FOR UPDATE
"""
_SUCCEED = """
    UPDATE social.automation_runs SET status = 'succeeded', result = CAST(%(r)s AS jsonb), finished_at = %(now)s,
           claimed_by = NULL, lease_expires_at = NULL
     WHERE id = %(id)s AND status = 'running' AND attempt = %(a)s AND claimed_by = %(t)s RETURNING id
"""


async def _run_one(session: AsyncSession, claimed: Claim, *, clock: Clock, default_timezone: str,
                   effects: dict[str, Effect]) -> str:
    now = clock.now()
    run = await statements(session)
    owner = await run.one(_OWNER_ACTIVE, {"j": claimed.job_id})
    if owner is None:
        return "gone"
    # A concurrent DELETE of the job waits for this run (FOR KEY SHARE), and then takes its runs with it.
    job = (await session.scalars(select(AutomationJob).where(AutomationJob.id == claimed.job_id)
                                 .with_for_update(key_share=True, read=True)
                                 .execution_options(populate_existing=True))).one_or_none()
    if job is None:
        return "gone"
    claim_of = {"id": claimed.run_id, "a": claimed.attempt, "t": claimed.token}
    if await run.value(_HOLD_CLAIM, claim_of) is None:
        return "lost"
    if owner["active"]:
        result = await effects[job.job_type](session, job, claimed, now, default_timezone)
    else:
        result = {"skipped": "owner not active"}
    done = await run.value(_SUCCEED, {**claim_of, "r": json.dumps(result, default=str), "now": clock.now()})
    if done is None:
        raise RuntimeError("the claim was lost during the run")
    return "succeeded"


_FAIL_OR_RETRY = """
    UPDATE social.automation_runs SET
           status = CASE WHEN %(permanent)s OR attempt >= max_attempts THEN 'failed' ELSE 'queued' END,
           finished_at = CASE WHEN %(permanent)s OR attempt >= max_attempts THEN CAST(%(now)s AS timestamptz) END,
           available_at = %(available)s, claimed_by = NULL, lease_expires_at = NULL,
           error_code = %(code)s, error_message = %(message)s
     WHERE id = %(id)s AND status = 'running' AND attempt = %(a)s AND claimed_by = %(t)s
    RETURNING status
"""
_DISABLE_JOB = """
    UPDATE social.automation_jobs SET status = 'disabled', next_run_at = NULL, version = version + 1,
           updated_at = %(now)s WHERE id = %(j)s AND status = 'active'
"""


async def _record_failure(session: AsyncSession, claimed: Claim, *, code: str, message: str, permanent: bool,
                          now: datetime, retry_base_seconds: int) -> str:
    run = await statements(session)
    status = await run.value(_FAIL_OR_RETRY, {
        "permanent": permanent, "now": now, "available": now + backoff(claimed.attempt, retry_base_seconds),
        "code": code, "message": message, "id": claimed.run_id, "a": claimed.attempt, "t": claimed.token})
    if status is None:
        return "lost"
    if status == "failed":
        await run.execute(_FAILED_MESSAGE, {"ids": [claimed.run_id], "now": now})
        if permanent:
            await run.execute(_DISABLE_JOB, {"j": claimed.job_id, "now": now})
    return "failed" if status == "failed" else "retried"


_GIVE_BACK = """
    UPDATE social.automation_runs SET status = 'queued', attempt = attempt - 1, available_at = %(now)s,
           claimed_by = NULL, lease_expires_at = NULL
     WHERE id = ANY(%(ids)s) AND status = 'running' AND claimed_by = %(t)s
"""


async def give_back(db: Database, claims: list[Claim], *, now: datetime) -> None:
    """Claims whose batch the database lost (rolled back: nothing of them was done) go back to the queue with
    their attempt returned, once the database answers again, instead of waiting out their lease and spending an
    attempt: an outage is not the run's failure. A worker that dies cannot give back; its claims are recovered
    after the lease, the attempt spent (which bounds a run that kills its worker)."""
    async def attempt() -> None:
        async with db.unit_of_work() as session:
            await (await statements(session)).execute(_GIVE_BACK, {
                "ids": [c.run_id for c in claims], "t": claims[0].token, "now": now})

    await once_the_database_answers(attempt, what=f"giving back {len(claims)} automation runs")


async def drain(db: Database, *, clock: Clock, default_timezone: str, lease_seconds: int, retry_base_seconds: int,
                budget_seconds: float = 50.0, effects: dict[str, Effect] | None = None) -> dict[str, int]:
    """Claim and execute queued runs until none is due or the time budget is spent."""
    outcomes: dict[str, int] = {}
    deadline = monotonic_time.monotonic() + budget_seconds
    while monotonic_time.monotonic() < deadline:
        async with db.unit_of_work() as session:
            claims = await claim(session, now=clock.now(), lease_seconds=lease_seconds)
        if not claims:
            break
        for outcome in await _execute_or_give_back(db, claims, clock=clock, default_timezone=default_timezone,
                                                   retry_base_seconds=retry_base_seconds, effects=effects):
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return outcomes


async def _execute_or_give_back(db: Database, claims: list[Claim], *, clock: Clock, default_timezone: str,
                                retry_base_seconds: int, effects: dict[str, Effect] | None = None) -> list[str]:
    try:
        return await execute_batch(db, claims, clock=clock, default_timezone=default_timezone,
                                   retry_base_seconds=retry_base_seconds, effects=effects)
    except Exception as exc:
        if database_away(exc):
            await give_back(db, claims, now=clock.now())
        raise
