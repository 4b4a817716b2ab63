"""The kernel's periodic jobs: mail delivery and clean-up of expired rows."""

from __future__ import annotations

import logging

import procrastinate

from tenet.kernel import idempotency, outbox, ratelimit
from tenet.kernel.jobs import runtime

log = logging.getLogger(__name__)

blueprint = procrastinate.Blueprint()


@blueprint.periodic(cron="* * * * *")
@blueprint.task(name="deliver_outbox", queueing_lock="kernel.deliver_outbox", pass_context=False)
async def deliver_outbox(timestamp: int) -> int:
    """Deliver due mail (the API processes also deliver right after commit; this is the safety net)."""
    rt = runtime()
    mail = rt.settings.mail()
    if not mail.smtp_configured:
        return 0  # development: mail stays in the outbox (it was logged after commit)
    return await outbox.deliver_due(rt.db, outbox.SmtpSender(mail), rt.clock)


@blueprint.periodic(cron="17 * * * *")
@blueprint.task(name="purge_expired", queueing_lock="kernel.purge_expired", pass_context=False)
async def purge_expired(timestamp: int) -> dict[str, int]:
    rt = runtime()
    now = rt.clock.now()
    counts = {
        "idempotency_keys": await idempotency.purge_expired(rt.db, now),
        "rate_limit_windows": await ratelimit.purge_expired(rt.db, now),
        "sent_mail": await outbox.purge_sent(rt.db, now),
    }
    log.info("purged expired rows", extra=counts)
    return counts
