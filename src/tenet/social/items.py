"""Schedule items and their subscriptions (spec 000 §C.4, §D; SOC-INV-10..13, 17).

Permission (SOC-INV-13), first match wins: the owner holds view+invite+edit; else the caller's own user
subscription (active or paused) decides; else the union over the item's group subscriptions (active or
paused, to active groups the caller is a current member of) of `subscription.permission ∩ ROLE_DEFAULT[role]`
(§C.2: creator view+invite+edit, admin view+invite, member view); else nothing (404). The SQL functions
`social.permission_bits` / `social.role_bits` encode it once for reads, writes and detectors.

Serialisation: every item-scoped command starts with `_lock_item` (the item row FOR UPDATE), then share-locks
the groups through which the caller could hold a right (group commands change members and roles only under
FOR UPDATE of the group row), and only then decides the caller's permission and writes. So a revoke and an
edit of one item run one after the other, and a write happens only if its writer holds the right at the
moment it commits (tests/concurrency/test_social_races.py proves it fails without the lock).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

import anyio
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel import audit
from tenet.kernel.audit import Actor
from tenet.kernel.db_errors import add_unique
from tenet.kernel.errors import DomainError
from tenet.kernel.ratelimit import consume_in
from tenet.kernel.settings import Rate
from tenet.kernel.statements import statements
from tenet.kernel.transitions import Refusal, transition
from tenet.social import errors, lifecycles, queries, recurrence
from tenet.social.common import active_account_ids, is_active_account, require_active_accounts
from tenet.social.models import SUBSCRIPTION_UNIQUE, InboxMessage, ScheduleItem, ScheduleSubscription
from tenet.social.permissions import EDIT, INVITE, ROLE_BITS, VIEW, bits_of, canonical, names_of

_PERMISSION_ONE = queries.PERMISSION_SQL + " WHERE i.id = %(item)s"
_PERMISSION_ANY = queries.PERMISSION_SQL + " WHERE i.id = ANY(%(ids)s)"


@dataclass(frozen=True)
class Decision:
    item: ScheduleItem
    bits: int

    def require(self, needed: int) -> None:
        if not self.bits & VIEW:
            raise errors.ScheduleItemNotFound()
        if self.bits & needed != needed:
            raise errors.ScheduleItemPermissionDenied(needed=names_of(needed), held=names_of(self.bits))


async def _lock_item(session: AsyncSession, item_id: uuid.UUID) -> ScheduleItem | None:
    """THE serialisation point of an item: its row FOR UPDATE, held until the transaction ends."""
    return (await session.scalars(
        select(ScheduleItem).where(ScheduleItem.id == item_id).with_for_update()
        .execution_options(populate_existing=True))).one_or_none()


_SHARE_LOCK_GRANTING_GROUPS = """
    SELECT g.id FROM social.groups g
     WHERE g.id IN (SELECT s.subscriber_group_id FROM social.schedule_subscriptions s
                     WHERE s.item_id = %(item)s AND s.subject_type = 'group')
       AND g.id IN (SELECT group_id FROM social.group_members WHERE user_id = %(me)s AND status <> 'removed')
     ORDER BY g.id FOR SHARE OF g
"""


async def decide(session: AsyncSession, item_id: uuid.UUID, principal_id: uuid.UUID) -> Decision:
    """Lock the item and the groups that could grant, then compute the caller's permission (404 when the
    item does not exist or the caller may not view it)."""
    item = await _lock_item(session, item_id)
    if item is None:
        raise errors.ScheduleItemNotFound()
    # Freeze the caller's roles in the groups the item is shared with (id order, FOR SHARE), then decide.
    run = await statements(session)
    await run.execute(_SHARE_LOCK_GRANTING_GROUPS, {"item": item_id, "me": principal_id})
    row = await run.one(_PERMISSION_ONE, {"item": item_id, "me": principal_id})
    assert row is not None  # the item is locked: it exists
    decision = Decision(item, int(row["bits"]))
    if not decision.bits & VIEW:
        raise errors.ScheduleItemNotFound()
    return decision


async def viewable(session: AsyncSession, item_ids: list[uuid.UUID], principal_id: uuid.UUID
                   ) -> dict[uuid.UUID, int]:
    """The caller's bits on each of `item_ids` that exists and is viewable (no lock: reads for extraction)."""
    if not item_ids:
        return {}
    rows = await (await statements(session)).all(_PERMISSION_ANY, {"ids": list(item_ids), "me": principal_id})
    return {row["id"]: int(row["bits"]) for row in rows if row["bits"] & VIEW}


# --- items ---------------------------------------------------------------------------------------------


async def default_timezone_of(session: AsyncSession, user_id: uuid.UUID, fallback: str) -> str:
    zone: str | None = await (await statements(session)).value(
        "SELECT settings #>> '{preferences,timezone}' FROM social.profiles WHERE id = %(u)s", {"u": user_id})
    return zone or fallback


async def _check_series(**fields: Any) -> recurrence.Series:
    """recurrence.check_series in a worker thread: it walks the rule to its first and last occurrence (bounded, but
    CPU work a client's rule decides)."""
    return await anyio.to_thread.run_sync(partial(recurrence.check_series, **fields))


async def create_item(session: AsyncSession, *, principal_id: uuid.UUID, title: str, description: str | None,
                      start_at: datetime, end_at: datetime, timezone: str | None, recurrence_rule: str | None,
                      source_type: str, status: str, now: datetime, default_timezone: str | None = None
                      ) -> ScheduleItem:
    """An item of the caller's; without a time zone, in theirs (settings), else `default_timezone`."""
    if timezone is None:
        if default_timezone is None:
            raise TypeError("an item needs a time zone, or a default zone to fall back on")
        timezone = await default_timezone_of(session, principal_id, default_timezone)
    series = await _check_series(start_at=start_at, end_at=end_at, timezone=timezone, recurrence_rule=recurrence_rule)
    await require_active_accounts(session, [principal_id])
    item = ScheduleItem(id=uuid.uuid4(), owner_id=principal_id, title=title, description=description, start_at=start_at,
                        end_at=end_at, timezone=timezone, recurrence_rule=series.rule,
                        series_end_at=series.series_end_at, source_type=source_type, status=status, version=1,
                        created_at=now, updated_at=now, created_by=principal_id, updated_by=principal_id)
    session.add(item)
    await session.flush()
    return item


def _version_refusal(use_if_match: bool):
    from tenet.kernel.errors import PreconditionFailed, VersionConflict

    def refuse(refusal: Refusal[ScheduleItem]) -> DomainError:
        if refusal.current is None:
            return errors.ScheduleItemNotFound()
        error = PreconditionFailed if use_if_match else VersionConflict
        return error(current_version=refusal.version)

    return refuse


async def update_item(session: AsyncSession, *, item_id: uuid.UUID, principal_id: uuid.UUID, changes: dict[str, Any],
                      expected_version: int | None, if_match: bool, now: datetime) -> tuple[ScheduleItem, int]:
    """Holders of edit change fields and status; start, end, zone and rule are re-validated together."""
    decision = await decide(session, item_id, principal_id)
    decision.require(EDIT)
    item = decision.item
    merged = {name: changes.get(name, getattr(item, name))
              for name in ("start_at", "end_at", "timezone", "recurrence_rule")}
    values: dict[str, Any] = {k: v for k, v in changes.items() if k in ("title", "description", "source_type")}
    if set(changes) & set(merged):
        series = await _check_series(**merged)
        values.update(start_at=merged["start_at"], end_at=merged["end_at"], timezone=merged["timezone"],
                      recurrence_rule=series.rule, series_end_at=series.series_end_at)
    values.update(status=changes.get("status", item.status), updated_at=now, updated_by=principal_id)
    updated = await transition(session, lifecycles.SCHEDULE_ITEM, "update", model=ScheduleItem, id=item_id,
                               values=values, expected_version=expected_version, refuse=_version_refusal(if_match))
    return updated, decision.bits


async def delete_item(session: AsyncSession, *, item_id: uuid.UUID, principal_id: uuid.UUID, now: datetime) -> None:
    """Only the owner deletes (editors may cancel)."""
    decision = await decide(session, item_id, principal_id)
    if decision.item.owner_id != principal_id:
        raise errors.ScheduleItemPermissionDenied("Only the owner may delete an item", needed=["owner"],
                                                  held=names_of(decision.bits))
    await delete_items(session, item_ids=[item_id], principal_id=principal_id, now=now)


_DISABLE_JOBS_ON = """
    UPDATE social.automation_jobs SET status = 'disabled', next_run_at = NULL, version = version + 1,
           updated_at = %(now)s
     WHERE id IN (SELECT id FROM social.automation_jobs WHERE target_type = 'schedule_item'
                    AND target_id = ANY(%(ids)s) ORDER BY id FOR UPDATE) AND status = 'active'
"""
_ARCHIVE_ORPHANED_TODOS = """
    UPDATE social.todos t SET status = 'archived', version = version + 1, updated_at = %(now)s
     WHERE t.status = 'pending' AND t.source_ids @> jsonb_build_array(CAST(%(item)s AS text))
       AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements_text(t.source_ids) e(x)
                         JOIN social.schedule_items i ON i.id = e.x::uuid
                        WHERE i.id <> %(item)s)
"""
_DISMISS_OFFERS_OF = """
    UPDATE social.inbox_messages SET status = 'dismissed', acted_at = %(now)s, acted_by = %(actor)s,
           read_at = coalesce(read_at, %(now)s)
     WHERE related_type = 'schedule_item' AND related_id = %(item)s AND actionable AND status IN ('pending', 'read')
"""


async def delete_items(session: AsyncSession, *, item_ids: list[uuid.UUID], principal_id: uuid.UUID | None,
                       now: datetime) -> int:
    """Delete items the way spec §B says: subscriptions cascade, pending todos left with no existing source are
    archived (SOC-INV-17; a todo with another live source stays pending, done and canceled ones keep their
    status), open share offers are dismissed, and automations aimed at the item are disabled. Locks: the jobs
    aimed at the items (id order), then each item (id order)."""
    if not item_ids:
        return 0
    ids = sorted(set(item_ids))
    run = await statements(session)
    await run.execute(_DISABLE_JOBS_ON, {"ids": ids, "now": now})
    deleted = 0
    for item_id in ids:
        if await _lock_item(session, item_id) is None:
            continue
        params = {"item": item_id, "now": now, "actor": principal_id}
        async with run.pipeline():
            await run.execute(_ARCHIVE_ORPHANED_TODOS, params)
            await run.execute(_DISMISS_OFFERS_OF, params)
            await run.execute("DELETE FROM social.schedule_items WHERE id = %(item)s", params)
        if principal_id is not None:
            await audit.record(session, action="social.schedule_item.deleted", actor=Actor.user(principal_id),
                               subject=("schedule_item", item_id), now=now)
        deleted += 1
    return deleted


# --- subscriptions -------------------------------------------------------------------------------------


async def _subscription(session: AsyncSession, item_id: uuid.UUID, subscriber_id: uuid.UUID
                        ) -> ScheduleSubscription | None:
    return (await session.scalars(
        select(ScheduleSubscription)
        .where(ScheduleSubscription.item_id == item_id, ScheduleSubscription.subscriber_id == subscriber_id)
        .execution_options(populate_existing=True))).one_or_none()


async def _blocked_between(session: AsyncSession, a: uuid.UUID, b: uuid.UUID) -> bool:
    low, high = sorted((a, b))
    return bool(await (await statements(session)).value(
        "SELECT 1 FROM social.friendships WHERE user_low_id = %(l)s AND user_high_id = %(h)s AND status = 'blocked'",
        {"l": low, "h": high}))


async def _snapshot(session: AsyncSession, item: ScheduleItem, sender_id: uuid.UUID) -> dict[str, Any]:
    sender = await (await statements(session)).value("SELECT username FROM social.profiles WHERE id = %(u)s",
                                                     {"u": sender_id})
    return {"title": item.title, "start_at": item.start_at.isoformat(), "end_at": item.end_at.isoformat(),
            "timezone": item.timezone, "recurrence_rule": item.recurrence_rule, "sender_username": sender}


async def share(session: AsyncSession, *, item_id: uuid.UUID, principal_id: uuid.UUID, subject_type: str,
                subject_id: uuid.UUID, permission: list[str] | None, notify_level: str, inbox_limit: Rate | None,
                now: datetime) -> ScheduleSubscription:
    """Offer the item to a user (a pending subscription and an actionable inbox message: D-14), or share it
    with a group the caller is a current member of (active at once; an informational message to each active
    member). Needs `invite`; grants at most what the caller holds."""
    await require_active_accounts(session, [principal_id])
    # The recipient's account is locked first (the global lock order) but judged only after the item: one who
    # may not invite on it learns nothing about who exists (issue 24 item 9).
    offered_to_another = subject_type == "user" and subject_id != principal_id
    recipient_active = not offered_to_another or await is_active_account(session, subject_id)
    decision = await decide(session, item_id, principal_id)
    decision.require(INVITE)
    if subject_type == "user":
        if not recipient_active:
            raise errors.RecipientUnavailable()  # as for one who blocked the sharer
        return await _offer(session, decision, subject_id, permission, notify_level, principal_id, inbox_limit, now)
    return await _share_with_group(session, decision, subject_id, permission, notify_level, principal_id, now)


def _granted(permission: list[str] | None, default_bits: int, held: int) -> list[str]:
    wanted = canonical(permission) if permission is not None else names_of(default_bits & held)
    if bits_of(wanted) & ~held:
        raise errors.PermissionExceedsGrantor(held=names_of(held), requested=wanted)
    return wanted


async def _offer(session: AsyncSession, decision: Decision, user_id: uuid.UUID, permission: list[str] | None,
                 notify_level: str, principal_id: uuid.UUID, inbox_limit: Rate | None, now: datetime
                 ) -> ScheduleSubscription:
    item = decision.item
    if user_id == item.owner_id:
        raise errors.CannotSubscribeOwner()
    if await _blocked_between(session, principal_id, user_id):
        raise errors.RecipientUnavailable()
    granted = _granted(permission, VIEW, decision.bits)
    existing = await _subscription(session, item.id, user_id)
    if existing is not None and existing.status != "unsubscribed":
        raise errors.SubscriptionExists(subscription_id=str(existing.id), subscription_status=existing.status)
    await _consume_inbox_write(session, principal_id, inbox_limit, now)
    values = {"permission": granted, "notify_level": notify_level, "updated_at": now, "updated_by": principal_id,
              "created_by": principal_id, "accepted_at": None}
    if existing is not None:
        subscription = await transition(session, lifecycles.SUBSCRIPTION, "reoffer", model=ScheduleSubscription,
                                        id=existing.id, values=values, refuse=_subscription_refusal)
    else:
        subscription = ScheduleSubscription(id=uuid.uuid4(), item_id=item.id, subject_type="user",
                                            subscriber_id=user_id, status="pending", version=1, created_at=now,
                                            **values)
        await add_unique(session, subscription, on_violation={SUBSCRIPTION_UNIQUE: errors.SubscriptionExists})
    content = {**await _snapshot(session, item, principal_id), "permission": granted, "notify_level": notify_level}
    session.add(InboxMessage(id=uuid.uuid4(), recipient_id=user_id, sender_id=principal_id,
                             message_type="schedule_item_shared", content=content, related_type="schedule_item",
                             related_id=item.id, actionable=True, status="pending", created_at=now,
                             created_by=principal_id))
    await session.flush()
    await audit.record(session, action="social.subscription.offered", actor=Actor.user(principal_id),
                       subject=("subscription", subscription.id), scope=("schedule_item", item.id), now=now,
                       data={"subscriber_id": user_id, "permission": granted})
    return subscription


async def _consume_inbox_write(session: AsyncSession, principal_id: uuid.UUID, limit: Rate | None,
                               now: datetime) -> None:
    if limit is None:
        return
    await consume_in(session, f"social-inbox-write:user:{principal_id}", limit, now,
                     error=lambda retry_after: errors.InboxWriteLimitReached(retry_after_seconds=retry_after,
                                                                             limit=limit.limit))


_GROUP_AND_ROLE = """
    SELECT g.status, g.visibility, m.role FROM social.groups g
      LEFT JOIN social.group_members m ON m.group_id = g.id AND m.user_id = %(me)s AND m.status <> 'removed'
     WHERE g.id = %(g)s FOR SHARE OF g
"""
_OTHER_ACTIVE_MEMBERS = """
    SELECT user_id FROM social.group_members WHERE group_id = %(g)s AND status = 'active' AND user_id <> %(me)s
"""


async def _share_with_group(session: AsyncSession, decision: Decision, group_id: uuid.UUID,
                            permission: list[str] | None, notify_level: str, principal_id: uuid.UUID, now: datetime
                            ) -> ScheduleSubscription:
    item = decision.item
    run = await statements(session)
    row = await run.one(_GROUP_AND_ROLE, {"g": group_id, "me": principal_id})
    # A group the caller may not see (private or archived, not theirs) answers as a missing one.
    if row is None or (row["role"] is None and (row["visibility"] != "public" or row["status"] != "active")):
        raise errors.SubscriptionSubjectNotFound()
    if row["role"] is None:
        raise errors.NotGroupMember(group_id=str(group_id))
    if row["status"] != "active":
        raise errors.GroupNotActive(group_id=str(group_id))
    granted = _granted(permission, ROLE_BITS[row["role"]], decision.bits)
    existing = await _subscription(session, item.id, group_id)
    if existing is not None and existing.status != "unsubscribed":
        raise errors.SubscriptionExists(subscription_id=str(existing.id), subscription_status=existing.status)
    values = {"permission": granted, "notify_level": notify_level, "updated_at": now, "updated_by": principal_id,
              "created_by": principal_id}
    if existing is not None:
        subscription = await transition(session, lifecycles.SUBSCRIPTION, "reshare", model=ScheduleSubscription,
                                        id=existing.id, values=values, refuse=_subscription_refusal)
    else:
        subscription = ScheduleSubscription(id=uuid.uuid4(), item_id=item.id, subject_type="group",
                                            subscriber_id=group_id, status="active", version=1, created_at=now,
                                            **values)
        await add_unique(session, subscription, on_violation={SUBSCRIPTION_UNIQUE: errors.SubscriptionExists})
    members = await run.all(_OTHER_ACTIVE_MEMBERS, {"g": group_id, "me": principal_id})
    recipients = await active_account_ids(session, [member["user_id"] for member in members])
    content = {**await _snapshot(session, item, principal_id), "permission": granted, "notify_level": notify_level,
               "via_group_id": str(group_id)}
    session.add_all(InboxMessage(id=uuid.uuid4(), recipient_id=r, sender_id=principal_id,
                                 message_type="schedule_item_shared", content=content, related_type="schedule_item",
                                 related_id=item.id, actionable=False, status="pending", created_at=now,
                                 created_by=principal_id) for r in sorted(recipients))
    await session.flush()
    await audit.record(session, action="social.subscription.shared_with_group", actor=Actor.user(principal_id),
                       subject=("subscription", subscription.id), scope=("schedule_item", item.id), now=now,
                       data={"group_id": group_id, "permission": granted, "recipients": len(recipients)})
    return subscription


def _subscription_refusal(refusal: Refusal[ScheduleSubscription]) -> DomainError:
    if refusal.current is None:
        return errors.SubscriptionNotFound()
    return errors.SubscriptionStateConflict(current_status=refusal.status)


async def update_subscription(session: AsyncSession, *, item_id: uuid.UUID, subscription_id: uuid.UUID,
                              principal_id: uuid.UUID, permission: list[str] | None, notify_level: str | None,
                              status: str | None, now: datetime) -> ScheduleSubscription:
    """Editors change permission (at most their own) and notify level; the subscriber changes its own notify
    level and pauses or resumes."""
    decision = await decide(session, item_id, principal_id)
    subscription = await session.get(ScheduleSubscription, subscription_id, populate_existing=True)
    if subscription is None or subscription.item_id != item_id:
        raise errors.SubscriptionNotFound()
    is_self = subscription.subject_type == "user" and subscription.subscriber_id == principal_id
    if permission is not None:
        decision.require(EDIT)
        wanted = canonical(permission)
        if bits_of(wanted) & ~decision.bits:
            raise errors.PermissionExceedsGrantor(held=names_of(decision.bits), requested=wanted)
    if notify_level is not None and not is_self:
        decision.require(EDIT)
    if status is not None and not is_self:
        raise errors.ScheduleItemPermissionDenied("Only the subscriber pauses or resumes", needed=["subscriber"],
                                                  held=names_of(decision.bits))
    values: dict[str, Any] = {"updated_at": now, "updated_by": principal_id}
    if permission is not None:
        values["permission"] = canonical(permission)
    if notify_level is not None:
        values["notify_level"] = notify_level
    if subscription.status == "unsubscribed":
        raise errors.SubscriptionStateConflict(current_status=subscription.status)
    if status is not None and status != subscription.status:
        if subscription.status == "pending":
            raise errors.SubscriptionStateConflict(current_status=subscription.status)
        name = "pause" if status == "paused" else "resume"
    else:
        name = f"change_{subscription.status}"
    result = await transition(session, lifecycles.SUBSCRIPTION, name, model=ScheduleSubscription, id=subscription_id,
                              values=values, refuse=_subscription_refusal)
    if permission is not None:
        await audit.record(session, action="social.subscription.permission_changed", actor=Actor.user(principal_id),
                           subject=("subscription", subscription_id), scope=("schedule_item", item_id), now=now,
                           data={"permission": result.permission})
    return result


async def delete_subscription(session: AsyncSession, *, item_id: uuid.UUID, subscription_id: uuid.UUID,
                              principal_id: uuid.UUID, now: datetime) -> None:
    """Unsubscribe (the subscriber) or revoke (an editor); a pending offer is withdrawn (editors or the
    sharer) and its inbox message dismissed."""
    decision = await decide(session, item_id, principal_id)
    subscription = await session.get(ScheduleSubscription, subscription_id, populate_existing=True)
    if subscription is None or subscription.item_id != item_id:
        raise errors.SubscriptionNotFound()
    is_self = subscription.subject_type == "user" and subscription.subscriber_id == principal_id
    if subscription.status == "unsubscribed":
        return
    if subscription.status == "pending":
        if not (decision.bits & EDIT or subscription.created_by == principal_id or is_self):
            decision.require(EDIT)
        await transition(session, lifecycles.SUBSCRIPTION, "withdraw", model=ScheduleSubscription, id=subscription_id,
                         values={"updated_at": now, "updated_by": principal_id}, refuse=_subscription_refusal)
        await close_offer(session, item_id=item_id, recipient_id=subscription.subscriber_id, status="dismissed",
                          principal_id=principal_id, now=now)
        action = "social.subscription.withdrawn"
    else:
        if not is_self:
            decision.require(EDIT)
        await transition(session, lifecycles.SUBSCRIPTION, "revoke", model=ScheduleSubscription, id=subscription_id,
                         values={"updated_at": now, "updated_by": principal_id}, refuse=_subscription_refusal)
        action = "social.subscription.revoked"
    await audit.record(session, action=action, actor=Actor.user(principal_id),
                       subject=("subscription", subscription_id), scope=("schedule_item", item_id), now=now)


_CLOSE_OFFER = """
    UPDATE social.inbox_messages SET status = %(status)s, acted_at = %(now)s, acted_by = %(actor)s,
           read_at = coalesce(read_at, %(now)s)
     WHERE message_type = 'schedule_item_shared' AND related_id = %(item)s AND recipient_id = %(r)s AND actionable
       AND status IN ('pending', 'read')
"""


async def close_offer(session: AsyncSession, *, item_id: uuid.UUID, recipient_id: uuid.UUID, status: str,
                      principal_id: uuid.UUID | None, now: datetime) -> None:
    await (await statements(session)).execute(_CLOSE_OFFER, {"status": status, "now": now, "actor": principal_id,
                                                             "item": item_id, "r": recipient_id})


async def answer_offer(session: AsyncSession, *, item_id: uuid.UUID, principal_id: uuid.UUID, accept: bool,
                       now: datetime) -> ScheduleSubscription:
    """The invitee's answer through the inbox (the message is moved by the caller, under the item lock)."""
    subscription = await _subscription(session, item_id, principal_id)
    if subscription is None or subscription.status != "pending":
        raise errors.SubscriptionStateConflict(current_status=subscription.status if subscription else None)
    name = "accept" if accept else "reject"
    values: dict[str, Any] = {"updated_at": now, "updated_by": principal_id}
    if accept:
        values["accepted_at"] = now
    moved = await transition(session, lifecycles.SUBSCRIPTION, name, model=ScheduleSubscription, id=subscription.id,
                             values=values, refuse=_subscription_refusal)
    await audit.record(session, action=f"social.subscription.{'accepted' if accept else 'rejected'}",
                       actor=Actor.user(principal_id), subject=("subscription", moved.id),
                       scope=("schedule_item", item_id), now=now)
    return moved
