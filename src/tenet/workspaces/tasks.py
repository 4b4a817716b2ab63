"""Periodic jobs of workspaces: invitation expiry and the completion of workspace deletions.

Each commits batch by batch (`unit_of_work=False`): a sweep of many workspaces must not hold one long
transaction. Accept checks expiry itself, so a sweep that runs late never lets an expired token through;
the sweep makes the state visible (EXPIRED) and frees the (workspace, email) slot.
"""

from __future__ import annotations

import logging
from datetime import datetime

import procrastinate

from tenet.db.database import Database
from tenet.kernel.jobs import JobScope, job
from tenet.workspaces import commands, invitations, workspaces

log = logging.getLogger(__name__)

blueprint = procrastinate.Blueprint()


async def sweep_expired_invitations(db: Database, now: datetime) -> int:
    """Expire every PENDING invitation past its time, batch by batch; answer how many."""
    total = 0
    while True:
        async with db.unit_of_work() as session:
            expired = await invitations.expire_due_invitations(session, now=now)
        total += len(expired)
        if not expired:
            return total


async def sweep_workspace_deletions(db: Database, now: datetime) -> int:
    """Move every DELETING workspace to DELETED, batch by batch; answer how many."""
    total = 0
    while True:
        async with db.unit_of_work() as session:
            finished = await workspaces.finish_workspace_deletions(session, now=now)
        total += len(finished)
        if len(finished) < commands.SWEEP_BATCH:
            return total


@job(blueprint, name="expire_invitations", cron="* * * * *", unit_of_work=False)
async def expire_invitations(scope: JobScope, timestamp: int) -> int:
    count = await sweep_expired_invitations(scope.db, scope.now)
    if count:
        log.info("expired invitations", extra={"count": count})
    return count


@job(blueprint, name="finish_workspace_deletions", cron="* * * * *", unit_of_work=False)
async def finish_workspace_deletions(scope: JobScope, timestamp: int) -> int:
    count = await sweep_workspace_deletions(scope.db, scope.now)
    if count:
        log.info("finished workspace deletions", extra={"count": count})
    return count
