"""Jobs of social collaboration: the automation scheduler and a second drainer (design §7.2).

Both are periodic (every minute; procrastinate defers each tick once however many workers run). The scheduler
recovers runs of dead workers, materialises due slots, then drains; the drainer only drains, so with two or more
workers the runs of a busy minute execute in parallel. Any number of either at once is safe: due jobs are locked
FOR UPDATE SKIP LOCKED, a slot is unique per job, and runs are claimed FOR UPDATE SKIP LOCKED
(tests/concurrency/test_social_races.py). A run-now request defers `social_automation_run_now` for its run in its
own transaction (queue `social_run_now`), so the run starts as soon as a worker is free, not at the next tick.
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta

import procrastinate

from tenet.kernel.jobs import JobScope, job
from tenet.kernel.settings import KernelSettings, section
from tenet.social import automations, inbox
from tenet.social.automations.runs import RUN_NOW_JOB, run_manual
from tenet.social.settings import SocialSettings

log = logging.getLogger(__name__)

blueprint = procrastinate.Blueprint()

# Leaves the last ten seconds of a minute to the next tick's start.
DRAIN_BUDGET_SECONDS = 50.0


async def _drain(scope: JobScope) -> dict[str, int]:
    own, kernel = section(scope.settings, SocialSettings), section(scope.settings, KernelSettings)
    return await automations.drain(scope.db, clock=scope.clock, default_timezone=kernel.default_timezone,
                                   lease_seconds=own.automation_lease_seconds,
                                   retry_base_seconds=own.automation_retry_base_seconds,
                                   budget_seconds=DRAIN_BUDGET_SECONDS)


@job(blueprint, name="social_automation_scheduler", cron="* * * * *", unit_of_work=False, history=True)
async def social_automation_scheduler(scope: JobScope, timestamp: int) -> dict[str, object]:
    own, kernel = section(scope.settings, SocialSettings), section(scope.settings, KernelSettings)
    scheduled = await automations.schedule(scope.db, now=scope.now, default_timezone=kernel.default_timezone,
                                           max_attempts=own.automation_max_attempts,
                                           retry_base_seconds=own.automation_retry_base_seconds)
    drained = await _drain(scope)
    if scheduled["jobs"] or drained:
        log.info("automations", extra={**scheduled, **drained})
    return {**scheduled, "runs": drained}


@job(blueprint, name="social_purge_expired", cron="41 3 * * *", unit_of_work=False, history=True)
async def social_purge_expired(scope: JobScope, timestamp: int) -> dict[str, int]:
    """Inbox and run retention (D-25), daily."""
    own = section(scope.settings, SocialSettings)
    return await inbox.purge(scope.db, now=scope.now, retention=timedelta(days=own.social_inbox_retention_days))


@job(blueprint, name="social_automation_drainer", cron="* * * * *", unit_of_work=False)
async def social_automation_drainer(scope: JobScope, timestamp: int) -> dict[str, int]:
    return await _drain(scope)


@job(blueprint, name=RUN_NOW_JOB, unit_of_work=False, history=True)
async def social_automation_run_now(scope: JobScope, run_id: str) -> dict[str, int]:
    """One manual run, deferred by the request that made it (to the queue runs.RUN_NOW_QUEUE)."""
    own, kernel = section(scope.settings, SocialSettings), section(scope.settings, KernelSettings)
    return await run_manual(scope.db, run_id=uuid.UUID(run_id), clock=scope.clock,
                            default_timezone=kernel.default_timezone, lease_seconds=own.automation_lease_seconds,
                            retry_base_seconds=own.automation_retry_base_seconds)
