"""Member commands: change a member's role, leave, remove a member, transfer ownership, and the end of a deleted
account's memberships (identity's AccountDeleted). Each runs inside the caller's unit of work under the workspace's
lock (tenet.workspaces.commands) and never commits; every one keeps an active owner (WS-INV-01).
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.iam import service as iam_service
from tenet.kernel import audit
from tenet.kernel.audit import Actor
from tenet.kernel.transitions import lock_rows, transition
from tenet.workspaces import commands, errors, lifecycles
from tenet.workspaces.commands import Caller
from tenet.workspaces.models import Membership, Workspace
from tenet.workspaces.permissions import Action, WorkspaceRole, require


async def _target_membership(session: AsyncSession, workspace_id: uuid.UUID, user_id: uuid.UUID) -> Membership:
    target = await commands.active_membership(session, workspace_id, user_id)
    if target is None:
        raise errors.MemberNotFound(user_id=str(user_id))
    return target


async def _end_membership(session: AsyncSession, target: Membership | Caller, name: str, *,
                          ended_by: uuid.UUID | None, now: datetime) -> Membership:
    return await transition(
        session, lifecycles.MEMBERSHIP, name, model=Membership, id=target.id,
        values={"ended_at": now, "ended_by": ended_by, "updated_at": now},
        refuse=lambda refusal: errors.MemberNotFound(user_id=str(target.user_id)),
    )


async def _set_role(session: AsyncSession, target: Membership | Caller, role: WorkspaceRole,
                    now: datetime) -> Membership:
    return await transition(
        session, lifecycles.MEMBERSHIP, "change_role", model=Membership, id=target.id,
        values={"role": role.value, "updated_at": now},
        refuse=lambda refusal: errors.MemberNotFound(user_id=str(target.user_id)),
    )


async def change_member_role(session: AsyncSession, *, workspace_id: uuid.UUID, principal_id: uuid.UUID,
                             user_id: uuid.UUID, role: WorkspaceRole, now: datetime) -> Membership:
    """Owners set any member's role, their own included; demoting the last owner is refused (WS-INV-01)."""
    role = WorkspaceRole(role)
    if role == WorkspaceRole.OWNER and user_id != principal_id:
        # Like a transfer: ownership only goes to an account that can use it (ACCOUNT_NOT_ACTIVE).
        await iam_service.require_active_accounts(session, [user_id])
    await commands.command(session, workspace_id, principal_id, Action.CHANGE_ROLE)
    target = await _target_membership(session, workspace_id, user_id)
    if target.role == role:
        return target
    if role != WorkspaceRole.OWNER:
        await commands.ensure_an_owner_remains(session, target)
    before = target.role
    updated = await _set_role(session, target, role, now)
    await audit.record(session, action="workspace.member.role_changed", actor=Actor.user(principal_id),
                       subject=("membership", target.id), scope=commands.scope(workspace_id), now=now,
                       data={"user_id": user_id, "from_role": before, "to_role": role})
    return updated


async def leave_workspace(session: AsyncSession, *, workspace_id: uuid.UUID, principal_id: uuid.UUID,
                          now: datetime) -> None:
    """The caller leaves. The last active owner cannot (WS-INV-01): transfer ownership or delete first."""
    _, membership = await commands.command(session, workspace_id, principal_id, Action.LEAVE)
    await commands.ensure_an_owner_remains(session, membership)
    await _end_membership(session, membership, "leave", ended_by=principal_id, now=now)
    await audit.record(session, action="workspace.member.left", actor=Actor.user(principal_id),
                       subject=("membership", membership.id), scope=commands.scope(workspace_id), now=now,
                       data={"user_id": principal_id, "role": membership.role})


async def remove_member(session: AsyncSession, *, workspace_id: uuid.UUID, principal_id: uuid.UUID,
                        user_id: uuid.UUID, now: datetime) -> None:
    """Remove another member (owners: anyone; admins: members). Removing yourself is leaving."""
    if user_id == principal_id:
        await leave_workspace(session, workspace_id=workspace_id, principal_id=principal_id, now=now)
        return
    _, membership = await commands.command(session, workspace_id, principal_id, Action.REMOVE_MEMBER)
    target = await _target_membership(session, workspace_id, user_id)
    require(membership.role, Action.REMOVE_MEMBER, target.role)
    await commands.ensure_an_owner_remains(session, target)
    await _end_membership(session, target, "remove", ended_by=principal_id, now=now)
    await audit.record(session, action="workspace.member.removed", actor=Actor.user(principal_id),
                       subject=("membership", target.id), scope=commands.scope(workspace_id), now=now,
                       data={"user_id": user_id, "role": target.role})


async def transfer_ownership(session: AsyncSession, *, workspace_id: uuid.UUID, principal_id: uuid.UUID,
                             user_id: uuid.UUID, now: datetime) -> tuple[Membership, Membership]:
    """The target (an active member, not an owner) becomes owner; the caller steps down to admin. Both in
    one transaction under the lock, so there is an owner at every moment. Answers (the caller's membership, target).
    A disabled or deleted target is refused (ACCOUNT_NOT_ACTIVE): an owner who cannot sign in owns nothing
    anyone can use. The target's account is share-locked first, so it cannot be disabled meanwhile."""
    if user_id != principal_id:
        await iam_service.require_active_accounts(session, [user_id])
    _, membership = await commands.command(session, workspace_id, principal_id, Action.TRANSFER_OWNERSHIP)
    if user_id == principal_id:
        raise errors.OwnershipTransferToSelf()
    target = await _target_membership(session, workspace_id, user_id)
    if target.role == WorkspaceRole.OWNER:
        raise errors.AlreadyOwner(user_id=str(user_id))
    # Promote first: the count below then includes the new owner, whatever the caller's role becomes.
    target = await _set_role(session, target, WorkspaceRole.OWNER, now)
    await commands.ensure_an_owner_remains(session, membership)
    stepped_down = await _set_role(session, membership, WorkspaceRole.ADMIN, now)
    await audit.record(session, action="workspace.ownership.transferred", actor=Actor.user(principal_id),
                       subject=("workspace", workspace_id), scope=commands.scope(workspace_id), now=now,
                       data={"from_user_id": principal_id, "to_user_id": user_id,
                             "from_membership_id": stepped_down.id, "to_membership_id": target.id})
    return stepped_down, target


async def end_memberships_of_deleted_account(session: AsyncSession, *, user_id: uuid.UUID, now: datetime,
                                             actor: Actor) -> None:
    """Handles identity's AccountDeleted (same transaction; the account's row is already locked FOR
    UPDATE): a deleted account leaves every workspace (WS-INV-10). Being the last active owner of a
    workspace that is not DELETED refuses the deletion with LAST_OWNER (WS-INV-01): transfer ownership, or
    delete the workspace and let its deletion finish, first.

    Workspaces are locked in id order (account, then workspaces: the global order). Every command that
    gives the account a membership share-locks the account first, so none can add one after this read."""
    workspace_ids = (await session.execute(
        select(Membership.workspace_id).where(Membership.user_id == user_id, Membership.status == "ACTIVE")
    )).scalars().all()
    ended_by = uuid.UUID(actor.id) if actor.type == "user" and actor.id else None
    for workspace_id in await lock_rows(session, Workspace, workspace_ids):
        membership = await commands.active_membership(session, workspace_id, user_id)
        if membership is None:
            continue
        await commands.ensure_an_owner_remains(session, membership)
        await _end_membership(session, membership, "remove", ended_by=ended_by, now=now)
        await audit.record(session, action="workspace.member.removed", actor=actor,
                           subject=("membership", membership.id), scope=commands.scope(workspace_id), now=now,
                           data={"user_id": user_id, "role": membership.role, "reason": "account_deleted"})
