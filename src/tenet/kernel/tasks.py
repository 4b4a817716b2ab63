"""The kernel's periodic jobs: mail delivery (the safety net behind the after-commit dispatcher) and clean-up
of expired rows."""

from __future__ import annotations

import logging
from datetime import timedelta

import procrastinate
from sqlalchemy import text

from tenet.kernel import idempotency, outbox, ratelimit
from tenet.kernel.jobs import JobScope, job

log = logging.getLogger(__name__)

blueprint = procrastinate.Blueprint()

JOB_RUN_RETENTION = timedelta(days=30)


@job(blueprint, name="deliver_outbox", cron="* * * * *", unit_of_work=False)
async def deliver_outbox(scope: JobScope, timestamp: int) -> int:
    """Deliver due mail (the API processes also deliver right after commit; this is the safety net)."""
    mail = scope.settings.mail()
    if not mail.smtp_configured:
        return 0  # development: mail stays in the outbox (it was logged after commit)
    return await outbox.deliver_due(scope.db, outbox.SmtpSender(mail), scope.clock)


@job(blueprint, name="purge_expired", cron="17 * * * *", unit_of_work=False)
async def purge_expired(scope: JobScope, timestamp: int) -> dict[str, int]:
    counts = {
        "idempotency_keys": await idempotency.purge_expired(scope.db, scope.now),
        "rate_limit_windows": await ratelimit.purge_expired(scope.db, scope.now),
        "sent_mail": await outbox.purge_sent(scope.db, scope.now),
        "job_runs": await _purge_job_runs(scope),
        "finished_jobs": await _purge_finished_jobs(scope),
    }
    log.info("purged expired rows", extra=counts)
    return counts


async def _purge_job_runs(scope: JobScope) -> int:
    async with scope.db.unit_of_work() as session:
        result = await session.execute(text("DELETE FROM kernel.job_run WHERE started_at < :cutoff"),
                                       {"cutoff": scope.now - JOB_RUN_RETENTION})
        return int(getattr(result, "rowcount", 0) or 0)


# procrastinate keeps every job it ever ran, with its events: a worker defers several periodic jobs a minute, so
# the table grows by thousands of rows a day and every count over it (/metrics' `tenet_jobs`) reads them all. A job
# that finished (succeeded, failed, cancelled, aborted) before the run history's retention has nothing left to say
# that kernel.job_run has not kept as long, so it goes, with its events (ON DELETE CASCADE). Finished means: no
# event since the cut-off (a failed job retried by hand has a recent `retried` event and stays). A periodic defer
# that still names such a job is unlinked by procrastinate's own delete trigger. Batches of FINISHED_JOBS_BATCH rows,
# each its own short transaction, so the first purge of a large table never holds it for long.
FINISHED_JOBS_BATCH = 5_000
_PURGE_FINISHED_JOBS = text("""
    WITH finished AS (
        SELECT j.id FROM procrastinate_jobs j
         WHERE j.status IN ('succeeded', 'failed', 'cancelled', 'aborted')
           AND NOT EXISTS (SELECT 1 FROM procrastinate_events e WHERE e.job_id = j.id AND e.at >= :cutoff)
         ORDER BY j.id
         LIMIT :batch
         FOR UPDATE SKIP LOCKED)
    DELETE FROM procrastinate_jobs j USING finished WHERE j.id = finished.id""")


async def _purge_finished_jobs(scope: JobScope, *, batch: int = FINISHED_JOBS_BATCH) -> int:
    cutoff, purged = scope.now - JOB_RUN_RETENTION, 0
    while True:
        async with scope.db.unit_of_work() as session:
            result = await session.execute(_PURGE_FINISHED_JOBS, {"cutoff": cutoff, "batch": batch})
            deleted = int(getattr(result, "rowcount", 0) or 0)
        purged += deleted
        if deleted < batch:
            return purged
