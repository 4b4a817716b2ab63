"""Each mailbox's Graph subscription on `/users/{id}/events` (spec layer 1; GRAPH.md "Subscriptions"): created
when missing, renewed within the policy's margin before expiry, recreated when Graph forgot it (404 on renewal,
`subscriptionRemoved`), reauthorized on `reauthorizationRequired`. `missed` and a recreation ask for a full delta
pass (the notifications in between are lost).

Graph calls never run inside a transaction: each mailbox is read, Graph is asked, then one short unit of work
stores the answer. MA-INV-36 (one ACTIVE subscription per mailbox) is the partial unique index; the job runs under
one advisory lock, and a creation that loses a race anyway deletes its Graph subscription again."""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError

from tenet.db.database import Database
from tenet.kernel.statements import statements
from tenet.kernel.transitions import transition
from tenet.meetings.outlook import lifecycles
from tenet.meetings.outlook.graph import GraphClient, GraphError
from tenet.meetings.outlook.models import OutlookDeltaCursor, OutlookSubscription
from tenet.meetings.outlook.policy import Policy
from tenet.meetings.queries import BASE

log = logging.getLogger(__name__)

_MAILBOXES = """
    SELECT m.id, m.graph_user_id, s.id AS row_id, s.graph_subscription_id, s.expires_at
      FROM meeting_attendance.outlook_mailboxes m
      LEFT JOIN meeting_attendance.outlook_subscriptions s ON s.mailbox_id = m.id AND s.status = 'ACTIVE'
     WHERE m.state IN ('OK', 'DEGRADED') AND m.graph_user_id IS NOT NULL
     ORDER BY m.id"""
# A disabled mailbox's subscription is deleted on Graph (Tenet's own object) and then ended here.
_DISABLED = """
    SELECT s.id AS row_id, s.graph_subscription_id
      FROM meeting_attendance.outlook_subscriptions s
      JOIN meeting_attendance.outlook_mailboxes m ON m.id = s.mailbox_id
     WHERE s.status = 'ACTIVE' AND m.state = 'DISABLED'
     ORDER BY s.id"""


def urls(public_base_url: str) -> tuple[str, str]:
    base = public_base_url.rstrip("/") + BASE + "/outlook"
    return base + "/notifications", base + "/lifecycle"


def resource(graph_user_id: str) -> str:
    return f"/users/{graph_user_id}/events"


class Maintainer:
    """One pass over the mailboxes (or the one a lifecycle event names) with one GraphClient."""

    def __init__(self, db: Database, client: GraphClient, *, policy: Policy, public_base_url: str,
                 client_state: str) -> None:
        self.db, self.client, self.policy = db, client, policy
        self.notification_url, self.lifecycle_url = urls(public_base_url)
        self.client_state = client_state
        self.counts = {"created": 0, "renewed": 0, "recreated": 0, "reauthorized": 0, "deleted": 0, "failed": 0}

    async def run(self, now: datetime) -> dict[str, int]:
        async with self.db.read_only() as session:
            rows = await (await statements(session)).all(_MAILBOXES)
            disabled = await (await statements(session)).all(_DISABLED)
        for gone in disabled:
            await self._delete(gone)
        margin = timedelta(minutes=self.policy.renewal_margin_minutes)
        for row in rows:
            try:
                if row["row_id"] is None:
                    await self.create(row["id"], row["graph_user_id"], now)
                elif row["expires_at"] <= now:
                    await self._end(row["row_id"], "expired")
                    await self.create(row["id"], row["graph_user_id"], now, counted="recreated")
                elif row["expires_at"] - now <= margin:
                    await self.renew(row, now)
            except GraphError as exc:
                self.counts["failed"] += 1
                log.warning("outlook subscription upkeep failed", extra={
                    "mailbox_id": str(row["id"]), "graph_status": exc.status, "graph_code": exc.code,
                    "graph_request_id": exc.request_id})
        return self.counts

    async def create(self, mailbox_id: uuid.UUID, graph_user_id: str, now: datetime, *,
                     counted: str = "created") -> None:
        expires = now + timedelta(minutes=self.policy.subscription_lifetime_minutes)
        made = await self.client.create_subscription(
            resource=resource(graph_user_id), notification_url=self.notification_url,
            lifecycle_url=self.lifecycle_url, expires_at=expires, client_state=self.client_state)
        granted = _expiry(made, expires)
        try:
            async with self.db.unit_of_work() as session:
                session.add(OutlookSubscription(
                    id=uuid.uuid4(), mailbox_id=mailbox_id, graph_subscription_id=str(made["id"]),
                    resource=resource(graph_user_id), expires_at=granted, status="ACTIVE", created_at=now))
                # Notifications from before this subscription are lost: a full delta pass catches up.
                if counted == "recreated":
                    await session.execute(update(OutlookDeltaCursor).where(
                        OutlookDeltaCursor.mailbox_id == mailbox_id).values(full_pass_requested_at=now))
        except IntegrityError:
            # Another pass made one first (MA-INV-36): ours is one too many.
            await self.client.delete_subscription(str(made["id"]))
            return
        self.counts[counted] += 1

    async def _delete(self, row: dict[str, Any]) -> None:
        try:
            await self.client.delete_subscription(row["graph_subscription_id"])
        except GraphError as exc:
            if exc.status != 404:  # 404: Graph already forgot it; anything else is tried again next pass
                self.counts["failed"] += 1
                log.warning("outlook subscription delete failed", extra={
                    "graph_subscription_id": row["graph_subscription_id"], "graph_status": exc.status,
                    "graph_code": exc.code, "graph_request_id": exc.request_id})
                return
        await self._end(row["row_id"], "delete")
        self.counts["deleted"] += 1

    async def renew(self, row: dict[str, Any], now: datetime) -> None:
        expires = now + timedelta(minutes=self.policy.subscription_lifetime_minutes)
        try:
            renewed = await self.client.renew_subscription(row["graph_subscription_id"], expires_at=expires)
        except GraphError as exc:
            if exc.status != 404:
                raise
            await self._end(row["row_id"], "removed")
            await self.create(row["id"], row["graph_user_id"], now, counted="recreated")
            return
        async with self.db.unit_of_work() as session:
            await transition(session, lifecycles.SUBSCRIPTION, "renew", model=OutlookSubscription, id=row["row_id"],
                             values={"expires_at": _expiry(renewed, expires), "renewed_at": now})
        self.counts["renewed"] += 1

    async def reauthorize(self, graph_subscription_id: str, now: datetime) -> None:
        row = await self._row(graph_subscription_id)
        if row is None:
            return
        try:
            await self.client.reauthorize_subscription(graph_subscription_id)
        except GraphError as exc:
            if exc.status != 404:
                raise
            await self.removed(graph_subscription_id, now)
            return
        async with self.db.unit_of_work() as session:
            await transition(session, lifecycles.SUBSCRIPTION, "renew", model=OutlookSubscription, id=row["row_id"],
                             values={"reauthorized_at": now})
        self.counts["reauthorized"] += 1

    async def removed(self, graph_subscription_id: str, now: datetime) -> None:
        """Graph removed it (`subscriptionRemoved`, or 404): a new one, then a full delta pass."""
        row = await self._row(graph_subscription_id)
        if row is None:
            return
        await self._end(row["row_id"], "removed")
        if row["state"] in ("OK", "DEGRADED") and row["graph_user_id"]:
            await self.create(row["id"], row["graph_user_id"], now, counted="recreated")

    async def _row(self, graph_subscription_id: str) -> dict[str, Any] | None:
        async with self.db.read_only() as session:
            return await (await statements(session)).one(
                "SELECT m.id, m.graph_user_id, m.state, s.id AS row_id FROM meeting_attendance.outlook_subscriptions s "
                "JOIN meeting_attendance.outlook_mailboxes m ON m.id = s.mailbox_id "
                "WHERE s.graph_subscription_id = %(g)s AND s.status = 'ACTIVE'", {"g": graph_subscription_id})

    async def _end(self, row_id: uuid.UUID, name: str) -> None:
        async with self.db.unit_of_work() as session:
            await transition(session, lifecycles.SUBSCRIPTION, name, model=OutlookSubscription,
                             where=(OutlookSubscription.id == row_id,))


def _expiry(answer: dict[str, Any], asked: datetime) -> datetime:
    """The expiry Graph granted (it may shorten what was asked; never trust it to be later than asked)."""
    value = answer.get("expirationDateTime")
    if not isinstance(value, str):
        return asked
    try:
        granted = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return asked
    return min(granted, asked)


async def request_full_pass(db: Database, mailbox_ids: list[uuid.UUID], now: datetime) -> None:
    """`missed`: drop the cursors' links so the next round is a full pass over the window."""
    if not mailbox_ids:
        return
    async with db.unit_of_work() as session:
        await session.execute(update(OutlookDeltaCursor).where(OutlookDeltaCursor.mailbox_id.in_(mailbox_ids))
                              .values(next_link=None, delta_link=None, full_pass_requested_at=now))
