# ruff: noqa: S608  (SQL is built from this module's constants; values are always bound parameters)
"""Graph's callers (spec layer 5, GRAPH.md "Subscriptions and notifications"): `POST /outlook/notifications` and
`/outlook/lifecycle`.

Graph wants an answer within 3 s (or it retries for hours and throttles a slow endpoint), so a request does only
this, in one unit of work: check `clientState` on every item in constant time (a bad item is dropped and counted,
the good ones kept), insert the kept items in one statement (the mailbox found through the subscription id), and
defer `outlook_process_notifications` unless one is already waiting (a storm queues one job). No Graph call, no lock
on domain rows. Duplicates and out-of-order copies are harmless: the worker reads Graph's state by delta, it never
applies a notification's content."""

from __future__ import annotations

import hmac
import json
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import procrastinate
import psycopg
from procrastinate.exceptions import AlreadyEnqueued
from prometheus_client import Counter, Histogram
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.db.database import after_commit
from tenet.kernel.errors import BadRequest
from tenet.kernel.statements import statements
from tenet.meetings.settings import MeetingSettings

log = logging.getLogger(__name__)

# Graph's deadline is 3 s: the buckets are dense below it, so "answers slower than 3 s" is one bucket's complement.
ACK_SECONDS = Histogram(
    "tenet_outlook_webhook_ack_seconds",
    "Time the Outlook webhooks took to answer Graph (whole request, commit included; Graph's deadline is 3 s)",
    ["kind"], buckets=(0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 5.0, 10.0))
NOTIFICATIONS = Counter(
    "tenet_outlook_notifications",
    "Graph notification items received by the webhooks: kept (stored for the worker) or dropped (wrong "
    "clientState, or the sync is off)", ["kind", "outcome"])
for _kind in ("change", "lifecycle"):  # at zero from the start, so the first drop is an increase rate() sees
    NOTIFICATIONS.labels(_kind, "kept")
    NOTIFICATIONS.labels(_kind, "dropped")

MAX_ITEMS = 1000  # Graph batches far fewer; a bigger body is not Graph's
PROCESS_JOB = "outlook_process_notifications"
PROCESS_TASK = f"meetings:{PROCESS_JOB}"
PROCESS_LOCK = "outlook:notifications"
DELTA_JOB = "outlook_delta_round"
DELTA_TASK = f"meetings:{DELTA_JOB}"


BINDING_JOB = "outlook_sync_binding"
BINDING_TASK = f"meetings:{BINDING_JOB}"
RECONCILE_JOB = "outlook_reconcile"
RECONCILE_TASK = f"meetings:{RECONCILE_JOB}"
_BOUND = """
    SELECT b.id, b.mailbox_id FROM meeting_attendance.outlook_bindings b
      JOIN unnest(CAST(%(mailboxes)s AS uuid[]), CAST(%(events)s AS text[])) AS r(mailbox_id, event_id)
        ON r.mailbox_id = b.mailbox_id AND r.event_id = b.graph_event_id
     WHERE b.status IN ('PENDING', 'ACTIVE')"""


def delta_lock(mailbox_id: object) -> str:
    """At most one waiting round per mailbox (a storm of notifications queues one)."""
    return f"outlook:delta:{mailbox_id}"
# Builds the deferral's statement only (procrastinate's own SQL), run on the request's connection.
_DEFERRER = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=""))

_INSERT = """
    INSERT INTO meeting_attendance.outlook_notifications
           (received_at, kind, mailbox_id, graph_subscription_id, change_type, lifecycle_event, resource_id)
    SELECT %(now)s, %(kind)s, s.mailbox_id, i.sub, i.change, i.life, i.res
      FROM unnest(%(subs)s::text[], %(changes)s::text[], %(lifes)s::text[], %(resources)s::text[])
           WITH ORDINALITY AS i(sub, change, life, res, n)
      LEFT JOIN meeting_attendance.outlook_subscriptions s ON s.graph_subscription_id = i.sub
     ORDER BY i.n"""
_JOB_WAITING = f"""
    SELECT EXISTS (SELECT 1 FROM procrastinate_jobs WHERE queueing_lock = '{PROCESS_LOCK}' AND status = 'todo')
           AS waiting"""


@dataclass(frozen=True)
class Received:
    kept: int
    dropped: int


def parse(body: bytes) -> list[dict[str, Any]]:
    """Graph's `{"value": [...]}`; anything else is 400 (Graph never sends it)."""
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest("The body is not JSON") from exc
    items = payload.get("value") if isinstance(payload, dict) else None
    if not isinstance(items, list) or len(items) > MAX_ITEMS or not all(isinstance(i, dict) for i in items):
        raise BadRequest('The body is not a Graph notification collection {"value": [...]}')
    return items


def _text(value: Any, limit: int = 512) -> str | None:
    return value[:limit] if isinstance(value, str) and value else None


def _resource_id(item: dict[str, Any]) -> str | None:
    data = item.get("resourceData")
    if isinstance(data, dict) and isinstance(data.get("id"), str):
        return _text(data["id"])
    resource = _text(item.get("resource"))
    return resource.rsplit("/", 1)[-1] if resource and "/" in resource else None


def authentic(items: list[dict[str, Any]], client_state: str) -> tuple[list[dict[str, Any]], int]:
    """The items carrying our clientState (compared in constant time, each one), and how many did not."""
    expected = client_state.encode()
    kept = [item for item in items if isinstance(item.get("clientState"), str)
            and hmac.compare_digest(item["clientState"].encode(), expected)]
    return kept, len(items) - len(kept)


async def _defer_processing(session: AsyncSession) -> None:
    await defer_in(session, PROCESS_TASK, queueing_lock=PROCESS_LOCK)


async def defer_in(session: AsyncSession, task: str, *, queueing_lock: str, **kwargs: Any) -> bool:
    """Queue `task` in this transaction (its row and NOTIFY take effect with the commit), behind a savepoint: a job
    already waiting with the same queueing lock (its unique index) leaves the transaction's other rows alone.
    Answers whether a job was queued."""
    run = await statements(session)
    connection = await session.connection()
    driver = (await connection.get_raw_connection()).driver_connection
    if not isinstance(driver, psycopg.AsyncConnection):
        raise TypeError("deferring a job in the unit of work needs the psycopg async driver")
    await run.execute("SAVEPOINT outlook_defer")
    try:
        await _DEFERRER.configure_task(task, connection=driver, queueing_lock=queueing_lock).defer_async(**kwargs)
    except AlreadyEnqueued:
        await run.execute("ROLLBACK TO SAVEPOINT outlook_defer")
        return False
    await run.execute("RELEASE SAVEPOINT outlook_defer")
    return True


async def defer_binding_sync(session: AsyncSession, *, binding_id: object, mailbox_id: object) -> bool:
    """One waiting sync per binding (its queueing lock); it runs under the mailbox's lock."""
    return await defer_in(session, BINDING_TASK, queueing_lock=f"outlook:binding:{binding_id}",
                          binding_id=str(binding_id), mailbox_id=str(mailbox_id))


async def defer_binding_syncs(session: AsyncSession, resources: set[tuple[Any, str]]) -> int:
    """The syncs of the live bindings whose (mailbox, event id) a notification named."""
    pairs = sorted(resources, key=str)
    rows = await (await statements(session)).all(_BOUND, {"mailboxes": [p[0] for p in pairs],
                                                         "events": [p[1] for p in pairs]})
    queued = 0
    for row in rows:
        queued += await defer_binding_sync(session, binding_id=row["id"], mailbox_id=row["mailbox_id"])
    return queued


async def receive(session: AsyncSession, *, settings: MeetingSettings, kind: str, items: list[dict[str, Any]],
                  now: datetime) -> Received:
    """Persist the batch's authentic items and queue their processing. With the sync off (no credentials or no
    clientState configured) everything is dropped: nothing can be checked or processed."""
    secret = settings.graph_notification_client_state
    if not settings.graph_configured or secret is None:
        log.warning("outlook notifications dropped: the sync is off", extra={"items": len(items)})
        NOTIFICATIONS.labels(kind.lower(), "dropped").inc(len(items))
        return Received(0, len(items))
    kept, dropped = authentic(items, secret.get_secret_value())
    if dropped:
        log.warning("outlook notifications with a wrong clientState dropped", extra={"dropped": dropped})
        NOTIFICATIONS.labels(kind.lower(), "dropped").inc(dropped)
    if not kept:
        return Received(0, dropped)
    _count_kept_after_commit(session, kind, len(kept))
    run = await statements(session)
    params = {"now": now, "kind": kind, "subs": [_text(i.get("subscriptionId"), 128) for i in kept],
              "changes": [_text(i.get("changeType"), 32) if kind == "CHANGE" else None for i in kept],
              "lifes": [_text(i.get("lifecycleEvent"), 64) if kind == "LIFECYCLE" else None for i in kept],
              "resources": [_resource_id(i) if kind == "CHANGE" else None for i in kept]}
    _, waiting = await run.ones((_INSERT, params), (_JOB_WAITING, None))
    if not (waiting and waiting["waiting"]):
        await _defer_processing(session)
    return Received(len(kept), dropped)


def _count_kept_after_commit(session: AsyncSession, kind: str, count: int) -> None:
    """Kept means stored: counted once the request's transaction has committed, never for a rolled-back one."""

    async def counted() -> None:
        NOTIFICATIONS.labels(kind.lower(), "kept").inc(count)

    after_commit(session, counted)
