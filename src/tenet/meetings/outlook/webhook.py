# ruff: noqa: S608  (SQL is built from this module's constants; values are always bound parameters)
"""Graph's callers (spec layer 5, GRAPH.md "Subscriptions and notifications"): `POST /outlook/notifications` and
`/outlook/lifecycle`.

Graph wants an answer within 3 s (or it retries for hours and throttles a slow endpoint), so a request does only
this, in one unit of work: check `clientState` on every item in constant time and that Tenet can use the item (a bad
item is dropped and counted, the good ones kept: never a 4xx for a batch, which Graph would retry with its good
items), insert the kept items in one statement (the mailbox found through the subscription id), and defer
`outlook_process_notifications` unless one is already waiting (a storm queues one job). No Graph call, no lock
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
from procrastinate.exceptions import AlreadyEnqueued
from prometheus_client import Counter, Histogram
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.db.database import after_commit
from tenet.kernel.errors import BadRequest
from tenet.kernel.statements import Unit, statements
from tenet.kernel.text import storable
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
    "clientState, an item Tenet cannot use, or the sync is off)", ["kind", "outcome"])
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
    """Graph's `{"value": [...]}`; anything else is 400 (Graph never sends it), deep nesting included (the parser's
    RecursionError). Numbers are read as floats: no field Tenet reads is a number, and an integer literal of thousands
    of digits (valid JSON, but past int()'s 4,300-digit limit) must not fail a batch whose other items are good."""
    try:
        payload = json.loads(body, parse_int=float)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
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


def _secret_bytes(value: str) -> bytes:
    # A JSON escape can name a lone surrogate, which UTF-8 cannot encode: surrogatepass keeps the comparison total
    # (such a clientState simply does not match), so no item can make the check raise.
    return value.encode("utf-8", "surrogatepass")


def authentic(items: list[dict[str, Any]], client_state: str) -> tuple[list[dict[str, Any]], int]:
    """The items carrying our clientState (compared in constant time, each one), and how many did not."""
    expected = _secret_bytes(client_state)
    kept = [item for item in items if isinstance(item.get("clientState"), str)
            and hmac.compare_digest(_secret_bytes(item["clientState"]), expected)]
    return kept, len(items) - len(kept)


# What an item must carry, as non-empty text, for Tenet to use it: the subscription names the mailbox, the change type
# or lifecycle event says what to do.
REQUIRED = {"CHANGE": ("subscriptionId", "changeType"), "LIFECYCLE": ("subscriptionId", "lifecycleEvent")}


def usable(item: dict[str, Any], kind: str) -> bool:
    """Whether Tenet can use an authentic item: its required members are non-empty text, and every member it stores
    is text PostgreSQL can hold (no NUL, no lone surrogate). Anything else is dropped and counted like a wrong
    clientState: refusing the batch would make Graph retry the good items with it for hours."""
    for name in REQUIRED[kind]:
        value = item.get(name)
        if not isinstance(value, str) or not value or not storable(value):
            return False
    if kind == "CHANGE":
        data = item.get("resourceData")
        for value in (item.get("resource"), data.get("id") if isinstance(data, dict) else None):
            if isinstance(value, str) and not storable(value):
                return False
    return True


async def _defer_processing(session: Unit) -> None:
    await defer_in(session, PROCESS_TASK, queueing_lock=PROCESS_LOCK)


async def defer_in(session: Unit, task: str, *, queueing_lock: str, **kwargs: Any) -> bool:
    """Queue `task` in this transaction (its row and NOTIFY take effect with the commit), behind a savepoint: a job
    already waiting with the same queueing lock (its unique index) leaves the transaction's other rows alone.
    Answers whether a job was queued."""
    run = await statements(session)
    driver = await run.connection()
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


async def receive(session: Unit, *, settings: MeetingSettings, kind: str, items: list[dict[str, Any]],
                  now: datetime) -> Received:
    """Persist the batch's authentic items and queue their processing. With the sync off (no credentials or no
    clientState configured) everything is dropped: nothing can be checked or processed."""
    secret = settings.graph_notification_client_state
    if not settings.graph_configured or secret is None:
        log.warning("outlook notifications dropped: the sync is off", extra={"items": len(items)})
        NOTIFICATIONS.labels(kind.lower(), "dropped").inc(len(items))
        return Received(0, len(items))
    authentic_items, dropped = authentic(items, secret.get_secret_value())
    if dropped:
        log.warning("outlook notifications with a wrong clientState dropped", extra={"dropped": dropped})
        NOTIFICATIONS.labels(kind.lower(), "dropped").inc(dropped)
    kept = [item for item in authentic_items if usable(item, kind)]
    if len(kept) < len(authentic_items):
        unusable = len(authentic_items) - len(kept)
        log.warning("outlook notifications Tenet cannot use dropped", extra={"dropped": unusable})
        NOTIFICATIONS.labels(kind.lower(), "dropped").inc(unusable)
        dropped += unusable
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


def _count_kept_after_commit(session: Unit, kind: str, count: int) -> None:
    """Kept means stored: counted once the request's transaction has committed, never for a rolled-back one."""

    async def counted() -> None:
        NOTIFICATIONS.labels(kind.lower(), "kept").inc(count)

    after_commit(session, counted)
