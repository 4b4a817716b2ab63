"""Workspace commands: create a workspace, ask for its deletion, and the sweep that completes deletions. Each runs
inside the caller's unit of work and never commits; the lock every command starts with is tenet.workspaces.commands'.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from tenet.iam import service as iam_service
from tenet.kernel import audit, events
from tenet.kernel.audit import Actor
from tenet.kernel.transitions import Refusal, transition
from tenet.workspaces import commands, errors, lifecycles
from tenet.workspaces.events import WorkspaceDeleted
from tenet.workspaces.models import Invitation, Membership, Workspace
from tenet.workspaces.permissions import Action, WorkspaceRole, require


async def create_workspace(session: AsyncSession, *, name: str, principal_id: uuid.UUID, now: datetime) -> Workspace:
    """A new ACTIVE workspace with its creator as the first owner (WS-INV-01 holds from the start). The
    creator's account is share-locked and must be active, so a concurrent deletion of the creator either
    ends this membership too or finds the workspace does not exist yet (WS-INV-10)."""
    await iam_service.require_active_accounts(session, [principal_id])
    workspace = Workspace(id=uuid.uuid4(), name=name, status="ACTIVE", version=1, created_at=now,
                          created_by=principal_id, updated_at=now)
    session.add(workspace)
    await session.flush()
    membership = Membership(id=uuid.uuid4(), workspace_id=workspace.id, user_id=principal_id,
                            role=WorkspaceRole.OWNER.value, status="ACTIVE", version=1, joined_at=now, updated_at=now)
    session.add(membership)
    await session.flush()
    await audit.record(session, action="workspace.created", actor=Actor.user(principal_id),
                       subject=("workspace", workspace.id), scope=commands.scope(workspace.id), now=now,
                       data={"owner_membership_id": membership.id})
    return workspace


def _workspace_refusal(refusal: Refusal[Workspace]) -> errors.DomainError:
    if refusal.current is None or refusal.status == "DELETED":
        return errors.WorkspaceNotFound()
    return errors.WorkspaceNotActive(workspace_id=str(refusal.current.id), workspace_status=refusal.status)


async def request_workspace_deletion(session: AsyncSession, *, workspace_id: uuid.UUID, principal_id: uuid.UUID,
                                     now: datetime) -> tuple[Workspace, Membership]:
    """ACTIVE -> DELETING (owners). Every PENDING invitation is revoked in the same transaction (WS-INV-08),
    and from now on the workspace refuses invitations, acceptance and membership changes. The job
    `finish_workspace_deletions` completes it. Asking again while DELETING answers the same state."""
    await commands.lock_workspace(session, workspace_id)
    workspace, membership = await commands.workspace_and_caller(session, workspace_id, principal_id)
    if workspace is None or workspace.status == "DELETED" or membership is None:
        raise errors.WorkspaceNotFound()
    require(membership.role, Action.DELETE_WORKSPACE)
    if workspace.status == "DELETING":
        return workspace, membership
    workspace = await transition(
        session, lifecycles.WORKSPACE, "request_deletion", model=Workspace, id=workspace_id,
        values={"deletion_requested_at": now, "deletion_requested_by": principal_id, "updated_at": now},
        refuse=_workspace_refusal,
    )
    revoked = await transition(
        session, lifecycles.INVITATION, "revoke", model=Invitation, where=(Invitation.workspace_id == workspace_id,),
        values={"revoked_at": now, "revoked_by": principal_id},
    )
    for invitation in revoked:
        await audit.record(session, action="workspace.invitation.revoked", actor=Actor.user(principal_id),
                           subject=("invitation", invitation.id), scope=commands.scope(workspace_id), now=now,
                           data={"reason": "workspace_deletion"})
    await audit.record(session, action="workspace.deletion_requested", actor=Actor.user(principal_id),
                       subject=("workspace", workspace_id), scope=commands.scope(workspace_id), now=now,
                       data={"revoked_invitations": len(revoked)})
    return workspace, membership


async def finish_workspace_deletions(session: AsyncSession, *, now: datetime,
                                     limit: int | None = None) -> list[uuid.UUID]:
    """DELETING -> DELETED for up to `limit` workspaces, closing their memberships (WS-INV-09). This is
    where other domains' clean-up of a workspace's data will hook in (`commands.SWEEP_BATCH` unless given).
    Answers the deleted ids."""
    locked = await commands.lock_workspaces_skip_locked(session, "w.status = 'DELETING'", {},
                                                        limit or commands.SWEEP_BATCH)
    for workspace_id in locked:
        await transition(
            session, lifecycles.WORKSPACE, "finish_deletion", model=Workspace, id=workspace_id,
            values={"deleted_at": now, "updated_at": now}, refuse=_workspace_refusal,
        )
        closed = await transition(
            session, lifecycles.MEMBERSHIP, "close", model=Membership,
            where=(Membership.workspace_id == workspace_id,), values={"ended_at": now, "updated_at": now},
        )
        await audit.record(session, action="workspace.deleted", actor=Actor.system(),
                           subject=("workspace", workspace_id), scope=commands.scope(workspace_id), now=now,
                           data={"closed_memberships": len(closed)})
        await events.publish(session, WorkspaceDeleted(workspace_id=workspace_id, now=now))
    return locked
