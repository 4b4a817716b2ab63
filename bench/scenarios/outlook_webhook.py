"""outlook_webhook: `POST /api/v1/meeting-attendance/outlook/notifications`, Graph's change notifications.

Graph wants the acknowledgement within 3 s, and a slow endpoint is throttled and then dropped, so the figure that
matters is the acknowledgement's tail. What Tenet does for it (src/tenet/meetings/outlook/webhook.py `receive`): parse
the body, check `clientState` of every item in constant time, then in one unit of work, in one round trip (a psycopg
pipeline, `Statements.ones`): BEGIN, insert the kept items (the mailbox found through the subscription id,
`webhook._INSERT`) and read whether a processing job is already waiting (`webhook._JOB_WAITING`); defer one when none
is (behind a savepoint); COMMIT; answer 202. No worker runs during the bench, so after the first request a job is
always waiting, on both sides: every measured request is the insert and the check.

The baseline is a bare endpoint storing the same rows: the same body parsing and constant-time check, the same two
statements imported from Tenet's module in the same pipeline, in one transaction. Each request is a Graph batch of
BATCH items (Graph sends one to a few per POST; duplicates of one change come as separate POSTs).

The mailbox and its subscription are stored in SQL (adding a mailbox through the API asks Graph for access, and no
Graph runs here), with the audit row the API would have written, so `tenet invariants check` holds after the run.
"""

from __future__ import annotations

import hmac
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg
from procrastinate.exceptions import AlreadyEnqueued
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from bench.loading import check_invariants, register_users
from bench.scenario import BaselineAnswer, BaselineRequest, DictCursor, Request
from tenet.meetings.outlook.webhook import _DEFERRER, _INSERT, _JOB_WAITING, MAX_ITEMS, PROCESS_LOCK, PROCESS_TASK

DESCRIPTION = "POST /outlook/notifications (Graph's change notifications) vs a bare endpoint storing the same rows"
PATH = "/api/v1/meeting-attendance/outlook/notifications"
CLIENT_STATE = "bench-client-state-9f1c2e7a5b3d"
SUBSCRIPTION = "bench-subscription-0001"
BATCH = 2
SERVICE_ENV = {
    # The sync is on (credentials set) but never reaches Graph here: the webhook makes no Graph call, and no worker
    # runs during the bench.
    "GRAPH_TENANT_ID": "00000000-0000-0000-0000-00000000bench",
    "GRAPH_CLIENT_ID": "00000000-0000-0000-0000-0000000bench1",
    "GRAPH_CLIENT_SECRET": "bench-secret-never-sent",
    "GRAPH_NOTIFICATION_CLIENT_STATE": CLIENT_STATE,
}


@dataclass(frozen=True)
class Context:
    database_url: str
    mailbox_id: uuid.UUID


def _body(serial: str) -> str:
    resource = "Users/00000000-0000-0000-0000-0000000000aa/Events/AAMkAGI2T" + serial
    items = [{"subscriptionId": SUBSCRIPTION, "subscriptionExpirationDateTime": "2026-12-05T18:23:45.9356913Z",
              "changeType": "updated", "resource": resource, "clientState": CLIENT_STATE,
              "tenantId": SERVICE_ENV["GRAPH_TENANT_ID"],
              "resourceData": {"@odata.type": "#Microsoft.Graph.Event", "@odata.id": resource,
                               "@odata.etag": 'W/"DwAAABYAAAAQ"', "id": "AAMkAGI2T" + serial}}
             for _ in range(BATCH)]
    return json.dumps({"value": items})


async def setup(client: httpx.AsyncClient, database_url: str) -> Context:
    (manager,) = await register_users(client, 1, prefix="outlook-admin")
    mailbox_id, now = uuid.uuid4(), datetime.now(UTC)
    async with await psycopg.AsyncConnection.connect(database_url) as connection:
        await connection.execute(
            "INSERT INTO meeting_attendance.outlook_mailboxes (id, address, kind, graph_user_id, state, created_by_id, "
            "created_at, updated_at, version) VALUES (%s, 'room@bench.example', 'SHARED', "
            "'00000000-0000-0000-0000-0000000000aa', 'OK', %s, %s, %s, 1)", (mailbox_id, manager.id, now, now))
        await connection.execute("INSERT INTO meeting_attendance.outlook_delta_cursors (mailbox_id) VALUES (%s)",
                                 (mailbox_id,))
        await connection.execute(
            "INSERT INTO meeting_attendance.outlook_subscriptions (id, mailbox_id, graph_subscription_id, resource, "
            "expires_at, status, created_at) VALUES (%s, %s, %s, '/users/00000000-0000-0000-0000-0000000000aa/events', "
            "%s, 'ACTIVE', %s)", (uuid.uuid4(), mailbox_id, SUBSCRIPTION, now + timedelta(minutes=4200), now))
        await connection.execute(
            "INSERT INTO meeting_attendance.audit_logs (occurred_at, actor_type, actor_id, action, resource, "
            "resource_id, changes) VALUES (%s, 'user', %s, 'OUTLOOK_MAILBOX_ADDED', 'OUTLOOK_MAILBOX', %s, %s)",
            (now, str(manager.id), str(mailbox_id), Jsonb({
                "entityId": str(mailbox_id), "entityType": "OUTLOOK_MAILBOX",
                "after": {"kind": "SHARED", "state": "OK"}})))
        await connection.commit()
    check_invariants(database_url)
    return Context(database_url=database_url, mailbox_id=mailbox_id)


def wrk_request(context: Context) -> Request:
    return Request(path=PATH, method="POST", headers={"Content-Type": "application/json"}, body=_body("Aa0001"))


def baseline_config(context: Context) -> dict[str, object]:
    return {"client_state": CLIENT_STATE}


def _text(value: Any, limit: int) -> str | None:
    return value[:limit] if isinstance(value, str) and value else None


async def baseline(cursor: DictCursor, request: BaselineRequest, config: dict[str, Any]) -> BaselineAnswer:
    payload = json.loads(request.body)
    items = payload.get("value") if isinstance(payload, dict) else None
    if not isinstance(items, list) or len(items) > MAX_ITEMS:
        return BaselineAnswer(400, {"code": "BAD_REQUEST"})
    expected = config["client_state"].encode()
    kept = [i for i in items if isinstance(i.get("clientState"), str)
            and hmac.compare_digest(i["clientState"].encode(), expected)]
    if not kept:
        return BaselineAnswer(202, None)
    params = {"now": datetime.now(UTC), "kind": "CHANGE", "subs": [_text(i.get("subscriptionId"), 128) for i in kept],
              "changes": [_text(i.get("changeType"), 32) for i in kept], "lifes": [None] * len(kept),
              "resources": [_text((i.get("resourceData") or {}).get("id"), 512) for i in kept]}
    connection = cursor.connection
    async with connection.pipeline():  # the rows and the waiting job's check: one round trip, as Tenet's
        await cursor.execute(_INSERT, params)
        waiting = connection.cursor(row_factory=dict_row)
        await waiting.execute(_JOB_WAITING)
    row = await waiting.fetchone()
    await waiting.close()
    if not (row and row["waiting"]):  # the first request of a run only: then one always waits (no worker runs)
        await cursor.execute("SAVEPOINT outlook_defer")
        try:
            await _DEFERRER.configure_task(PROCESS_TASK, connection=connection,
                                           queueing_lock=PROCESS_LOCK).defer_async()
        except AlreadyEnqueued:
            await cursor.execute("ROLLBACK TO SAVEPOINT outlook_defer")
        else:
            await cursor.execute("RELEASE SAVEPOINT outlook_defer")
    return BaselineAnswer(202, None)


def describe(context: Context) -> dict[str, object]:
    return {"batch_items": BATCH, "mailbox_id": str(context.mailbox_id)}


def verify(context: Context) -> dict[str, object]:
    """Every item either side stored is attributed to the mailbox (the subscription found); one job waits."""
    with psycopg.connect(context.database_url) as connection:
        counts = connection.execute(
            "SELECT count(*), count(*) FILTER (WHERE mailbox_id IS NULL) FROM meeting_attendance.outlook_notifications"
        ).fetchone()
        waiting = connection.execute(
            "SELECT count(*) FROM procrastinate_jobs WHERE queueing_lock = %s AND status = 'todo'",
            (PROCESS_LOCK,)).fetchone()
    assert counts is not None and waiting is not None  # aggregates always answer one row
    (stored, orphans), (jobs,) = counts, waiting
    check_invariants(context.database_url)
    facts = {"notifications_stored": stored, "without_mailbox": orphans, "processing_jobs_waiting": jobs,
             "invariants": "tenet invariants check passed after the runs"}
    if orphans or jobs != 1:
        raise SystemExit(f"notifications stored wrongly: {facts}")
    return facts
