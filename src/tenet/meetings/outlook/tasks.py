
"""Jobs of the Outlook sync (a blueprint of its own, registered under the meetings domain; docs/design/outlook.md
§8): the subscriptions' upkeep every minute, and the processing of what the webhook stored (deferred by it, with
a minute's safety net). Every body reads the policy row first, so a change takes effect at the next run.

Graph is called outside any transaction; the rows each answer changes are written in short units of work."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import procrastinate

from tenet.db.database import Database
from tenet.kernel.jobs import JobScope, job
from tenet.kernel.settings import KernelSettings, section
from tenet.kernel.statements import statements
from tenet.meetings.outlook import apply, graph, queries, reconcile, runs, subscriptions, sync, webhook
from tenet.meetings.outlook.policy import Policy
from tenet.meetings.outlook.webhook import (
    BINDING_JOB,
    DELTA_JOB,
    DELTA_TASK,
    PROCESS_JOB,
    PROCESS_LOCK,
    RECONCILE_JOB,
    RECONCILE_TASK,
    defer_binding_syncs,
    delta_lock,
)
from tenet.meetings.service import MeetingPolicy
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
    resources: set[tuple[uuid.UUID, str]] = set()
    while True:
        rows = await _claim(db, now)
        counts["notifications"] += len(rows)
        counts["dropped"] += sum(1 for r in rows if r["mailbox_id"] is None)
        changed.update(r["mailbox_id"] for r in rows if r["kind"] == "CHANGE" and r["mailbox_id"] is not None)
        resources.update((r["mailbox_id"], r["resource_id"]) for r in rows
                         if r["kind"] == "CHANGE" and r["mailbox_id"] is not None and r["resource_id"])
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
    counts["binding_syncs_queued"] = await _defer_bound(db, resources)
    return counts


async def _defer_bound(db: Database, resources: set[tuple[uuid.UUID, str]]) -> int:
    """A notification naming a bound event (a series master's update is the only trace of a change of its
    subject, or of an occurrence deleted silently): that binding's sync, besides the mailbox's delta round."""
    if not resources:
        return 0
    async with db.unit_of_work() as session:
        return await defer_binding_syncs(session, resources)


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
        binder = _binder(db, client, rules, settings, now)
        return await sync.DeltaRound(db, client, rules=rules, default_zone=settings.default_timezone,
                                     binder=binder).run(mailbox_id, now=now, full=full)


def _binder(db: Database, client: graph.GraphClient, rules: Policy, settings: KernelSettings,
            now: datetime) -> apply.BindingSync:
    return apply.BindingSync(db, client, rules=rules, default_zone=settings.default_timezone,
                             meeting_policy=MeetingPolicy.from_settings(settings), span=sync.window(now, rules))


def _mailbox_lock(kwargs: Mapping[str, Any]) -> str:
    return f"outlook:mailbox:{kwargs['mailbox_id']}"


async def sync_binding(db: Database, settings: KernelSettings, *, binding_id: uuid.UUID, now: datetime
                       ) -> dict[str, Any]:
    outlook = section(settings, MeetingSettings)
    if not outlook.graph_configured:
        return {"skipped": "sync off"}
    target = await apply.read_target(db, binding_id)
    if target is None:
        return {"skipped": "released, missing or its mailbox unreadable"}
    rules = await _policy(db)
    counts = apply.new_counts()
    async with _client(outlook, rules) as client:
        binder = _binder(db, client, rules, settings, now)
        return await runs.recorded(db, client, mailbox_id=target.mailbox_id, kind="BINDING", now=now, counts=counts,
                                   body=lambda: binder.run(binding_id, now=now, counts=counts))


@job(blueprint, name=BINDING_JOB, unit_of_work=False, history=True, lock=_mailbox_lock,
     retry=procrastinate.RetryStrategy(max_attempts=5, exponential_wait=2))
async def outlook_sync_binding(scope: JobScope, binding_id: str, mailbox_id: str) -> dict[str, Any]:
    """One binding's meetings in step with Graph (a new binding, a notification naming its event, an exclusion
    removed). `mailbox_id` names the lock: one writer per mailbox at a time, delta rounds included."""
    return await sync_binding(scope.db, scope.settings, binding_id=uuid.UUID(binding_id), now=scope.now)


async def reconcile_mailbox(db: Database, settings: KernelSettings, *, mailbox_id: uuid.UUID, now: datetime
                            ) -> dict[str, Any]:
    outlook = section(settings, MeetingSettings)
    if not outlook.graph_configured:
        return {"skipped": "sync off"}
    rules = await _policy(db)
    async with _client(outlook, rules) as client:
        return await reconcile.reconcile(db, _binder(db, client, rules, settings, now), mailbox_id=mailbox_id,
                                         now=now)


@job(blueprint, name=RECONCILE_JOB, unit_of_work=False, history=True, lock=_mailbox_lock,
     retry=procrastinate.RetryStrategy(max_attempts=3, exponential_wait=2))
async def outlook_reconcile(scope: JobScope, mailbox_id: str) -> dict[str, Any]:
    """Every live binding of the mailbox compared in full with Graph, the drift repaired (kind RECONCILE)."""
    return await reconcile_mailbox(scope.db, scope.settings, mailbox_id=uuid.UUID(mailbox_id), now=scope.now)


async def schedule(db: Database, settings: KernelSettings, *, now: datetime) -> dict[str, Any]:
    """The policy's `reconcile_cron`, read each minute (a change applies at the next minute, no restart)."""
    if not section(settings, MeetingSettings).graph_configured:
        return {}
    rules = await _policy(db)
    if not reconcile.due(rules, now):
        return {"due": False}
    queued = 0
    ids = await reconcile.mailboxes(db)
    if ids:
        async with db.unit_of_work() as session:
            for mailbox_id in ids:
                queued += await webhook.defer_in(session, RECONCILE_TASK, mailbox_id=str(mailbox_id),
                                                 queueing_lock=f"outlook:reconcile:{mailbox_id}")
    return {"due": True, "reconciliations_queued": queued}


@job(blueprint, name="outlook_schedule", cron="* * * * *", unit_of_work=False, history=True,
     lock="outlook:schedule")
async def outlook_schedule(scope: JobScope, timestamp: int) -> dict[str, Any]:
    """Queue each mailbox's reconciliation when the policy's cron names this minute."""
    return await schedule(scope.db, scope.settings, now=scope.now)


@job(blueprint, name=DELTA_JOB, unit_of_work=False, history=True,
     lock=_mailbox_lock, retry=procrastinate.RetryStrategy(max_attempts=5, exponential_wait=2))
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
