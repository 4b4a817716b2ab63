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
    }
    log.info("purged expired rows", extra=counts)
    return counts


async def _purge_job_runs(scope: JobScope) -> int:
    async with scope.db.unit_of_work() as session:
        result = await session.execute(text("DELETE FROM kernel.job_run WHERE started_at < :cutoff"),
                                       {"cutoff": scope.now - JOB_RUN_RETENTION})
        return int(getattr(result, "rowcount", 0) or 0)
