"""Groups, members and group invitations (spec 000 §C.2; SOC-INV-07..09).

Serialisation: every command that changes a group's members, roles or status takes `_lock_group` (the group
row FOR UPDATE) after the share lock on the accounts it makes hold something, and only then reads what it
decides on (the caller's role, the creator, the member count, open invitations). Item commands hold the same
row FOR SHARE while they decide a permission granted through the group, so a demotion and an edit through the
group run one after the other.

Exactly one current creator per active group (SOC-INV-07): creation inserts group and creator together; a
hand-over promotes the target, demotes the caller to admin and moves `owner_id` in one transaction; the creator
cannot leave or be removed. Deferred triggers check the rule at commit, whoever writes.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel import audit
from tenet.kernel.audit import Actor
from tenet.kernel.db_errors import add_unique
from tenet.kernel.errors import DomainError, PreconditionFailed
from tenet.kernel.ratelimit import consume_in
from tenet.kernel.settings import Rate
from tenet.kernel.statements import statements
from tenet.kernel.transitions import Refusal, lock_rows, transition
from tenet.social import errors, lifecycles
from tenet.social.common import is_active_account, require_active_accounts
from tenet.social.models import MEMBER_UNIQUE, OPEN_ACTION_INDEX, Group, GroupMember, InboxMessage
from tenet.social.permissions import Action, require


async def _lock_group(session: AsyncSession, group_id: uuid.UUID) -> Group | None:
    """THE serialisation point of a group: its row FOR UPDATE until the transaction ends."""
    if not await lock_rows(session, Group, [group_id]):
        return None
    return await session.get(Group, group_id, populate_existing=True)


async def current_member(session: AsyncSession, group_id: uuid.UUID, user_id: uuid.UUID) -> GroupMember | None:
    return (await session.scalars(
        select(GroupMember).where(GroupMember.group_id == group_id, GroupMember.user_id == user_id,
                                  GroupMember.status != "removed")
        .execution_options(populate_existing=True))).one_or_none()


async def _member_row(session: AsyncSession, group_id: uuid.UUID, user_id: uuid.UUID) -> GroupMember | None:
    return (await session.scalars(
        select(GroupMember).where(GroupMember.group_id == group_id, GroupMember.user_id == user_id)
        .execution_options(populate_existing=True))).one_or_none()


async def _command(session: AsyncSession, group_id: uuid.UUID, principal_id: uuid.UUID, action: Action, *,
                   allow_archived: bool = False) -> tuple[Group, GroupMember]:
    """Lock the group, then check the caller: a current member (else 404) whose role may do `action` (else
    403) of an active group (else 409)."""
    group = await _lock_group(session, group_id)
    principal_member = await current_member(session, group_id, principal_id) if group is not None else None
    if group is None or principal_member is None:
        raise errors.GroupNotFound()
    require(principal_member.role, action)
    if group.status != "active" and not allow_archived:
        raise errors.GroupNotActive(group_id=str(group_id))
    return group, principal_member


def _group_refusal(refusal: Refusal[Group]) -> DomainError:
    if refusal.current is None:
        return errors.GroupNotFound()
    if refusal.reason == "version":
        return PreconditionFailed(current_version=refusal.version)
    return errors.GroupNotActive(group_id=str(refusal.current.id))


def _member_refusal(refusal: Refusal[GroupMember]) -> DomainError:
    return errors.GroupMemberNotFound()


async def _count_current(session: AsyncSession, group_id: uuid.UUID) -> int:
    return (await session.execute(select(func.count()).select_from(GroupMember).where(
        GroupMember.group_id == group_id, GroupMember.status != "removed"))).scalar_one()


async def create_group(session: AsyncSession, *, principal_id: uuid.UUID, name: str, description: str | None,
                       visibility: str, creation_limit: Rate | None, now: datetime) -> Group:
    await require_active_accounts(session, [principal_id])
    if creation_limit is not None:
        await consume_in(session, f"social-group-create:user:{principal_id}", creation_limit, now,
                         error=lambda retry_after: errors.GroupCreationLimitReached(
                             retry_after_seconds=retry_after, limit=creation_limit.limit))
    group = Group(id=uuid.uuid4(), name=name, description=description, visibility=visibility, owner_id=principal_id,
                  status="active", version=1, created_at=now, updated_at=now, created_by=principal_id,
                  updated_by=principal_id)
    session.add(group)
    await session.flush()
    session.add(GroupMember(id=uuid.uuid4(), group_id=group.id, user_id=principal_id, role="creator",
                            join_source="joined", joined_at=now, status="active", version=1, created_at=now,
                            updated_at=now, created_by=principal_id, updated_by=principal_id))
    await session.flush()
    await audit.record(session, action="social.group.created", actor=Actor.user(principal_id),
                       subject=("group", group.id), now=now, data={"visibility": visibility})
    return group


async def update_group(session: AsyncSession, *, group_id: uuid.UUID, principal_id: uuid.UUID, changes: dict[str, Any],
                       expected_version: int | None, now: datetime) -> tuple[Group, GroupMember]:
    _, principal_member = await _command(session, group_id, principal_id, Action.RENAME)
    if "visibility" in changes:
        require(principal_member.role, Action.CHANGE_VISIBILITY)
    group = await transition(session, lifecycles.GROUP, "update", model=Group, id=group_id,
                             values={**changes, "updated_at": now, "updated_by": principal_id},
                             expected_version=expected_version, refuse=_group_refusal)
    await audit.record(session, action="social.group.updated", actor=Actor.user(principal_id),
                       subject=("group", group_id), now=now, data={"fields": sorted(changes)})
    return group, principal_member


_DISMISS_INVITATIONS = """
    UPDATE social.inbox_messages SET status = 'dismissed', acted_at = %(now)s, acted_by = %(actor)s,
           read_at = coalesce(read_at, %(now)s)
     WHERE related_type = 'group' AND related_id = %(g)s AND actionable AND status IN ('pending', 'read')
       AND (CAST(%(r)s AS uuid) IS NULL OR recipient_id = %(r)s)
"""


async def _dismiss_open_invitations(session: AsyncSession, group_id: uuid.UUID, *, principal_id: uuid.UUID | None,
                                    now: datetime, recipient_id: uuid.UUID | None = None) -> int:
    return await (await statements(session)).execute(_DISMISS_INVITATIONS, {
        "g": group_id, "now": now, "actor": principal_id, "r": recipient_id})


async def archive_group(session: AsyncSession, *, group_id: uuid.UUID, principal_id: uuid.UUID | None, now: datetime,
                        unarchive: bool = False) -> Group:
    if principal_id is not None:
        await _command(session, group_id, principal_id, Action.ARCHIVE, allow_archived=True)
    name = "unarchive" if unarchive else "archive"
    group = await transition(session, lifecycles.GROUP, name, model=Group, id=group_id,
                             values={"archived_at": None if unarchive else now, "updated_at": now,
                                     "updated_by": principal_id}, refuse=_group_refusal)
    dismissed = 0 if unarchive else await _dismiss_open_invitations(session, group_id, principal_id=principal_id,
                                                                    now=now)
    await audit.record(session, action=f"social.group.{name}d", actor=Actor.user(principal_id) if principal_id else
                       Actor.system(), subject=("group", group_id), now=now, data={"dismissed_invitations": dismissed})
    return group


async def _friendship_status(session: AsyncSession, a: uuid.UUID, b: uuid.UUID) -> str | None:
    low, high = sorted((a, b))
    status: str | None = await (await statements(session)).value(
        "SELECT status FROM social.friendships WHERE user_low_id = %(l)s AND user_high_id = %(h)s",
        {"l": low, "h": high})
    return status


_OPEN_INVITATION = """
    SELECT id FROM social.inbox_messages WHERE recipient_id = %(r)s AND message_type = 'group_invitation'
       AND related_id = %(g)s AND actionable AND status IN ('pending', 'read')
"""


async def invite(session: AsyncSession, *, group_id: uuid.UUID, principal_id: uuid.UUID, user_id: uuid.UUID,
                 inbox_limit: Rate | None, max_members: int, now: datetime) -> InboxMessage:
    """An actionable group_invitation in the invitee's inbox (a friend of the inviter, not a member, at most one
    open per group and person)."""
    await require_active_accounts(session, [principal_id])
    # Locked first (the global lock order), judged after the group: one outside it learns nothing about who
    # exists, and inside it anyone not a friend (missing, inactive, blocked, a stranger) gets one answer.
    invitee_active = await is_active_account(session, user_id)
    group, _principal_member = await _command(session, group_id, principal_id, Action.INVITE)
    if await _friendship_status(session, principal_id, user_id) != "accepted":
        raise errors.InviteeNotFriend()
    if not invitee_active:
        raise errors.RecipientUnavailable()  # a friend, suspended (D-26)
    if await current_member(session, group_id, user_id) is not None:
        raise errors.AlreadyGroupMember(user_id=str(user_id))
    run = await statements(session)
    open_id = await run.value(_OPEN_INVITATION, {"r": user_id, "g": group_id})
    if open_id is not None:
        raise errors.GroupInvitationAlreadyPending(invitation_id=str(open_id))
    if inbox_limit is not None:
        await consume_in(session, f"social-inbox-write:user:{principal_id}", inbox_limit, now,
                         error=lambda retry_after: errors.InboxWriteLimitReached(
                             retry_after_seconds=retry_after, limit=inbox_limit.limit))
    sender = await run.value("SELECT username FROM social.profiles WHERE id = %(u)s", {"u": principal_id})
    message = InboxMessage(id=uuid.uuid4(), recipient_id=user_id, sender_id=principal_id,
                           message_type="group_invitation", content={"group_name": group.name,
                                                                     "sender_username": sender},
                           related_type="group", related_id=group_id, actionable=True, status="pending",
                           created_at=now, created_by=principal_id)
    await add_unique(session, message, on_violation={OPEN_ACTION_INDEX: errors.GroupInvitationAlreadyPending})
    await audit.record(session, action="social.group.member.invited", actor=Actor.user(principal_id),
                       subject=("inbox_message", message.id), scope=("group", group_id), now=now,
                       data={"user_id": user_id})
    return message


async def revoke_invitation(session: AsyncSession, *, group_id: uuid.UUID, invitation_id: uuid.UUID,
                            principal_id: uuid.UUID, now: datetime) -> None:
    _, principal_member = await _command(session, group_id, principal_id, Action.LIST_INVITATIONS, allow_archived=True)
    message = await session.get(InboxMessage, invitation_id, populate_existing=True)
    if (message is None or message.message_type != "group_invitation" or message.related_id != group_id
            or message.status not in ("pending", "read")):
        raise errors.GroupInvitationNotFound()
    if principal_member.role == "member" and message.sender_id != principal_id:
        raise errors.GroupRoleForbidden(role=principal_member.role)
    await transition(session, lifecycles.INBOX_MESSAGE, "dismiss", model=InboxMessage, id=invitation_id,
                     values={"acted_at": now, "acted_by": principal_id, "read_at": message.read_at or now},
                     refuse=lambda r: errors.GroupInvitationNotFound())
    await audit.record(session, action="social.group.member.invitation_revoked", actor=Actor.user(principal_id),
                       subject=("inbox_message", invitation_id), scope=("group", group_id), now=now)


async def _enter(session: AsyncSession, group: Group, user_id: uuid.UUID, *, invited_by: uuid.UUID | None,
                 max_members: int, now: datetime) -> GroupMember:
    """Make `user_id` a current member (a new row, or the old one back from removed). Under the group lock."""
    if group.status != "active":
        raise errors.GroupNotActive(group_id=str(group.id))
    if await _count_current(session, group.id) >= max_members:
        raise errors.GroupFull(limit=max_members)
    row = await _member_row(session, group.id, user_id)
    values = {"role": "member", "join_source": "invited" if invited_by else "joined", "invited_by": invited_by,
              "joined_at": now, "removed_at": None, "removed_by": None, "removal_reason": None, "updated_at": now,
              "updated_by": user_id}
    if row is not None:
        if row.status != "removed":
            raise errors.AlreadyGroupMember(user_id=str(user_id))
        member = await transition(session, lifecycles.GROUP_MEMBER, "rejoin", model=GroupMember, id=row.id,
                                  values=values, refuse=lambda r: errors.AlreadyGroupMember(user_id=str(user_id)))
    else:
        member = GroupMember(id=uuid.uuid4(), group_id=group.id, user_id=user_id, status="active", version=1,
                             created_at=now, created_by=user_id, **values)
        await add_unique(session, member, on_violation={
            MEMBER_UNIQUE: lambda: errors.AlreadyGroupMember(user_id=str(user_id))})
    # Any other open invitation of this person to the group is answered by joining.
    await _dismiss_open_invitations(session, group.id, principal_id=user_id, now=now, recipient_id=user_id)
    return member


async def join(session: AsyncSession, *, group_id: uuid.UUID, principal_id: uuid.UUID, max_members: int,
               now: datetime) -> GroupMember:
    """Join a public group (a member removed by someone else comes back only by invitation)."""
    await require_active_accounts(session, [principal_id])
    group = await _lock_group(session, group_id)
    row = await _member_row(session, group_id, principal_id) if group is not None else None
    visible = group is not None and ((group.visibility == "public" and group.status == "active")
                                     or (row is not None and row.status != "removed"))
    if not visible:
        raise errors.GroupNotFound()
    assert group is not None
    if row is not None and row.status == "removed" and row.removal_reason != "left":
        raise errors.GroupRejoinNeedsInvitation()
    member = await _enter(session, group, principal_id, invited_by=None, max_members=max_members, now=now)
    await audit.record(session, action="social.group.member.joined", actor=Actor.user(principal_id),
                       subject=("group_member", member.id), scope=("group", group_id), now=now)
    return member


async def accept_invitation(session: AsyncSession, *, message: InboxMessage, max_members: int,
                            now: datetime) -> GroupMember:
    """The inbox accept of a group invitation: under the group lock (taken by the caller)."""
    group = await session.get(Group, message.related_id, populate_existing=True)
    assert group is not None
    member = await _enter(session, group, message.recipient_id, invited_by=message.sender_id,
                          max_members=max_members, now=now)
    await audit.record(session, action="social.group.member.joined", actor=Actor.user(message.recipient_id),
                       subject=("group_member", member.id), scope=("group", group.id), now=now,
                       data={"invitation_id": message.id})
    return member


async def change_member(session: AsyncSession, *, group_id: uuid.UUID, principal_id: uuid.UUID, user_id: uuid.UUID,
                        role: str | None, status: str | None, now: datetime) -> GroupMember:
    """Creator: set admin/member, or hand over (`role = creator`). Self: mute/unmute."""
    if role == "creator":
        await require_active_accounts(session, [user_id])
    _, principal_member = await _command(session, group_id, principal_id, Action.VIEW)
    target = await current_member(session, group_id, user_id)
    if target is None:
        raise errors.GroupMemberNotFound()
    if status is not None:
        if user_id != principal_id:
            raise errors.GroupRoleForbidden("Only a member mutes or unmutes themself", role=principal_member.role)
        if status != target.status:
            name = "mute" if status == "muted" else "unmute"
            target = await transition(session, lifecycles.GROUP_MEMBER, name, model=GroupMember, id=target.id,
                                      values={"updated_at": now, "updated_by": principal_id}, refuse=_member_refusal)
    if role is not None and role != target.role:
        if role == "creator":
            require(principal_member.role, Action.HAND_OVER)
            target = await hand_over(session, group_id=group_id, from_member=principal_member, to_member=target,
                                     principal_id=principal_id, now=now)
        else:
            require(principal_member.role, Action.CHANGE_ROLE)
            if target.role == "creator":
                raise errors.GroupCreatorCannotLeave("Hand the group over instead of demoting its creator")
            target = await _set_role(session, target, role, now, principal_id)
            await audit.record(session, action="social.group.member.role_changed", actor=Actor.user(principal_id),
                               subject=("group_member", target.id), scope=("group", group_id), now=now,
                               data={"user_id": user_id, "role": role})
    return target


async def _set_role(session: AsyncSession, member: GroupMember, role: str, now: datetime,
                    principal_id: uuid.UUID | None) -> GroupMember:
    # change_role lands in `active`; a muted member stays muted.
    moved = await transition(session, lifecycles.GROUP_MEMBER, "change_role", model=GroupMember, id=member.id,
                             values={"role": role, "status": member.status, "updated_at": now,
                                     "updated_by": principal_id},
                             refuse=_member_refusal)
    return moved


async def hand_over(session: AsyncSession, *, group_id: uuid.UUID, from_member: GroupMember, to_member: GroupMember,
                    principal_id: uuid.UUID | None, now: datetime) -> GroupMember:
    """The target becomes creator, the old creator admin, owner_id moves: one transaction (SOC-INV-07)."""
    await _set_role(session, from_member, "admin", now, principal_id)
    promoted = await _set_role(session, to_member, "creator", now, principal_id)
    await transition(session, lifecycles.GROUP, "hand_over", model=Group, id=group_id,
                     values={"owner_id": to_member.user_id, "updated_at": now, "updated_by": principal_id},
                     refuse=_group_refusal)
    await audit.record(session, action="social.group.member.creator_handed_over",
                       actor=Actor.user(principal_id) if principal_id else Actor.system(), subject=("group", group_id),
                       now=now, data={"from_user_id": from_member.user_id, "to_user_id": to_member.user_id})
    return promoted


async def remove_member(session: AsyncSession, *, group_id: uuid.UUID, principal_id: uuid.UUID, user_id: uuid.UUID,
                        now: datetime) -> None:
    """Leave (yourself) or remove (creator: admins and members; admin: members). Never the creator."""
    _, principal_member = await _command(session, group_id, principal_id, Action.VIEW, allow_archived=True)
    target = principal_member if user_id == principal_id else await current_member(session, group_id, user_id)
    if target is None:
        raise errors.GroupMemberNotFound()
    if target.role == "creator":
        raise errors.GroupCreatorCannotLeave()
    if user_id == principal_id:
        name, reason = "leave", "left"
    else:
        require(principal_member.role, Action.REMOVE_MEMBER, target.role)
        name, reason = "remove", "removed"
    await transition(session, lifecycles.GROUP_MEMBER, name, model=GroupMember, id=target.id,
                     values={"removed_at": now, "removed_by": None if name == "leave" else principal_id,
                             "removal_reason": reason, "updated_at": now, "updated_by": principal_id},
                     refuse=_member_refusal)
    await audit.record(session, action=f"social.group.member.{'left' if name == 'leave' else 'removed'}",
                       actor=Actor.user(principal_id), subject=("group_member", target.id), scope=("group", group_id),
                       now=now, data={"user_id": user_id, "role": target.role})


async def mirror_member(session: AsyncSession, *, group_id: uuid.UUID, user_id: uuid.UUID, role: str | None,
                        now: datetime) -> GroupMember | None:
    """The legacy app changed a membership while both apps write (issue 20, dual write): set the member's role
    (admin / member), or remove the member (`role` None), as the system. Never the creator: a hand-over is the
    group's own command (GroupCreatorCannotLeave). None when the person is no current member."""
    group = await _lock_group(session, group_id)
    target = await current_member(session, group_id, user_id) if group is not None else None
    if target is None:
        return None
    if target.role == "creator" or role == "creator":
        raise errors.GroupCreatorCannotLeave("The creator changes only by a hand-over in Tenet")
    if role is None:
        moved = await transition(session, lifecycles.GROUP_MEMBER, "remove", model=GroupMember, id=target.id,
                                 values={"removed_at": now, "removed_by": None, "removal_reason": "removed",
                                         "updated_at": now, "updated_by": None}, refuse=_member_refusal)
        action = "social.group.member.removed"
    elif role != target.role:
        moved = await _set_role(session, target, role, now, None)
        action = "social.group.member.role_changed"
    else:
        return target
    await audit.record(session, action=action, actor=Actor.system(), subject=("group_member", target.id),
                       scope=("group", group_id), now=now, data={"user_id": user_id, "role": role or target.role,
                                                                 "source": "social legacy sync"})
    return moved


async def remove_deleted_account(session: AsyncSession, *, user_id: uuid.UUID, now: datetime) -> int:
    """AccountDeleted: in every group the account is a current member of (locked in id order), a creator first
    hands over to the oldest current admin, else the oldest current member (joined_at, then id); with nobody
    left the group is archived (D-11). An archived group keeps no creator (it stays archived). Then the
    account's row is removed (`account_deleted`)."""
    rows = await (await statements(session)).all(
        "SELECT group_id FROM social.group_members WHERE user_id = %(u)s AND status <> 'removed'", {"u": user_id})
    group_ids = [row["group_id"] for row in rows]
    handled = 0
    for group_id in await lock_rows(session, Group, group_ids):
        member = await current_member(session, group_id, user_id)
        if member is None:
            continue
        group = await session.get(Group, group_id, populate_existing=True)
        assert group is not None
        if member.role == "creator" and group.status == "active":
            successor = (await session.scalars(
                select(GroupMember).where(GroupMember.group_id == group_id, GroupMember.status != "removed",
                                          GroupMember.user_id != user_id)
                .order_by((GroupMember.role != "admin"), GroupMember.joined_at, GroupMember.id).limit(1)
                .execution_options(populate_existing=True))).one_or_none()
            if successor is not None:
                await hand_over(session, group_id=group_id, from_member=member, to_member=successor, principal_id=None,
                                now=now)
            else:
                await archive_group(session, group_id=group_id, principal_id=None, now=now)
        await transition(session, lifecycles.GROUP_MEMBER, "remove", model=GroupMember, id=member.id,
                         values={"removed_at": now, "removal_reason": "account_deleted", "updated_at": now},
                         refuse=_member_refusal)
        handled += 1
    return handled
