"""Automations (spec 000 §C.7, §F; SOC-INV-19..21): daily or weekly jobs of a user, runs executed exactly once.

Slots. A job runs at `schedule_time` (wall time) in its owner's `preferences.timezone`, every day or on one ISO
weekday. The next slot after an instant is computed in Python with zoneinfo (fold 0): a wall time that does not
exist runs with the offset before the gap (02:30 on the spring-forward night runs at 03:30 new time), one that
occurs twice runs once, at its first occurrence (D-18, RFC 5545's rule, as for items). Changing the time zone
in settings recomputes `next_run_at` of the owner's active jobs in the same transaction.

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
"""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import time as monotonic_time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any, cast
from zoneinfo import ZoneInfo

import anyio
from sqlalchemy import Table, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.db.database import Database
from tenet.kernel import audit
from tenet.kernel.audit import Actor
from tenet.kernel.clock import Clock
from tenet.kernel.db_errors import add_unique
from tenet.kernel.errors import DomainError, PreconditionFailed
from tenet.kernel.statements import statements
from tenet.kernel.transitions import Refusal, transition
from tenet.social import errors, items, lifecycles, recurrence
from tenet.social.common import require_active_accounts
from tenet.social.models import RUN_SLOT_UNIQUE, AutomationJob, AutomationRun

log = logging.getLogger(__name__)

BATCH = 500
CLAIM_BATCH = 20
MAX_BACKOFF = 3600


# --- the registry of job types ------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    kind: type
    default: Any
    low: int | None = None
    high: int | None = None
    choices: tuple[str, ...] = ()

    def schema(self) -> dict[str, Any]:
        kind = {bool: "boolean", int: "integer", str: "string"}[self.kind]
        out: dict[str, Any] = {"type": kind, "default": self.default}
        if self.low is not None:
            out.update(minimum=self.low, maximum=self.high)
        if self.choices:
            out["enum"] = list(self.choices)
        return out


@dataclass(frozen=True)
class JobType:
    name: str
    description: str
    target_types: tuple[str, ...]
    params: dict[str, Param]
    grace: timedelta

    def params_schema(self) -> dict[str, Any]:
        return {"type": "object", "additionalProperties": False,
                "properties": {name: p.schema() for name, p in self.params.items()}}


REGISTRY: dict[str, JobType] = {t.name: t for t in (
    JobType("todo_digest", "An inbox message summarising your pending todos due soon and the overdue ones.",
            ("user",), {"include_overdue": Param(bool, True), "horizon_days": Param(int, 1, 1, 14),
                        "max_items": Param(int, 20, 1, 50), "skip_if_empty": Param(bool, True)},
            timedelta(hours=12)),
    JobType("schedule_reminder", "Reminds the owner and the subscribers (notify level other than none) of "
            "occurrences starting within the next hours_ahead hours.",
            ("user", "schedule_item"), {"hours_ahead": Param(int, 24, 1, 72)}, timedelta(hours=1)),
    JobType("todo_from_schedule", "Extracts todos for the occurrences of your items (owned or subscribed) that "
            "start tomorrow in your time zone.",
            ("user",), {"priority": Param(str, "medium", choices=("low", "medium", "high", "urgent"))},
            timedelta(hours=12)),
)}


def _invalid(loc: list[str], msg: str) -> errors.AutomationInvalid:
    return errors.AutomationInvalid(f"{'.'.join(loc)}: {msg}",
                                    errors=[{"loc": ["body", *loc], "msg": msg, "type": "value_error"}])


def validated_params(job_type: str, params: dict[str, Any]) -> dict[str, Any]:
    kind = REGISTRY.get(job_type)
    if kind is None:
        raise _invalid(["job_type"], f"one of {', '.join(REGISTRY)}")
    out = {}
    for name, value in params.items():
        spec = kind.params.get(name)
        if spec is None:
            raise _invalid(["params", name], f"unknown parameter of {job_type}")
        out_of_range = (spec.low is not None and spec.high is not None and isinstance(value, int)
                        and not spec.low <= value <= spec.high)
        if type(value) is not spec.kind or out_of_range or (spec.choices and value not in spec.choices):
            raise _invalid(["params", name], f"must match {spec.schema()}")
        out[name] = value
    return out


def param(job: AutomationJob, name: str) -> Any:
    return job.params.get(name, REGISTRY[job.job_type].params[name].default)


# --- slots ---------------------------------------------------------------------------------------------


def next_slot(after: datetime, *, schedule_type: str, schedule_time: time, weekday: int | None,
              zone: str) -> datetime:
    """The first slot strictly after `after` (UTC): wall time `schedule_time` in `zone`, fold 0."""
    tz = ZoneInfo(zone)
    first = after.astimezone(tz).date()
    for delta in range(9):
        day = first + timedelta(days=delta)
        if schedule_type == "weekly" and day.isoweekday() != weekday:
            continue
        slot = datetime.combine(day, schedule_time, tzinfo=tz).astimezone(UTC)
        if slot > after:
            return slot
    raise AssertionError("a slot exists within 9 days")


def _slot_of(job: AutomationJob, after: datetime, zone: str) -> datetime:
    return next_slot(after, schedule_type=job.schedule_type, schedule_time=job.schedule_time,
                     weekday=job.schedule_weekday, zone=zone)


async def zone_of(session: AsyncSession, owner_id: uuid.UUID, default_timezone: str) -> str:
    return await items.default_timezone_of(session, owner_id, default_timezone)


# --- commands ------------------------------------------------------------------------------------------


def _refusal(refusal: Refusal[AutomationJob]) -> DomainError:
    if refusal.current is None:
        return errors.AutomationNotFound()
    if refusal.reason == "version":
        return PreconditionFailed(current_version=refusal.version)
    return errors.AutomationStateConflict(current_status=refusal.status)


async def _check_target(session: AsyncSession, owner_id: uuid.UUID, job_type: str, target_type: str,
                        target_id: uuid.UUID | None) -> uuid.UUID:
    if target_type not in REGISTRY[job_type].target_types:
        raise _invalid(["target_type"], f"{job_type} takes {', '.join(REGISTRY[job_type].target_types)}")
    if target_type == "user":
        if target_id not in (None, owner_id):
            raise errors.AutomationTargetNotFound()
        return owner_id
    if target_id is None:
        raise _invalid(["target_id"], "an item id is needed")
    try:
        decision = await items.decide(session, target_id, owner_id)
    except errors.ScheduleItemNotFound:
        raise errors.AutomationTargetNotFound() from None
    decision.require(items.EDIT)
    return target_id


async def create_job(session: AsyncSession, *, owner_id: uuid.UUID, name: str, job_type: str, target_type: str,
                     target_id: uuid.UUID | None, params: dict[str, Any], schedule_type: str, schedule_time: time,
                     schedule_weekday: int | None, status: str, limit: int, default_timezone: str,
                     now: datetime) -> AutomationJob:
    params = validated_params(job_type, params)
    if (schedule_type == "weekly") != (schedule_weekday is not None):
        raise _invalid(["schedule_weekday"], "a weekly job needs a weekday (1 = Monday .. 7), a daily one none")
    await require_active_accounts(session, [owner_id])
    # The owner's profile row serialises the count of their jobs.
    await session.execute(text("SELECT 1 FROM social.profiles WHERE id = :u FOR UPDATE"), {"u": owner_id})
    count = (await session.execute(text("SELECT count(*) FROM social.automation_jobs WHERE owner_id = :u"),
                                   {"u": owner_id})).scalar_one()
    if count >= limit:
        raise errors.AutomationLimitReached(limit=limit)
    target = await _check_target(session, owner_id, job_type, target_type, target_id)
    job = AutomationJob(id=uuid.uuid4(), owner_id=owner_id, name=name, job_type=job_type, target_type=target_type,
                        target_id=target, params=params, schedule_type=schedule_type, schedule_time=schedule_time,
                        schedule_weekday=schedule_weekday, status=status, version=1, created_at=now, updated_at=now,
                        created_by=owner_id)
    zone = await zone_of(session, owner_id, default_timezone)
    job.next_run_at = _slot_of(job, now, zone) if status == "active" else None
    session.add(job)
    await session.flush()
    await audit.record(session, action="social.automation.created", actor=Actor.user(owner_id),
                       subject=("automation_job", job.id), now=now, data={"job_type": job_type})
    return job


async def _own(session: AsyncSession, job_id: uuid.UUID, owner_id: uuid.UUID) -> AutomationJob:
    job = (await session.scalars(select(AutomationJob).where(AutomationJob.id == job_id).with_for_update()
                                 .execution_options(populate_existing=True))).one_or_none()
    if job is None or job.owner_id != owner_id:
        raise errors.AutomationNotFound()
    return job


async def update_job(session: AsyncSession, *, job_id: uuid.UUID, owner_id: uuid.UUID, changes: dict[str, Any],
                     expected_version: int | None, default_timezone: str, now: datetime) -> AutomationJob:
    job = await _own(session, job_id, owner_id)
    if expected_version is not None and job.version != expected_version:
        raise PreconditionFailed(current_version=job.version)
    values = dict(changes)
    if "params" in values:
        values["params"] = validated_params(job.job_type, values["params"])
    schedule_type = values.get("schedule_type", job.schedule_type)
    weekday = values.get("schedule_weekday", job.schedule_weekday if "schedule_type" not in values else None)
    if "schedule_weekday" in values or "schedule_type" in values:
        values["schedule_weekday"] = weekday
    if (schedule_type == "weekly") != (weekday is not None):
        raise _invalid(["schedule_weekday"], "a weekly job needs a weekday (1 = Monday .. 7), a daily one none")
    if "target_type" in values or "target_id" in values:
        values["target_id"] = await _check_target(session, owner_id, job.job_type,
                                                  values.get("target_type", job.target_type),
                                                  values.get("target_id", job.target_id))
    if job.status == "active" and set(values) & {"schedule_type", "schedule_time", "schedule_weekday"}:
        probe = AutomationJob(schedule_type=schedule_type, schedule_time=values.get("schedule_time", job.schedule_time),
                              schedule_weekday=weekday)
        values["next_run_at"] = _slot_of(probe, now, await zone_of(session, owner_id, default_timezone))
    # The job row is locked (`_own`): the version cannot move under us; the condition states what we read.
    statement = (cast(Table, AutomationJob.__table__).update()
                 .where(AutomationJob.id == job_id, AutomationJob.version == job.version)
                 .values(version=AutomationJob.version + 1, updated_at=now, **values))
    if getattr(await session.execute(statement), "rowcount", 0) != 1:
        raise PreconditionFailed(current_version=job.version)
    await audit.record(session, action="social.automation.updated", actor=Actor.user(owner_id),
                       subject=("automation_job", job_id), now=now, data={"fields": sorted(changes)})
    refreshed = await session.get(AutomationJob, job_id, populate_existing=True)
    assert refreshed is not None
    return refreshed


async def set_enabled(session: AsyncSession, *, job_id: uuid.UUID, owner_id: uuid.UUID, enabled: bool,
                      default_timezone: str, now: datetime) -> AutomationJob:
    """Enabling starts from the next slot after now (no catch-up of the disabled period)."""
    job = await _own(session, job_id, owner_id)
    values: dict[str, datetime | None]
    if enabled:
        values = {"next_run_at": _slot_of(job, now, await zone_of(session, owner_id, default_timezone)),
                  "updated_at": now}
    else:
        values = {"next_run_at": None, "updated_at": now}
    moved = await transition(session, lifecycles.AUTOMATION_JOB, "enable" if enabled else "disable",
                             model=AutomationJob, id=job_id, values=values, refuse=_refusal)
    await audit.record(session, action=f"social.automation.{'enabled' if enabled else 'disabled'}",
                       actor=Actor.user(owner_id), subject=("automation_job", job_id), now=now)
    return moved


async def delete_job(session: AsyncSession, *, job_id: uuid.UUID, owner_id: uuid.UUID, now: datetime) -> None:
    await _own(session, job_id, owner_id)
    await session.execute(text("DELETE FROM social.automation_jobs WHERE id = :id"), {"id": job_id})
    await audit.record(session, action="social.automation.deleted", actor=Actor.user(owner_id),
                       subject=("automation_job", job_id), now=now)


async def run_now(session: AsyncSession, *, job_id: uuid.UUID, owner_id: uuid.UUID, max_attempts: int,
                  now: datetime) -> AutomationRun:
    """A manual run for this instant; the worker's drainers execute it (within a minute). One manual run of a
    job at a time: while one is queued or running (a retry included), another is AUTOMATION_RUN_IN_PROGRESS. The
    job's row lock (`_own`, FOR UPDATE) queues concurrent requests, so each sees the run the one before it
    committed."""
    await _own(session, job_id, owner_id)
    pending = (await session.execute(text("""
        SELECT id, status FROM social.automation_runs
         WHERE job_id = :j AND trigger = 'manual' AND status IN ('queued', 'running')
         ORDER BY created_at LIMIT 1"""), {"j": job_id})).first()
    if pending is not None:
        raise errors.AutomationRunInProgress(run_id=str(pending.id), current_status=pending.status)
    run = AutomationRun(id=uuid.uuid4(), job_id=job_id, scheduled_at=now, trigger="manual", status="queued",
                        attempt=0, max_attempts=max_attempts, available_at=now, missed_slots=0, created_at=now)
    await add_unique(session, run, on_violation={RUN_SLOT_UNIQUE: lambda: errors.AutomationStateConflict(
        "A run for this instant exists already", current_status="queued")})
    await audit.record(session, action="social.automation.run_requested", actor=Actor.user(owner_id),
                       subject=("automation_run", run.id), scope=("automation_job", job_id), now=now)
    return run


async def reschedule_owner(session: AsyncSession, *, owner_id: uuid.UUID, default_timezone: str,
                           now: datetime) -> int:
    """The owner's time zone changed: every active job's next slot, from now, in the new zone."""
    jobs = (await session.scalars(select(AutomationJob).where(
        AutomationJob.owner_id == owner_id, AutomationJob.status == "active").order_by(AutomationJob.id)
        .with_for_update().execution_options(populate_existing=True))).all()
    zone = await zone_of(session, owner_id, default_timezone)
    for job in jobs:
        await session.execute(text("UPDATE social.automation_jobs SET next_run_at = :at, updated_at = :now "
                                   "WHERE id = :id"), {"at": _slot_of(job, now, zone), "now": now, "id": job.id})
    return len(jobs)


# --- the scheduler: recover, materialise ----------------------------------------------------------------


def backoff(attempt: int, base_seconds: int) -> timedelta:
    seconds = min(base_seconds * 2 ** max(attempt - 1, 0), MAX_BACKOFF)
    return timedelta(seconds=seconds * random.uniform(0.8, 1.2))


_FAILED_MESSAGE = """
    INSERT INTO social.inbox_messages (id, recipient_id, message_type, content, related_type, related_id, actionable,
                                       status, dedup_key, created_at)
    SELECT gen_random_uuid(), j.owner_id, 'automation_failed',
           jsonb_build_object('job_name', j.name, 'run_id', r.id::text, 'error_code', r.error_code),
           'automation_job', j.id, false, 'pending', 'automation_failed:' || r.id::text, :now
      FROM social.automation_runs r JOIN social.automation_jobs j ON j.id = r.job_id
     WHERE r.id = ANY(:ids) AND r.status = 'failed'
    ON CONFLICT (recipient_id, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
"""


async def recover(session: AsyncSession, *, now: datetime, retry_base_seconds: int) -> int:
    """Runs whose worker died: lease expired and row not locked (a live execution holds it FOR UPDATE)."""
    moved = (await session.execute(text("""
        UPDATE social.automation_runs SET
               status = CASE WHEN attempt >= max_attempts THEN 'failed' ELSE 'queued' END,
               available_at = :now + make_interval(secs => least(:base * power(2, greatest(attempt - 1, 0)), 3600)),
               finished_at = CASE WHEN attempt >= max_attempts THEN :now END,
               claimed_by = NULL, lease_expires_at = NULL, error_code = 'WORKER_LOST',
               error_message = 'the worker stopped during the run'
         WHERE id IN (SELECT id FROM social.automation_runs WHERE status = 'running' AND lease_expires_at < :now
                       ORDER BY id LIMIT :limit FOR UPDATE SKIP LOCKED)
        RETURNING id"""), {"now": now, "base": retry_base_seconds, "limit": BATCH})).scalars().all()
    if moved:
        await session.execute(text(_FAILED_MESSAGE), {"ids": list(moved), "now": now})
    return len(moved)


async def materialise(session: AsyncSession, *, now: datetime, default_timezone: str, max_attempts: int) -> int:
    """One batch of due jobs (SKIP LOCKED): their latest due slot within grace as a queued run, next_run_at
    moved past now. Answers the number of jobs handled."""
    rows = (await session.execute(text("""
        SELECT j.id, j.job_type, j.schedule_type, j.schedule_time, j.schedule_weekday, j.next_run_at,
               coalesce(p.settings #>> '{preferences,timezone}', :tz) AS zone, u.status AS owner_status
          FROM social.automation_jobs j
          JOIN iam.user_account u ON u.id = j.owner_id
          LEFT JOIN social.profiles p ON p.id = j.owner_id
         WHERE j.status = 'active' AND j.next_run_at <= :now
         ORDER BY j.next_run_at, j.id LIMIT :limit FOR UPDATE OF j SKIP LOCKED"""),
        {"now": now, "tz": default_timezone, "limit": BATCH})).all()
    runs: list[dict[str, Any]] = []
    moves: list[dict[str, Any]] = []
    for row in rows:
        probe = AutomationJob(schedule_type=row.schedule_type, schedule_time=row.schedule_time,
                              schedule_weekday=row.schedule_weekday)
        slots = [row.next_run_at]
        while len(slots) < 1000:
            following = _slot_of(probe, slots[-1], row.zone)
            if following > now:
                break
            slots.append(following)
        latest = slots[-1]
        grace = REGISTRY[row.job_type].grace
        if row.owner_status == "active" and now - latest <= grace:
            runs.append({"id": uuid.uuid4(), "job": row.id, "at": latest, "max": max_attempts,
                         "missed": len(slots) - 1, "now": now})
        elif len(slots) > 0:
            log.info("automation slots skipped", extra={"job_id": str(row.id), "slots": len(slots)})
        moves.append({"id": row.id, "at": _slot_of(probe, now, row.zone)})
    if runs:
        await session.execute(text("""
            INSERT INTO social.automation_runs (id, job_id, scheduled_at, trigger, status, attempt, max_attempts,
                                                available_at, missed_slots, created_at)
            VALUES (:id, :job, :at, 'schedule', 'queued', 0, :max, :at, :missed, :now)
            ON CONFLICT (job_id, scheduled_at) DO NOTHING"""), runs)
    if moves:
        await session.execute(text("UPDATE social.automation_jobs SET next_run_at = :at WHERE id = :id"), moves)
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


# --- the drainer: claim, execute -----------------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    run_id: uuid.UUID
    job_id: uuid.UUID
    attempt: int
    scheduled_at: datetime
    token: str


class PermanentError(Exception):
    """The run cannot succeed by retrying (its target is gone or forbidden): fail it and disable the job."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def worker_token() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


async def claim(session: AsyncSession, *, now: datetime, lease_seconds: int, limit: int = CLAIM_BATCH
                ) -> list[Claim]:
    token = worker_token()
    rows = (await session.execute(text("""
        UPDATE social.automation_runs r
           SET status = 'running', attempt = r.attempt + 1, started_at = :now, claimed_by = :token,
               lease_expires_at = :now + make_interval(secs => :lease)
         WHERE r.id IN (SELECT id FROM social.automation_runs WHERE status = 'queued' AND available_at <= :now
                         ORDER BY available_at, id LIMIT :limit FOR UPDATE SKIP LOCKED)
        RETURNING r.id, r.job_id, r.attempt, r.scheduled_at"""),
        {"now": now, "token": token, "lease": lease_seconds, "limit": limit})).all()
    return [Claim(r.id, r.job_id, r.attempt, r.scheduled_at, token) for r in rows]


Effect = Callable[[AsyncSession, AutomationJob, Claim, datetime, str], Awaitable[dict[str, Any]]]


async def execute(db: Database, claimed: Claim, *, clock: Clock, default_timezone: str, retry_base_seconds: int,
                  effects: dict[str, Effect] | None = None) -> str:
    """One claimed run (see `execute_batch`). Answers its outcome."""
    (outcome,) = await execute_batch(db, [claimed], clock=clock, default_timezone=default_timezone,
                                     retry_base_seconds=retry_base_seconds, effects=effects)
    return outcome


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


async def _run_one(session: AsyncSession, claimed: Claim, *, clock: Clock, default_timezone: str,
                   effects: dict[str, Effect]) -> str:
    now = clock.now()
    # The owner's account first (the global lock order), in the statement that finds it.
    owner_active = (await session.execute(text("""
        SELECT u.status = 'active' FROM social.automation_jobs j JOIN iam.user_account u ON u.id = j.owner_id
         WHERE j.id = :j FOR SHARE OF u"""), {"j": claimed.job_id})).scalar()
    if owner_active is None:
        return "gone"
    # A concurrent DELETE of the job waits for this run (FOR KEY SHARE), and then takes its runs with it.
    job = (await session.scalars(select(AutomationJob).where(AutomationJob.id == claimed.job_id)
                                 .with_for_update(key_share=True, read=True)
                                 .execution_options(populate_existing=True))).one_or_none()
    if job is None:
        return "gone"
    held = (await session.execute(text("""
        SELECT 1 FROM social.automation_runs
         WHERE id = :id AND status = 'running' AND attempt = :a AND claimed_by = :t FOR UPDATE"""),
        {"id": claimed.run_id, "a": claimed.attempt, "t": claimed.token})).scalar()
    if held is None:
        return "lost"
    if owner_active:
        result = await effects[job.job_type](session, job, claimed, now, default_timezone)
    else:
        result = {"skipped": "owner not active"}
    done = (await session.execute(text("""
        UPDATE social.automation_runs SET status = 'succeeded', result = CAST(:r AS jsonb), finished_at = :now,
               claimed_by = NULL, lease_expires_at = NULL
         WHERE id = :id AND status = 'running' AND attempt = :a AND claimed_by = :t RETURNING id"""),
        {"r": json.dumps(result, default=str), "now": clock.now(), "id": claimed.run_id, "a": claimed.attempt,
         "t": claimed.token})).scalar()
    if done is None:
        raise RuntimeError("the claim was lost during the run")
    return "succeeded"


async def _record_failure(session: AsyncSession, claimed: Claim, *, code: str, message: str, permanent: bool,
                          now: datetime, retry_base_seconds: int) -> str:
    status = (await session.execute(text("""
        UPDATE social.automation_runs SET
               status = CASE WHEN :permanent OR attempt >= max_attempts THEN 'failed' ELSE 'queued' END,
               finished_at = CASE WHEN :permanent OR attempt >= max_attempts THEN CAST(:now AS timestamptz) END,
               available_at = :available, claimed_by = NULL, lease_expires_at = NULL,
               error_code = :code, error_message = :message
         WHERE id = :id AND status = 'running' AND attempt = :a AND claimed_by = :t
        RETURNING status"""),
        {"permanent": permanent, "now": now, "available": now + backoff(claimed.attempt, retry_base_seconds),
         "code": code, "message": message, "id": claimed.run_id, "a": claimed.attempt,
         "t": claimed.token})).scalar()
    if status is None:
        return "lost"
    if status == "failed":
        await session.execute(text(_FAILED_MESSAGE), {"ids": [claimed.run_id], "now": now})
        if permanent:
            await session.execute(text("""
                UPDATE social.automation_jobs SET status = 'disabled', next_run_at = NULL, version = version + 1,
                       updated_at = :now WHERE id = :j AND status = 'active'"""), {"j": claimed.job_id, "now": now})
    return "failed" if status == "failed" else "retried"


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
        for outcome in await execute_batch(db, claims, clock=clock, default_timezone=default_timezone,
                                           retry_base_seconds=retry_base_seconds, effects=effects):
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return outcomes


# --- the effects of the job types ------------------------------------------------------------------------


async def _todo_digest(session: AsyncSession, job: AutomationJob, claimed: Claim, now: datetime,
                       default_timezone: str) -> dict[str, Any]:
    at = claimed.scheduled_at
    horizon = at + timedelta(days=param(job, "horizon_days"))
    # The owner decides how many todos are pending: the database counts them, only the listed ones are read.
    rows = (await session.execute(text("""
        SELECT id, title, due_at, priority, count(*) OVER () AS total,
               count(*) FILTER (WHERE due_at < :at) OVER () AS overdue
          FROM social.todos
         WHERE owner_id = :u AND status = 'pending' AND due_at IS NOT NULL AND due_at < :horizon
           AND (:overdue OR due_at >= :at)
         ORDER BY due_at, id LIMIT :listed"""),
        {"u": job.owner_id, "horizon": horizon, "at": at, "overdue": param(job, "include_overdue"),
         "listed": param(job, "max_items")})).all()
    total, overdue = (rows[0].total, rows[0].overdue) if rows else (0, 0)
    if not rows and param(job, "skip_if_empty"):
        return {"pending_count": 0, "overdue_count": 0, "message_id": None}
    listed = [{"id": str(r.id), "title": r.title, "due_at": r.due_at.isoformat(), "priority": r.priority}
              for r in rows]
    message_id = await _message(session, recipient=job.owner_id, kind="todo_digest", job=job, run_id=claimed.run_id,
                                dedup=f"todo_digest:{claimed.run_id}", now=now,
                                content={"pending_count": total - overdue, "overdue_count": overdue,
                                         "todos": listed})
    return {"pending_count": total - overdue, "overdue_count": overdue, "message_id": message_id}


async def _message(session: AsyncSession, *, recipient: uuid.UUID, kind: str, job: AutomationJob,
                   run_id: uuid.UUID, dedup: str, content: dict[str, Any], now: datetime,
                   related: tuple[str, uuid.UUID] | None = None) -> uuid.UUID | None:
    related_type, related_id = related or ("automation_job", job.id)
    return (await session.execute(text("""
        INSERT INTO social.inbox_messages (id, recipient_id, message_type, content, related_type, related_id,
                                           actionable, status, dedup_key, automation_run_id, created_at)
        VALUES (:id, :r, :kind, CAST(:content AS jsonb), :rt, :rid, false, 'pending', :dedup, :run, :now)
        ON CONFLICT (recipient_id, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING RETURNING id"""),
        {"id": uuid.uuid4(), "r": recipient, "kind": kind, "content": json.dumps(content), "rt": related_type,
         "rid": related_id, "dedup": dedup, "run": run_id, "now": now})).scalar()


async def _reminder_recipients(session: AsyncSession, item_id: uuid.UUID, owner_id: uuid.UUID) -> list[uuid.UUID]:
    """The owner, direct subscribers (active, notify level not none) and active members of groups with an
    active group subscription (notify level not none), minus anyone whose notifications are off; active
    accounts only, share-locked (id order, SKIP LOCKED: see common.active_account_ids)."""
    rows = (await session.execute(text("""
        WITH wanted AS (
            SELECT CAST(:owner AS uuid) AS user_id
            UNION SELECT s.subscriber_user_id FROM social.schedule_subscriptions s
             WHERE s.item_id = :item AND s.subject_type = 'user' AND s.status = 'active' AND s.notify_level <> 'none'
            UNION SELECT m.user_id FROM social.schedule_subscriptions s
              JOIN social.groups g ON g.id = s.subscriber_group_id AND g.status = 'active'
              JOIN social.group_members m ON m.group_id = g.id AND m.status = 'active'
             WHERE s.item_id = :item AND s.subject_type = 'group' AND s.status = 'active' AND s.notify_level <> 'none')
        SELECT u.id FROM wanted w JOIN iam.user_account u ON u.id = w.user_id AND u.status = 'active'
          LEFT JOIN social.profiles p ON p.id = u.id
         WHERE coalesce(p.settings #> '{notification,enabled}', 'true'::jsonb) <> 'false'::jsonb
         ORDER BY u.id FOR SHARE OF u SKIP LOCKED"""), {"owner": owner_id, "item": item_id})).scalars().all()
    return list(rows)


async def _schedule_reminder(session: AsyncSession, job: AutomationJob, claimed: Claim, now: datetime,
                             default_timezone: str) -> dict[str, Any]:
    start = claimed.scheduled_at
    end = start + timedelta(hours=param(job, "hours_ahead"))
    if job.target_type == "schedule_item":
        try:
            decision = await items.decide(session, job.target_id, job.owner_id)
        except errors.ScheduleItemNotFound:
            raise PermanentError("TARGET_GONE", "the item is gone or no longer visible") from None
        if not decision.bits & items.EDIT:
            raise PermanentError("TARGET_FORBIDDEN", "the owner no longer holds edit on the item")
        targets = [decision.item]
    else:
        from tenet.social.models import ScheduleItem

        targets = list((await session.scalars(select(ScheduleItem).where(
            ScheduleItem.owner_id == job.owner_id, ScheduleItem.status == "active", ScheduleItem.start_at < end,
            (ScheduleItem.series_end_at.is_(None)) | (ScheduleItem.series_end_at > start)))).all())
    written = 0
    occurrences = 0
    # Every series of the owner expanded: CPU work, off the event loop (plain values: no ORM object in the thread).
    due = await anyio.to_thread.run_sync(_starting_in, [(item.start_at, item.end_at, item.timezone,
                                                         item.recurrence_rule, item.series_end_at)
                                                        for item in targets], start, end)
    for item, found in zip(targets, due, strict=True):
        for occurrence in found:
            occurrences += 1
            recipients = await _reminder_recipients(session, item.id, item.owner_id)
            for recipient in recipients:
                made = await _message(
                    session, recipient=recipient, kind="schedule_reminder", job=job, run_id=claimed.run_id,
                    dedup=f"schedule_reminder:{item.id}:{occurrence.start_at.isoformat()}", now=now,
                    related=("schedule_item", item.id),
                    content={"title": item.title, "occurrence_start": occurrence.start_at.isoformat(),
                             "occurrence_end": occurrence.end_at.isoformat(), "timezone": item.timezone})
                written += made is not None
    return {"occurrences": occurrences, "reminders": written}


def _starting_in(series: list[tuple[datetime, datetime, str, str | None, datetime | None]], start: datetime,
                 end: datetime) -> list[list[recurrence.Occurrence]]:
    """Each series' occurrences that start in (start, end]."""
    return [[o for o in recurrence.occurrences(start_at=first, end_at=first_end, timezone=zone, recurrence_rule=rule,
                                               series_end_at=series_end, window_from=start, window_to=end)
             if start < o.start_at <= end]
            for first, first_end, zone, rule, series_end in series]


async def _todo_from_schedule(session: AsyncSession, job: AutomationJob, claimed: Claim, now: datetime,
                              default_timezone: str) -> dict[str, Any]:
    from tenet.social import queries, todos

    zone = await zone_of(session, job.owner_id, default_timezone)
    tz = ZoneInfo(zone)
    tomorrow = claimed.scheduled_at.astimezone(tz).date() + timedelta(days=1)
    window = (datetime.combine(tomorrow, time(0), tzinfo=tz).astimezone(UTC),
              datetime.combine(tomorrow + timedelta(days=1), time(0), tzinfo=tz).astimezone(UTC))
    candidates = await (await statements(session)).all(queries.WINDOW_IDS_SQL, {
        "me": job.owner_id, "from": window[0], "to": window[1], "limit": todos.MAX_EXTRACTED})
    if not candidates:
        return {"created": 0, "existing": 0}
    _, created, existing = await todos.extract(session, owner_id=job.owner_id,
                                               item_ids=[row["id"] for row in candidates],
                                               window=window, priority=param(job, "priority"), now=now)
    return {"created": len(created), "existing": len(existing)}


EFFECTS: dict[str, Effect] = {"todo_digest": _todo_digest, "schedule_reminder": _schedule_reminder,
                              "todo_from_schedule": _todo_from_schedule}
