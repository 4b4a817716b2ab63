"""Jobs of meeting attendance: the daily erasure of guests' personal data (MA-INV-13).

No job derives meeting status (the clock does) or closes check-in windows (a window is a condition, not a
state).
"""

from __future__ import annotations

import logging

import procrastinate

from tenet.kernel.jobs import JobScope, job
from tenet.kernel.settings import section
from tenet.meetings import retention
from tenet.meetings.settings import MeetingSettings

log = logging.getLogger(__name__)

blueprint = procrastinate.Blueprint()


@job(blueprint, name="erase_guest_data", cron="17 3 * * *", unit_of_work=False, history=True)
async def erase_guest_data(scope: JobScope, timestamp: int) -> dict[str, int]:
    """Batch by batch, each its own transaction: a long backlog never holds one long transaction."""
    days = section(scope.settings, MeetingSettings).guest_data_retention_days
    total = 0
    while True:
        async with scope.db.unit_of_work() as session:
            erased = await retention.erase_guest_data(session, now=scope.now, retention_days=days)
        total += erased
        if erased < retention.BATCH:
            break
    if total:
        log.info("erased guest data", extra={"guests": total})
    return {"guests": total}

