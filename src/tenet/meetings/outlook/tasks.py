
"""Jobs of the Outlook sync (a blueprint of its own, registered under the meetings domain; docs/design/outlook.md
§8): the subscriptions' upkeep every minute, and the processing of what the webhook stored (deferred by it, with
a minute's safety net). Every body reads the policy row first, so a change takes effect at the next run.

Graph is called outside any transaction; the rows each answer changes are written in short units of work."""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from typing import Any

import procrastinate

from tenet.db.database import Database
from tenet.kernel.jobs import JobScope, job
from tenet.kernel.settings import KernelSettings, section
from tenet.kernel.statements import statements
from tenet.meetings.outlook import graph, queries, subscriptions, sync, webhook
from tenet.meetings.outlook.policy import Policy
from tenet.meetings.outlook.webhook import DELTA_JOB, DELTA_TASK, PROCESS_JOB, PROCESS_LOCK, delta_lock
from tenet.meetings.settings import MeetingSettings

log = logging.getLogger(__name__)

blueprint = procrastinate.Blueprint()

BATCH = 500
_CLAIM = """
    WITH claimed AS (
        SELECT id FROM meeting_attendance.outlook_notifications WHERE status = 'PENDING'
         ORDER BY id LIMIT %(batch)s FOR UPDATE SKIP LOCKED),
    done AS (
        UPDATE meeting_attendance.outlook_notifications n
           SET status = CASE WHEN n.mailbox_id IS NULL THEN 'DROPPED' ELSE 'DONE' END, processed_at = %(now)s
          FROM claimed c WHERE n.id = c.id
        RETURNING n.id, n.kind, n.mailbox_id, n.graph_subscription_id, n.change_type, n.lifecycle_event,
                  n.resource_id, n.received_at),
    seen AS (
        UPDATE meeting_attendance.outlook_mailboxes m SET last_notification_at = greatest(m.last_notification_at, d.at)
          FROM (SELECT mailbox_id, max(received_at) AS at FROM done WHERE mailbox_id IS NOT NULL
                 GROUP BY mailbox_id) d
         WHERE m.id = d.mailbox_id
        RETURNING m.id)
    SELECT * FROM done ORDER BY id"""


async def _policy(db: Database) -> Policy:
    async with db.read_only() as session:
        return Policy.from_row(await queries.policy(await statements(session)))


def _client(settings: MeetingSettings, rules: Policy) -> graph.GraphClient:
    return graph.client_for(settings, max_concurrent=rules.max_concurrent_requests,
                            max_attempts=rules.retry_max_attempts, retry_base_seconds=rules.retry_base_seconds)


def _maintainer(db: Database, client: graph.GraphClient, rules: Policy, settings: KernelSettings,
                outlook: MeetingSettings) -> subscriptions.Maintainer:
    secret = outlook.graph_notification_client_state
    return subscriptions.Maintainer(db, client, policy=rules, public_base_url=settings.public_base_url,
                                    client_state=secret.get_secret_value() if secret else "")


def _sync_ready(outlook: MeetingSettings) -> bool:
    """Subscriptions need the credentials and a clientState (without one, no notification could be trusted)."""
    return outlook.graph_configured and outlook.graph_notification_client_state is not None


async def upkeep(db: Database, settings: KernelSettings, *, now: datetime) -> dict[str, int]:
    outlook = section(settings, MeetingSettings)
    if not _sync_ready(outlook):
        return {}
    rules = await _policy(db)
    async with _client(outlook, rules) as client:
        return await _maintainer(db, client, rules, settings, outlook).run(now)


@job(blueprint, name="outlook_subscriptions", cron="* * * * *", unit_of_work=False, history=True,
     lock="outlook:subscriptions")
async def outlook_subscriptions(scope: JobScope, timestamp: int) -> dict[str, int]:
    """Create missing subscriptions, renew those within the margin, recreate expired or forgotten ones."""
    return await upkeep(scope.db, scope.settings, now=scope.now)


async def _claim(db: Database, now: datetime) -> list[dict[str, Any]]:
    async with db.unit_of_work() as session:
        return await (await statements(session)).all(_CLAIM, {"batch": BATCH, "now": now})


async def _lifecycle(maintainer: subscriptions.Maintainer, rows: list[dict[str, Any]], now: datetime,
                     counts: dict[str, int]) -> list[uuid.UUID]:
    """Act on each lifecycle event once per subscription (Graph repeats them); answer the mailboxes that missed
    notifications."""
    missed: list[uuid.UUID] = []
    seen: set[tuple[str, str]] = set()
    for row in rows:
        event, sub = row["lifecycle_event"] or "", row["graph_subscription_id"] or ""
        if row["mailbox_id"] is None or (event, sub) in seen:
            continue
        seen.add((event, sub))
        try:
            if event == "reauthorizationRequired":
                await maintainer.reauthorize(sub, now)
            elif event == "subscriptionRemoved":
                await maintainer.removed(sub, now)
                missed.append(row["mailbox_id"])
            elif event == "missed":
                missed.append(row["mailbox_id"])
            counts[event] = counts.get(event, 0) + 1
        except graph.GraphError as exc:
            counts["failed"] = counts.get("failed", 0) + 1
            log.warning("outlook lifecycle event failed", extra={
                "lifecycle_event": event, "graph_status": exc.status, "graph_code": exc.code,
                "graph_request_id": exc.request_id})
    return missed


async def process(db: Database, settings: KernelSettings, *, now: datetime) -> dict[str, Any]:
    """Consume the stored notifications batch by batch: lifecycle events act on subscriptions, `missed` and a
    recreation request a full delta pass, change notifications name the mailboxes whose delta round is due."""
    outlook = section(settings, MeetingSettings)
    counts: dict[str, Any] = {"notifications": 0, "dropped": 0}
    changed: set[uuid.UUID] = set()
    while True:
        rows = await _claim(db, now)
        counts["notifications"] += len(rows)
        counts["dropped"] += sum(1 for r in rows if r["mailbox_id"] is None)
        changed.update(r["mailbox_id"] for r in rows if r["kind"] == "CHANGE" and r["mailbox_id"] is not None)
        lifecycle = [r for r in rows if r["kind"] == "LIFECYCLE"]
        if lifecycle and _sync_ready(outlook):
            rules = await _policy(db)
            async with _client(outlook, rules) as client:
                missed = await _lifecycle(_maintainer(db, client, rules, settings, outlook), lifecycle, now, counts)
            await subscriptions.request_full_pass(db, missed, now)
            changed.update(missed)
        if len(rows) < BATCH:
            break
    counts["mailboxes_changed"] = sorted(str(m) for m in changed)
    counts["rounds_queued"] = await defer_rounds(db, sorted(changed))
    return counts


async def defer_rounds(db: Database, mailbox_ids: list[uuid.UUID]) -> int:
    """One delta round per mailbox, unless one is already waiting for it."""
    queued = 0
    if mailbox_ids:
        async with db.unit_of_work() as session:
            for mailbox_id in mailbox_ids:
                queued += await webhook.defer_in(session, DELTA_TASK, queueing_lock=delta_lock(mailbox_id),
                                                 mailbox_id=str(mailbox_id))
    return queued


@job(blueprint, name=PROCESS_JOB, cron="* * * * *", unit_of_work=False, history=True, queueing_lock=PROCESS_LOCK)
async def outlook_process_notifications(scope: JobScope, timestamp: int | None = None) -> dict[str, Any]:
    """Deferred by the webhook (one waiting at a time); every minute as a safety net."""
    return await process(scope.db, scope.settings, now=scope.now)


async def delta_round(db: Database, settings: KernelSettings, *, mailbox_id: uuid.UUID, now: datetime,
                      full: bool = False) -> dict[str, Any]:
    outlook = section(settings, MeetingSettings)
    if not outlook.graph_configured:
        return {"skipped": "sync off"}
    rules = await _policy(db)
    async with _client(outlook, rules) as client:
        return await sync.DeltaRound(db, client, rules=rules, default_zone=settings.default_timezone).run(
            mailbox_id, now=now, full=full)


@job(blueprint, name=DELTA_JOB, unit_of_work=False, history=True,
     lock=lambda kwargs: f"outlook:mailbox:{kwargs['mailbox_id']}",
     retry=procrastinate.RetryStrategy(max_attempts=5, exponential_wait=2))
async def outlook_delta_round(scope: JobScope, mailbox_id: str, full: bool = False) -> dict[str, Any]:
    """One delta round of one mailbox (the mailbox's lock: one round at a time across all workers)."""
    return await delta_round(scope.db, scope.settings, mailbox_id=uuid.UUID(mailbox_id), now=scope.now, full=full)


NOTIFICATION_DAYS = 7
_PURGE = """
    DELETE FROM meeting_attendance.outlook_notifications WHERE id IN (
        SELECT id FROM meeting_attendance.outlook_notifications
         WHERE received_at < %(cutoff)s AND status <> 'PENDING' ORDER BY id LIMIT %(batch)s)"""


async def purge_notifications(db: Database, *, now: datetime) -> int:
    """Processed notifications older than 7 days (the replay window), batch by batch."""
    total = 0
    while True:
        async with db.unit_of_work() as session:
            removed = await (await statements(session)).execute(
                _PURGE, {"cutoff": now - timedelta(days=NOTIFICATION_DAYS), "batch": BATCH})
        total += removed
        if removed < BATCH:
            return total


@job(blueprint, name="outlook_purge_notifications", cron="41 3 * * *", unit_of_work=False, history=True)
async def outlook_purge_notifications(scope: JobScope, timestamp: int) -> int:
    return await purge_notifications(scope.db, now=scope.now)
