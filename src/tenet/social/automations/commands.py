"""Commands on automations (spec 000 §C.7; SOC-INV-19, 20): create, change, enable or disable, delete, run now.

Each command locks the job row first (`_own`, FOR UPDATE). Changing the schedule of an active job moves its
`next_run_at` to the first slot after now; changing the owner's time zone in settings recomputes `next_run_at` of
all their active jobs in the same transaction (`reschedule_owner`).
"""

from __future__ import annotations

import uuid
from datetime import datetime, time
from typing import Any, cast

from sqlalchemy import Table, select
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel import audit
from tenet.kernel.audit import Actor
from tenet.kernel.db_errors import add_unique
from tenet.kernel.errors import DomainError, PreconditionFailed
from tenet.kernel.statements import statements
from tenet.kernel.transitions import Refusal, transition
from tenet.social import errors, items, lifecycles
from tenet.social.automations.registry import REGISTRY, invalid, slot_of, validated_params, zone_of
from tenet.social.automations.runs import defer_manual_run
from tenet.social.common import require_active_accounts
from tenet.social.models import RUN_SLOT_UNIQUE, AutomationJob, AutomationRun
from tenet.social.permissions import EDIT


def _refusal(refusal: Refusal[AutomationJob]) -> DomainError:
    if refusal.current is None:
        return errors.AutomationNotFound()
    if refusal.reason == "version":
        return PreconditionFailed(current_version=refusal.version)
    return errors.AutomationStateConflict(current_status=refusal.status)


async def _check_target(session: AsyncSession, principal_id: uuid.UUID, job_type: str, target_type: str,
                        target_id: uuid.UUID | None) -> uuid.UUID:
    if target_type not in REGISTRY[job_type].target_types:
        raise invalid(["target_type"], f"{job_type} takes {', '.join(REGISTRY[job_type].target_types)}")
    if target_type == "user":
        if target_id not in (None, principal_id):
            raise errors.AutomationTargetNotFound()
        return principal_id
    if target_id is None:
        raise invalid(["target_id"], "an item id is needed")
    try:
        decision = await items.decide(session, target_id, principal_id)
    except errors.ScheduleItemNotFound:
        raise errors.AutomationTargetNotFound() from None
    decision.require(EDIT)
    return target_id


async def create_job(session: AsyncSession, *, principal_id: uuid.UUID, name: str, job_type: str, target_type: str,
                     target_id: uuid.UUID | None, params: dict[str, Any], schedule_type: str, schedule_time: time,
                     schedule_weekday: int | None, status: str, limit: int, default_timezone: str,
                     now: datetime) -> AutomationJob:
    params = validated_params(job_type, params)
    if (schedule_type == "weekly") != (schedule_weekday is not None):
        raise invalid(["schedule_weekday"], "a weekly job needs a weekday (1 = Monday .. 7), a daily one none")
    await require_active_accounts(session, [principal_id])
    # The owner's profile row serialises the count of their jobs (both in one round trip).
    _, counted = await (await statements(session)).ones(
        ("SELECT 1 FROM social.profiles WHERE id = %(u)s FOR UPDATE", {"u": principal_id}),
        ("SELECT count(*) AS jobs FROM social.automation_jobs WHERE owner_id = %(u)s", {"u": principal_id}))
    assert counted is not None
    count = counted["jobs"]
    if count >= limit:
        raise errors.AutomationLimitReached(limit=limit)
    target = await _check_target(session, principal_id, job_type, target_type, target_id)
    job = AutomationJob(id=uuid.uuid4(), owner_id=principal_id, name=name, job_type=job_type, target_type=target_type,
                        target_id=target, params=params, schedule_type=schedule_type, schedule_time=schedule_time,
                        schedule_weekday=schedule_weekday, status=status, version=1, created_at=now, updated_at=now,
                        created_by=principal_id)
    zone = await zone_of(session, principal_id, default_timezone)
    job.next_run_at = slot_of(job, now, zone) if status == "active" else None
    session.add(job)
    await session.flush()
    await audit.record(session, action="social.automation.created", actor=Actor.user(principal_id),
                       subject=("automation_job", job.id), now=now, data={"job_type": job_type})
    return job


async def _own(session: AsyncSession, job_id: uuid.UUID, principal_id: uuid.UUID) -> AutomationJob:
    job = (await session.scalars(select(AutomationJob).where(AutomationJob.id == job_id).with_for_update()
                                 .execution_options(populate_existing=True))).one_or_none()
    if job is None or job.owner_id != principal_id:
        raise errors.AutomationNotFound()
    return job


async def update_job(session: AsyncSession, *, job_id: uuid.UUID, principal_id: uuid.UUID, changes: dict[str, Any],
                     expected_version: int | None, default_timezone: str, now: datetime) -> AutomationJob:
    job = await _own(session, job_id, principal_id)
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
        raise invalid(["schedule_weekday"], "a weekly job needs a weekday (1 = Monday .. 7), a daily one none")
    if "target_type" in values or "target_id" in values:
        values["target_id"] = await _check_target(session, principal_id, job.job_type,
                                                  values.get("target_type", job.target_type),
                                                  values.get("target_id", job.target_id))
    if job.status == "active" and set(values) & {"schedule_type", "schedule_time", "schedule_weekday"}:
        probe = AutomationJob(schedule_type=schedule_type, schedule_time=values.get("schedule_time", job.schedule_time),
                              schedule_weekday=weekday)
        values["next_run_at"] = slot_of(probe, now, await zone_of(session, principal_id, default_timezone))
    # The job row is locked (`_own`): the version cannot move under us; the condition states what we read.
    statement = (cast(Table, AutomationJob.__table__).update()
                 .where(AutomationJob.id == job_id, AutomationJob.version == job.version)
                 .values(version=AutomationJob.version + 1, updated_at=now, **values))
    if getattr(await session.execute(statement), "rowcount", 0) != 1:
        raise PreconditionFailed(current_version=job.version)
    await audit.record(session, action="social.automation.updated", actor=Actor.user(principal_id),
                       subject=("automation_job", job_id), now=now, data={"fields": sorted(changes)})
    refreshed = await session.get(AutomationJob, job_id, populate_existing=True)
    assert refreshed is not None
    return refreshed


async def set_enabled(session: AsyncSession, *, job_id: uuid.UUID, principal_id: uuid.UUID, enabled: bool,
                      default_timezone: str, now: datetime) -> AutomationJob:
    """Enabling starts from the next slot after now (no catch-up of the disabled period)."""
    job = await _own(session, job_id, principal_id)
    values: dict[str, datetime | None]
    if enabled:
        values = {"next_run_at": slot_of(job, now, await zone_of(session, principal_id, default_timezone)),
                  "updated_at": now}
    else:
        values = {"next_run_at": None, "updated_at": now}
    moved = await transition(session, lifecycles.AUTOMATION_JOB, "enable" if enabled else "disable",
                             model=AutomationJob, id=job_id, values=values, refuse=_refusal)
    await audit.record(session, action=f"social.automation.{'enabled' if enabled else 'disabled'}",
                       actor=Actor.user(principal_id), subject=("automation_job", job_id), now=now)
    return moved


async def delete_job(session: AsyncSession, *, job_id: uuid.UUID, principal_id: uuid.UUID, now: datetime) -> None:
    await _own(session, job_id, principal_id)
    await (await statements(session)).execute("DELETE FROM social.automation_jobs WHERE id = %(id)s", {"id": job_id})
    await audit.record(session, action="social.automation.deleted", actor=Actor.user(principal_id),
                       subject=("automation_job", job_id), now=now)


_MANUAL_RUN_PENDING = """
    SELECT id, status FROM social.automation_runs
     WHERE job_id = %(j)s AND trigger = 'manual' AND status IN ('queued', 'running')
     ORDER BY created_at LIMIT 1
"""


async def run_now(session: AsyncSession, *, job_id: uuid.UUID, principal_id: uuid.UUID, max_attempts: int,
                  now: datetime) -> AutomationRun:
    """A manual run for this instant, and the job that runs it as soon as a worker is free (deferred in this
    transaction: `runs.defer_manual_run`; the drainers take it if they come first). One manual run of a job at a
    time: while one is queued or running (a retry included), another is AUTOMATION_RUN_IN_PROGRESS. The
    job's row lock (`_own`, FOR UPDATE) queues concurrent requests, so each sees the run the one before it
    committed."""
    await _own(session, job_id, principal_id)
    pending = await (await statements(session)).one(_MANUAL_RUN_PENDING, {"j": job_id})
    if pending is not None:
        raise errors.AutomationRunInProgress(run_id=str(pending["id"]), current_status=pending["status"])
    run = AutomationRun(id=uuid.uuid4(), job_id=job_id, scheduled_at=now, trigger="manual", status="queued",
                        attempt=0, max_attempts=max_attempts, available_at=now, missed_slots=0, created_at=now)
    await add_unique(session, run, on_violation={RUN_SLOT_UNIQUE: lambda: errors.AutomationStateConflict(
        "A run for this instant exists already", current_status="queued")})
    await audit.record(session, action="social.automation.run_requested", actor=Actor.user(principal_id),
                       subject=("automation_run", run.id), scope=("automation_job", job_id), now=now)
    await defer_manual_run(session, run.id)
    return run


async def reschedule_owner(session: AsyncSession, *, owner_id: uuid.UUID, default_timezone: str,
                           now: datetime) -> int:
    """The owner's time zone changed: every active job's next slot, from now, in the new zone."""
    jobs = (await session.scalars(select(AutomationJob).where(
        AutomationJob.owner_id == owner_id, AutomationJob.status == "active").order_by(AutomationJob.id)
        .with_for_update().execution_options(populate_existing=True))).all()
    zone = await zone_of(session, owner_id, default_timezone)
    run = await statements(session)
    async with run.pipeline():
        for job in jobs:
            await run.execute("UPDATE social.automation_jobs SET next_run_at = %(at)s, updated_at = %(now)s "
                              "WHERE id = %(id)s", {"at": slot_of(job, now, zone), "now": now, "id": job.id})
    return len(jobs)
