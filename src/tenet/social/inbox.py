"""Inbox actions (spec 000 §C.5, §E.1; SOC-INV-14, SOC-INV-15).

`accept` and `reject` perform the linked action in the same transaction: read the message, lock the linked
object in the domain's lock order (the item, the group or the friendship), move the message with a conditional
UPDATE (`status IN ('pending', 'read')`: of two accepts only one matches, the other answers 409
INBOX_MESSAGE_ALREADY_ACTED), then perform the linked transition. A deferred trigger checks at commit that an
accepted message's action really happened (`inbox_accept_has_effect`).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from tenet.db.database import Database
from tenet.kernel.errors import DomainError
from tenet.kernel.statements import statements
from tenet.kernel.transitions import Refusal, lock_rows, transition
from tenet.social import errors, friends, groups, items, lifecycles
from tenet.social.common import require_active_accounts
from tenet.social.models import Group, InboxMessage

PURGE_BATCH = 5000
RUN_RETENTION = timedelta(days=90)


# What the retention purge deletes, batch by batch (D-25).
_PURGES = {
    "inbox_messages": """
        DELETE FROM social.inbox_messages WHERE id IN (
            SELECT id FROM social.inbox_messages
             WHERE created_at < %(cutoff)s
               AND (status IN ('accepted', 'rejected', 'dismissed') OR (NOT actionable AND status = 'read'))
             LIMIT %(limit)s FOR UPDATE SKIP LOCKED)""",
    "automation_runs": """
        DELETE FROM social.automation_runs WHERE id IN (
            SELECT id FROM social.automation_runs
             WHERE status IN ('succeeded', 'failed') AND finished_at < %(runs_cutoff)s
             LIMIT %(limit)s FOR UPDATE SKIP LOCKED)""",
}


async def purge(db: Database, *, now: datetime, retention: timedelta) -> dict[str, int]:
    """D-25: answered or dismissed messages, and informational ones read, older than `retention`; automation
    runs finished more than 90 days ago. Batches that skip rows a request holds."""
    counts = {"inbox_messages": 0, "automation_runs": 0}
    for name, sql in _PURGES.items():
        while True:
            async with db.unit_of_work() as session:
                deleted = await (await statements(session)).execute(sql, {
                    "cutoff": now - retention, "limit": PURGE_BATCH, "runs_cutoff": now - RUN_RETENTION})
            counts[name] += deleted
            if deleted < PURGE_BATCH:
                break
    return counts


def _refusal(refusal: Refusal[InboxMessage]) -> DomainError:
    if refusal.current is None:
        return errors.InboxMessageNotFound()
    return errors.InboxMessageAlreadyActed(current_status=refusal.status)


async def _own(session: AsyncSession, message_id: uuid.UUID, principal_id: uuid.UUID) -> InboxMessage:
    message = await session.get(InboxMessage, message_id, populate_existing=True)
    if message is None or message.recipient_id != principal_id:
        raise errors.InboxMessageNotFound()
    return message


async def read(session: AsyncSession, *, message_id: uuid.UUID, principal_id: uuid.UUID,
               now: datetime) -> InboxMessage:
    """pending -> read; answering a message already read repeats its state."""
    message = await _own(session, message_id, principal_id)
    if message.status == "read":
        return message
    return await transition(session, lifecycles.INBOX_MESSAGE, "read", model=InboxMessage, id=message_id,
                            values={"read_at": now}, refuse=_refusal)


async def dismiss(session: AsyncSession, *, message_id: uuid.UUID, principal_id: uuid.UUID,
                  now: datetime) -> InboxMessage:
    message = await _own(session, message_id, principal_id)
    if message.actionable and message.status in ("pending", "read"):
        raise errors.InboxActionRequired()
    return await transition(session, lifecycles.INBOX_MESSAGE, "dismiss", model=InboxMessage, id=message_id,
                            values={"acted_at": now, "acted_by": principal_id, "read_at": message.read_at or now},
                            refuse=_refusal)


async def answer(session: AsyncSession, *, message_id: uuid.UUID, principal_id: uuid.UUID, accept: bool,
                 max_members: int, now: datetime) -> tuple[InboxMessage, dict[str, object] | None]:
    """Accept or reject an actionable message, performing its linked action (SOC-INV-15). Answers the message
    and, on accept, the effect: {type: friendship | group_member | subscription, id}."""
    if accept:
        # Accepting makes the recipient hold something (a friendship, a membership, a subscription).
        await require_active_accounts(session, [principal_id])
    message = await _own(session, message_id, principal_id)
    if not message.actionable:
        raise errors.InboxMessageNotActionable()
    # The linked object first (lock order: items, groups, friendships come before messages).
    friendship = None
    if message.message_type == "schedule_item_shared":
        if await items._lock_item(session, message.related_id) is None:
            raise errors.ScheduleItemNotFound()
    elif message.message_type == "group_invitation":
        await lock_rows(session, Group, [message.related_id])
    else:
        friendship = await friends._lock(session, message.related_id)
    moved = await transition(session, lifecycles.INBOX_MESSAGE, "accept" if accept else "reject",
                             model=InboxMessage, id=message_id,
                             values={"acted_at": now, "acted_by": principal_id, "read_at": message.read_at or now},
                             refuse=_refusal)
    effect: dict[str, object] | None = None
    if message.message_type == "friend_request":
        assert friendship is not None
        if accept:
            done = await friends._accept(session, friendship, principal_id, now)
            effect = {"type": "friendship", "id": done.id}
        else:
            await friends.act(session, friendship_id=friendship.id, principal_id=principal_id, action="decline",
                              now=now)
    elif message.message_type == "group_invitation":
        if accept:
            member = await groups.accept_invitation(session, message=message, max_members=max_members, now=now)
            effect = {"type": "group_member", "id": member.id}
    else:
        subscription = await items.answer_offer(session, item_id=message.related_id, principal_id=principal_id,
                                                accept=accept, now=now)
        if accept:
            effect = {"type": "subscription", "id": subscription.id}
    return moved, effect
