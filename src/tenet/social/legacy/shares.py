"""Legacy item shares into user subscriptions. A share was in force in the old app, so it arrives accepted: the
owner offers the item (a pending subscription and its inbox message, as in Tenet) and the recipient accepts the
offer through the inbox (SOC-INV-12, SOC-INV-15 hold on the way); `can_edit` grants edit."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.statements import statements
from tenet.social import inbox, items
from tenet.social.legacy.engine import Context, Refused, require_mapped
from tenet.social.legacy.people import loose_boolean

MAX_MEMBERS = 500  # inbox.answer's group bound; a share offer never reaches it
_OWNER = "SELECT owner_id FROM social.schedule_items WHERE id = %(id)s"
_OFFER = """SELECT id FROM social.inbox_messages WHERE recipient_id = %(u)s AND message_type = 'schedule_item_shared'
             AND related_id = %(i)s AND status IN ('pending', 'read')"""
_SUBSCRIPTION = "SELECT item_id, subscriber_id, status FROM social.schedule_subscriptions WHERE id = %(id)s"


def _permission(row: dict[str, Any]) -> list[str]:
    return ["view", "edit"] if loose_boolean(row.get("can_edit")) else ["view"]


async def share_upsert(session: AsyncSession, ctx: Context, row: dict[str, Any],
                       mapped: uuid.UUID | None) -> uuid.UUID:
    item_id = await require_mapped(session, "schedule_items", row.get("item_id"), "schedule item")
    user_id = await require_mapped(session, "users", row.get("user_id"), "user")
    run = await statements(session)
    owner = await run.value(_OWNER, {"id": item_id})
    if owner is None:
        raise Refused("UNKNOWN_SCHEDULE_ITEM", "the shared item is gone in Tenet")
    if mapped is not None:
        await items.update_subscription(session, item_id=item_id, subscription_id=mapped, principal_id=owner,
                                        permission=_permission(row), notify_level=None, status=None, now=ctx.now)
        return mapped
    subscription = await items.share(session, item_id=item_id, principal_id=owner, subject_type="user",
                                     subject_id=user_id, permission=_permission(row), notify_level="all",
                                     inbox_limit=None, now=ctx.now)
    offer = await run.value(_OFFER, {"u": user_id, "i": item_id})
    await inbox.answer(session, message_id=offer, principal_id=user_id, accept=True, max_members=MAX_MEMBERS,
                       now=ctx.now)
    return subscription.id


async def share_remove(session: AsyncSession, ctx: Context, row: dict[str, Any], mapped: uuid.UUID | None) -> None:
    if mapped is None:
        return
    found = await (await statements(session)).one(_SUBSCRIPTION, {"id": mapped})
    if found is None or found["status"] == "unsubscribed":
        return
    owner = await (await statements(session)).value(_OWNER, {"id": found["item_id"]})
    await items.delete_subscription(session, item_id=found["item_id"], subscription_id=mapped, principal_id=owner,
                                    now=ctx.now)
