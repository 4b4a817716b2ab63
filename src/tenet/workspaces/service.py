"""Workspace commands and queries. Each runs inside the caller's unit of work and never commits.

Serialisation (WS-INV-01, -02, -03, -05, -08, the daily limit): every command that changes the
memberships or invitations of a workspace first takes `_lock_workspace` — a row lock on the workspace,
taken by most commands together with the read of the caller's membership (`_lock_workspace_and_caller`) —
and only then reads what it decides on (the caller's role, the owner count, the pending invitations,
today's sends). Two such commands on one workspace therefore run one after the other, and each sees what
the previous one committed (READ COMMITTED takes a new snapshot per statement). Locks are always taken
workspace first, then its invitation or membership rows, so commands cannot deadlock each other. The
sweeps lock many workspaces in id order with SKIP LOCKED, so they never wait for (or block) a request.

The database stays the final arbiter where a rule fits in it (partial unique indexes, CHECKs, the
terminal-state triggers); the lock gives the friendly error first, the index maps to the same code.
"""

from __future__ import annotations

import uuid
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlencode

from psycopg.errors import UniqueViolation
from pydantic_settings import BaseSettings
from sqlalchemy import and_, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.iam import service as iam_service
from tenet.iam.tokens import digest, new_secret
from tenet.kernel import audit, events
from tenet.kernel.audit import Actor
from tenet.kernel.db_errors import add_unique
from tenet.kernel.emails import EMAIL_NORMALIZATION_VERSION, InvalidEmail, clean_email, normalize_email
from tenet.kernel.mail import header_text
from tenet.kernel.outbox import enqueue_email
from tenet.kernel.pagination import PageParams, keyset_page
from tenet.kernel.ratelimit import RateLimiter
from tenet.kernel.settings import KernelSettings, Rate, section
from tenet.kernel.statements import Row, statements
from tenet.kernel.transitions import Refusal, lock_rows, transition
from tenet.workspaces import errors, lifecycles
from tenet.workspaces.events import WorkspaceDeleted
from tenet.workspaces.models import (
    INVITATION_PENDING_INDEX,
    MEMBERSHIP_ACTIVE_INDEX,
    Invitation,
    InvitationSend,
    Membership,
    Workspace,
)
from tenet.workspaces.permissions import Action, InvitationRole, WorkspaceRole, require
from tenet.workspaces.settings import WorkspaceSettings

TOKEN_PREFIX = "wsi"  # recognisable by secret scanners, like identity's `rt_` and `tcs_`
SEND_WINDOW = timedelta(days=1)
SWEEP_BATCH = 200
MAIL_KIND = "workspace.invitation"



@dataclass(frozen=True)
class InvitationPolicy:
    """The settings an invitation command needs."""

    ttl: timedelta
    daily_limit: int
    public_base_url: str

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> InvitationPolicy:
        own, kernel = section(settings, WorkspaceSettings), section(settings, KernelSettings)
        return cls(ttl=timedelta(days=own.invitation_ttl_days), daily_limit=own.invitations_per_workspace_per_day,
                   public_base_url=kernel.public_base_url)


@dataclass(frozen=True)
class MemberView:
    membership: Membership
    email: str
    display_name: str


# --- the lock and the reads every command starts with --------------------------------------------------


async def _lock_workspace(session: AsyncSession, workspace_id: uuid.UUID) -> None:
    """THE serialisation point of a workspace: a row lock held until the transaction ends.

    Taken by every command that changes the workspace's memberships or invitations, before any read that
    command decides on (after the share lock on the accounts it relies on: accounts come first in the
    global lock order). tests/concurrency/test_workspace_races.py proves the owner rule needs it: with
    this function made a no-op, two last owners leaving at once both succeed.
    """
    await lock_rows(session, Workspace, [workspace_id])


async def _load_workspace(session: AsyncSession, workspace_id: uuid.UUID) -> Workspace | None:
    return await session.get(Workspace, workspace_id, populate_existing=True)


async def _active_membership(session: AsyncSession, workspace_id: uuid.UUID, user_id: uuid.UUID) -> Membership | None:
    return (await session.scalars(
        select(Membership)
        .where(Membership.workspace_id == workspace_id, Membership.user_id == user_id, Membership.status == "ACTIVE")
        .execution_options(populate_existing=True)
    )).one_or_none()


async def _count_other_active_owners(session: AsyncSession, workspace_id: uuid.UUID,
                                     excluding_user_id: uuid.UUID) -> int:
    """Active owners other than `excluding_user_id`. Meaningful only under `_lock_workspace`: without the
    lock, two owners could each count the other and both leave (WS-INV-01)."""
    return (await session.execute(
        select(func.count()).select_from(Membership)
        .where(Membership.workspace_id == workspace_id, Membership.status == "ACTIVE",
               Membership.role == WorkspaceRole.OWNER.value, Membership.user_id != excluding_user_id)
    )).scalar_one()


async def _ensure_an_owner_remains(session: AsyncSession, target: Membership | Caller) -> None:
    """WS-INV-01: refuse when `target` is an owner and no other active owner exists."""
    if target.role == WorkspaceRole.OWNER and await _count_other_active_owners(
            session, target.workspace_id, target.user_id) == 0:
        raise errors.LastOwner(workspace_id=str(target.workspace_id))


async def _workspace_and_caller(session: AsyncSession, workspace_id: uuid.UUID,
                                user_id: uuid.UUID) -> tuple[Workspace | None, Membership | None]:
    """The workspace and the caller's active membership, in one statement (both fresh from the database)."""
    row = (await session.execute(
        select(Workspace, Membership)
        .outerjoin(Membership, and_(Membership.workspace_id == Workspace.id, Membership.user_id == user_id,
                                    Membership.status == "ACTIVE"))
        .where(Workspace.id == workspace_id)
        .execution_options(populate_existing=True)
    )).one_or_none()
    return (None, None) if row is None else (row[0], row[1])


@dataclass(frozen=True, slots=True)
class CommandWorkspace:
    """What a command needs of the workspace it locked (not an ORM object: nothing to flush)."""

    id: uuid.UUID
    name: str
    status: str


@dataclass(frozen=True, slots=True)
class Caller:
    """The caller's active membership, as the command's lock statement read it."""

    id: uuid.UUID
    workspace_id: uuid.UUID
    user_id: uuid.UUID
    role: str


_WORKSPACE_AND_CALLER = """
    SELECT w.id, w.name, w.status, m.id AS membership_id, m.role
      FROM workspace.workspace w
      JOIN workspace.membership m ON m.workspace_id = w.id AND m.user_id = %(user_id)s AND m.status = 'ACTIVE'
     WHERE w.id = %(workspace_id)s
"""
# The lock of `_lock_workspace`, taken by the statement that reads what the command checks. Both rows are
# locked, so when the statement had to wait for the lock READ COMMITTED re-checks the row pair against
# their latest committed versions (the caller's membership ended or re-roled meanwhile, the workspace
# moved to DELETING): a row of another table that is not locked would be seen as the statement's snapshot
# had it, before the wait. The membership takes a share lock only (it is not written by this statement;
# inserts of rows referencing it are not blocked).
_LOCK_WORKSPACE_AND_CALLER = _WORKSPACE_AND_CALLER + "   FOR UPDATE OF w FOR SHARE OF m"


def _locking(workspace_id: uuid.UUID, user_id: uuid.UUID) -> tuple[str, dict[str, uuid.UUID]]:
    """The statement that takes `_lock_workspace` and reads the workspace and the caller's active membership
    (no row, and no lock, when the caller is not an active member). A membership the caller *gained* while
    it waited for the lock is not seen (the command then answers 404, as it would have a moment earlier):
    only ended or changed rows are re-checked."""
    return _LOCK_WORKSPACE_AND_CALLER, {"workspace_id": workspace_id, "user_id": user_id}


def _allowed(row: Row | None, workspace_id: uuid.UUID, user_id: uuid.UUID, action: Action, *,
             not_found: type[errors.DomainError] = errors.WorkspaceNotFound) -> tuple[CommandWorkspace, Caller]:
    """The checks of every command, on the row `_locking` read: an active member (else 404) whose role may
    do `action` (else 403) of a workspace that is ACTIVE (else 409)."""
    if row is None or row["status"] == "DELETED":
        raise not_found()
    workspace = CommandWorkspace(id=row["id"], name=row["name"], status=row["status"])
    caller = Caller(id=row["membership_id"], workspace_id=row["id"], user_id=user_id, role=row["role"])
    require(caller.role, action)
    if workspace.status != "ACTIVE":
        raise errors.WorkspaceNotActive(workspace_id=str(workspace_id), workspace_status=workspace.status)
    return workspace, caller


async def _command(session: AsyncSession, workspace_id: uuid.UUID, user_id: uuid.UUID, action: Action,
                   *, not_found: type[errors.DomainError] = errors.WorkspaceNotFound
                   ) -> tuple[CommandWorkspace, Caller]:
    """Lock the workspace and check the caller (`_allowed`), in one statement. Answers the workspace and the
    caller's membership."""
    row = await (await statements(session)).one(*_locking(workspace_id, user_id))
    return _allowed(row, workspace_id, user_id, action, not_found=not_found)


def _scope(workspace_id: uuid.UUID) -> tuple[str, uuid.UUID]:
    return ("workspace", workspace_id)


# --- per-account limits (taken at the boundary) ---------------------------------------------------------


def creation_slot(limiter: RateLimiter, *, owner_id: uuid.UUID, limit: Rate,
                  now: datetime) -> AbstractAsyncContextManager[None]:
    """A slot of TENET_WORKSPACE_CREATION_LIMIT for one creation (given back if it fails): one account may not
    create workspaces by the hundred to escape the per-workspace invitation limit."""
    return limiter.slot(f"workspace-create:user:{owner_id}", limit, now, "workspace creations",
                        error=lambda retry_after: errors.WorkspaceCreationLimitReached(
                            retry_after_seconds=retry_after, limit=limit.limit))


def sender_slot(limiter: RateLimiter, *, sender_id: uuid.UUID, limit: Rate,
                now: datetime) -> AbstractAsyncContextManager[None]:
    """A slot of TENET_INVITATION_SENDER_LIMIT for one invitation mail (invite or resend), across all the
    sender's workspaces, given back if the command fails. Counted in its own short transaction, not in the
    command's: the counter row would otherwise serialise every invitation of one sender until commit."""
    return limiter.slot(f"invitation-send:user:{sender_id}", limit, now, "invitation mails",
                        error=lambda retry_after: errors.InvitationSenderLimitReached(
                            retry_after_seconds=retry_after, limit=limit.limit))


# --- workspaces ----------------------------------------------------------------------------------------


async def create_workspace(session: AsyncSession, *, name: str, owner_id: uuid.UUID, now: datetime) -> Workspace:
    """A new ACTIVE workspace with its creator as the first owner (WS-INV-01 holds from the start). The
    creator's account is share-locked and must be active, so a concurrent deletion of the creator either
    ends this membership too or finds the workspace does not exist yet (WS-INV-10)."""
    await iam_service.require_active_accounts(session, [owner_id])
    workspace = Workspace(id=uuid.uuid4(), name=name, status="ACTIVE", version=1, created_at=now,
                          created_by=owner_id, updated_at=now)
    session.add(workspace)
    await session.flush()
    membership = Membership(id=uuid.uuid4(), workspace_id=workspace.id, user_id=owner_id,
                            role=WorkspaceRole.OWNER.value, status="ACTIVE", version=1, joined_at=now, updated_at=now)
    session.add(membership)
    await session.flush()
    await audit.record(session, action="workspace.created", actor=Actor.user(owner_id),
                       subject=("workspace", workspace.id), scope=_scope(workspace.id), now=now,
                       data={"owner_membership_id": membership.id})
    return workspace


async def get_workspace(session: AsyncSession, *, workspace_id: uuid.UUID,
                        user_id: uuid.UUID) -> tuple[Workspace, Membership]:
    """The workspace and the caller's membership; 404 unless the caller is an active member and the
    workspace is not DELETED (a read: no lock)."""
    workspace = await _load_workspace(session, workspace_id)
    caller = await _active_membership(session, workspace_id, user_id) if workspace is not None else None
    if workspace is None or workspace.status == "DELETED" or caller is None:
        raise errors.WorkspaceNotFound()
    return workspace, caller


async def list_workspaces(session: AsyncSession, *, user_id: uuid.UUID,
                          params: PageParams) -> tuple[list[tuple[Workspace, str]], str | None]:
    """The caller's workspaces (active memberships, not DELETED), oldest first, with the caller's role."""
    statement = (
        select(Workspace)
        .join(Membership, and_(Membership.workspace_id == Workspace.id, Membership.user_id == user_id,
                               Membership.status == "ACTIVE"))
        .where(Workspace.status != "DELETED")
    )
    rows, next_cursor = await keyset_page(session, statement, order_by=(Workspace.created_at, Workspace.id),
                                          params=params)
    roles = dict((await session.execute(
        select(Membership.workspace_id, Membership.role)
        .where(Membership.user_id == user_id, Membership.status == "ACTIVE",
               Membership.workspace_id.in_([w.id for w in rows]))
    )).all()) if rows else {}
    return [(w, roles[w.id]) for w in rows], next_cursor


async def request_workspace_deletion(session: AsyncSession, *, workspace_id: uuid.UUID, user_id: uuid.UUID,
                                     now: datetime) -> tuple[Workspace, Membership]:
    """ACTIVE -> DELETING (owners). Every PENDING invitation is revoked in the same transaction (WS-INV-08),
    and from now on the workspace refuses invitations, acceptance and membership changes. The job
    `finish_workspace_deletions` completes it. Asking again while DELETING answers the same state."""
    await _lock_workspace(session, workspace_id)
    workspace, caller = await _workspace_and_caller(session, workspace_id, user_id)
    if workspace is None or workspace.status == "DELETED" or caller is None:
        raise errors.WorkspaceNotFound()
    require(caller.role, Action.DELETE_WORKSPACE)
    if workspace.status == "DELETING":
        return workspace, caller
    workspace = await transition(
        session, lifecycles.WORKSPACE, "request_deletion", model=Workspace, id=workspace_id,
        values={"deletion_requested_at": now, "deletion_requested_by": user_id, "updated_at": now},
        refuse=_workspace_refusal,
    )
    revoked = await transition(
        session, lifecycles.INVITATION, "revoke", model=Invitation, where=(Invitation.workspace_id == workspace_id,),
        values={"revoked_at": now, "revoked_by": user_id},
    )
    for invitation in revoked:
        await audit.record(session, action="workspace.invitation.revoked", actor=Actor.user(user_id),
                           subject=("invitation", invitation.id), scope=_scope(workspace_id), now=now,
                           data={"reason": "workspace_deletion"})
    await audit.record(session, action="workspace.deletion_requested", actor=Actor.user(user_id),
                       subject=("workspace", workspace_id), scope=_scope(workspace_id), now=now,
                       data={"revoked_invitations": len(revoked)})
    return workspace, caller


async def _lock_workspaces_skip_locked(session: AsyncSession, condition: str, params: dict[str, object],
                                       limit: int) -> list[uuid.UUID]:
    """The sweeps' form of `_lock_workspace`: lock up to `limit` workspaces matching `condition`, in id
    order, skipping those a request holds (they are swept on the next run)."""
    rows = await session.execute(text(
        f"SELECT w.id FROM workspace.workspace w WHERE {condition} "  # noqa: S608  (a constant of this module)
        "ORDER BY w.id LIMIT :limit FOR UPDATE OF w SKIP LOCKED"), {**params, "limit": limit})
    return [workspace_id for (workspace_id,) in rows]


async def finish_workspace_deletions(session: AsyncSession, *, now: datetime,
                                     limit: int = SWEEP_BATCH) -> list[uuid.UUID]:
    """DELETING -> DELETED for up to `limit` workspaces, closing their memberships (WS-INV-09). This is
    where other domains' clean-up of a workspace's data will hook in. Answers the deleted ids."""
    locked = await _lock_workspaces_skip_locked(session, "w.status = 'DELETING'", {}, limit)
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
                           subject=("workspace", workspace_id), scope=_scope(workspace_id), now=now,
                           data={"closed_memberships": len(closed)})
        await events.publish(session, WorkspaceDeleted(workspace_id=workspace_id, now=now))
    return locked


# --- members -------------------------------------------------------------------------------------------


async def list_members(session: AsyncSession, *, workspace_id: uuid.UUID, user_id: uuid.UUID,
                       params: PageParams) -> tuple[list[MemberView], str | None]:
    """Active members in the order they joined (any member may list them)."""
    await get_workspace(session, workspace_id=workspace_id, user_id=user_id)
    statement = select(Membership).where(Membership.workspace_id == workspace_id, Membership.status == "ACTIVE")
    rows, next_cursor = await keyset_page(session, statement, order_by=(Membership.joined_at, Membership.id),
                                          params=params)
    people = await iam_service.user_summaries(session, [m.user_id for m in rows])
    return [MemberView(m, people[m.user_id].email, people[m.user_id].display_name) for m in rows], next_cursor


async def member_view(session: AsyncSession, membership: Membership) -> MemberView:
    person = (await iam_service.user_summaries(session, [membership.user_id]))[membership.user_id]
    return MemberView(membership, person.email, person.display_name)


async def _target_membership(session: AsyncSession, workspace_id: uuid.UUID, user_id: uuid.UUID) -> Membership:
    target = await _active_membership(session, workspace_id, user_id)
    if target is None:
        raise errors.MemberNotFound(user_id=str(user_id))
    return target


async def _end_membership(session: AsyncSession, target: Membership | Caller, name: str, *,
                          actor_id: uuid.UUID | None, now: datetime) -> Membership:
    return await transition(
        session, lifecycles.MEMBERSHIP, name, model=Membership, id=target.id,
        values={"ended_at": now, "ended_by": actor_id, "updated_at": now},
        refuse=lambda refusal: errors.MemberNotFound(user_id=str(target.user_id)),
    )


async def _set_role(session: AsyncSession, target: Membership | Caller, role: WorkspaceRole,
                    now: datetime) -> Membership:
    return await transition(
        session, lifecycles.MEMBERSHIP, "change_role", model=Membership, id=target.id,
        values={"role": role.value, "updated_at": now},
        refuse=lambda refusal: errors.MemberNotFound(user_id=str(target.user_id)),
    )


async def change_member_role(session: AsyncSession, *, workspace_id: uuid.UUID, actor_id: uuid.UUID,
                             user_id: uuid.UUID, role: WorkspaceRole, now: datetime) -> Membership:
    """Owners set any member's role, their own included; demoting the last owner is refused (WS-INV-01)."""
    role = WorkspaceRole(role)
    if role == WorkspaceRole.OWNER and user_id != actor_id:
        # Like a transfer: ownership only goes to an account that can use it (ACCOUNT_NOT_ACTIVE).
        await iam_service.require_active_accounts(session, [user_id])
    await _command(session, workspace_id, actor_id, Action.CHANGE_ROLE)
    target = await _target_membership(session, workspace_id, user_id)
    if target.role == role:
        return target
    if role != WorkspaceRole.OWNER:
        await _ensure_an_owner_remains(session, target)
    before = target.role
    updated = await _set_role(session, target, role, now)
    await audit.record(session, action="workspace.member.role_changed", actor=Actor.user(actor_id),
                       subject=("membership", target.id), scope=_scope(workspace_id), now=now,
                       data={"user_id": user_id, "from_role": before, "to_role": role})
    return updated


async def leave_workspace(session: AsyncSession, *, workspace_id: uuid.UUID, user_id: uuid.UUID,
                          now: datetime) -> None:
    """The caller leaves. The last active owner cannot (WS-INV-01): transfer ownership or delete first."""
    _, caller = await _command(session, workspace_id, user_id, Action.LEAVE)
    await _ensure_an_owner_remains(session, caller)
    await _end_membership(session, caller, "leave", actor_id=user_id, now=now)
    await audit.record(session, action="workspace.member.left", actor=Actor.user(user_id),
                       subject=("membership", caller.id), scope=_scope(workspace_id), now=now,
                       data={"user_id": user_id, "role": caller.role})


async def remove_member(session: AsyncSession, *, workspace_id: uuid.UUID, actor_id: uuid.UUID,
                        user_id: uuid.UUID, now: datetime) -> None:
    """Remove another member (owners: anyone; admins: members). Removing yourself is leaving."""
    if user_id == actor_id:
        await leave_workspace(session, workspace_id=workspace_id, user_id=actor_id, now=now)
        return
    _, caller = await _command(session, workspace_id, actor_id, Action.REMOVE_MEMBER)
    target = await _target_membership(session, workspace_id, user_id)
    require(caller.role, Action.REMOVE_MEMBER, target.role)
    await _ensure_an_owner_remains(session, target)
    await _end_membership(session, target, "remove", actor_id=actor_id, now=now)
    await audit.record(session, action="workspace.member.removed", actor=Actor.user(actor_id),
                       subject=("membership", target.id), scope=_scope(workspace_id), now=now,
                       data={"user_id": user_id, "role": target.role})


async def transfer_ownership(session: AsyncSession, *, workspace_id: uuid.UUID, actor_id: uuid.UUID,
                             user_id: uuid.UUID, now: datetime) -> tuple[Membership, Membership]:
    """The target (an active member, not an owner) becomes owner; the caller steps down to admin. Both in
    one transaction under the lock, so there is an owner at every moment. Answers (caller, target).
    A disabled or deleted target is refused (ACCOUNT_NOT_ACTIVE): an owner who cannot sign in owns nothing
    anyone can use. The target's account is share-locked first, so it cannot be disabled meanwhile."""
    if user_id != actor_id:
        await iam_service.require_active_accounts(session, [user_id])
    _, caller = await _command(session, workspace_id, actor_id, Action.TRANSFER_OWNERSHIP)
    if user_id == actor_id:
        raise errors.OwnershipTransferToSelf()
    target = await _target_membership(session, workspace_id, user_id)
    if target.role == WorkspaceRole.OWNER:
        raise errors.AlreadyOwner(user_id=str(user_id))
    # Promote first: the count below then includes the new owner, whatever the caller's role becomes.
    target = await _set_role(session, target, WorkspaceRole.OWNER, now)
    await _ensure_an_owner_remains(session, caller)
    stepped_down = await _set_role(session, caller, WorkspaceRole.ADMIN, now)
    await audit.record(session, action="workspace.ownership.transferred", actor=Actor.user(actor_id),
                       subject=("workspace", workspace_id), scope=_scope(workspace_id), now=now,
                       data={"from_user_id": actor_id, "to_user_id": user_id,
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
        membership = await _active_membership(session, workspace_id, user_id)
        if membership is None:
            continue
        await _ensure_an_owner_remains(session, membership)
        await _end_membership(session, membership, "remove", actor_id=ended_by, now=now)
        await audit.record(session, action="workspace.member.removed", actor=actor,
                           subject=("membership", membership.id), scope=_scope(workspace_id), now=now,
                           data={"user_id": user_id, "role": membership.role, "reason": "account_deleted"})


# --- invitations ---------------------------------------------------------------------------------------


def effective_status(invitation: Invitation | NewInvitation, now: datetime) -> str:
    """A PENDING invitation past its expiry is EXPIRED for every reader, whether or not the sweep has
    marked it yet (the sweep runs every minute; accept checks the time itself)."""
    if invitation.status == "PENDING" and invitation.expires_at <= now:
        return "EXPIRED"
    return invitation.status


def accept_link(public_base_url: str, token: str) -> str:
    return f"{public_base_url.rstrip('/')}/invitations/accept?{urlencode({'token': token})}"


def _one_line(value: str, limit: int = 120) -> str:
    # Names go into the subject and the text: one line, no control or bidi characters, bounded length.
    # The outbox cleans every subject again; cleaning here keeps the body consistent with it.
    return header_text(value, limit)


async def _send_invitation_mail(session: AsyncSession, *, invitation: Invitation | NewInvitation,
                                workspace: Workspace | CommandWorkspace,
                                inviter_id: uuid.UUID, inviter_name: str | None, token: str, policy: InvitationPolicy,
                                now: datetime, reason: str) -> None:
    """Queue the mail in the outbox (same transaction) and count it against the daily limit of the workspace.
    (The sender's own limit across workspaces is taken at the boundary: `sender_slot`.) `inviter_name` is the
    caller's display name when the boundary already has it (the request's principal); else it is read."""
    if inviter_name is None:
        inviter_name = (await iam_service.get_user(session, inviter_id)).display_name
    inviter_name, workspace_name = _one_line(inviter_name), _one_line(workspace.name)
    link = accept_link(policy.public_base_url, token)
    body = (
        f"Hello,\n\n{inviter_name} invited you to join the workspace \"{workspace_name}\" on Tenet "
        f"as {'an' if invitation.role == 'admin' else 'a'} {invitation.role}.\n\n"
        f"Accept the invitation (sign in with this email address):\n{link}\n\n"
        f"Or enter this invitation code in Tenet: {token}\n\n"
        f"The invitation expires on {invitation.expires_at:%Y-%m-%d %H:%M} UTC. "
        "If you did not expect it, you can ignore this mail.\n"
    )
    await enqueue_email(session, kind=MAIL_KIND, to=invitation.email,
                        subject=f"{inviter_name} invited you to {workspace_name} on Tenet", body_text=body, now=now)
    await (await statements(session)).execute(_INSERT_SEND, {
        "workspace_id": workspace.id, "invitation_id": invitation.id, "sent_at": now, "reason": reason})


@dataclass(frozen=True, slots=True)
class NewInvitation:
    """The invitation `create_invitation` inserted, as a value: it is written by a plain statement, not through
    the session (building an ORM object nobody flushes cost more than the insert on this hot path)."""

    id: uuid.UUID
    workspace_id: uuid.UUID
    email: str
    email_normalized: str
    email_normalization: str
    role: str
    status: str
    version: int
    token_digest: str
    invited_by: uuid.UUID
    created_at: datetime
    expires_at: datetime
    last_sent_at: datetime
    accepted_at: datetime | None = None
    accepted_by: uuid.UUID | None = None
    revoked_at: datetime | None = None
    revoked_by: uuid.UUID | None = None
    expired_at: datetime | None = None

    def row(self) -> dict[str, object]:
        """The parameters of `_INSERT_INVITATION` (every column of workspace.invitation)."""
        return {name: getattr(self, name) for name in self.__slots__}


_INVITE_FACTS = """
    SELECT (SELECT i.id FROM workspace.invitation i
             WHERE i.workspace_id = %(workspace_id)s AND i.email_normalized = %(key)s AND i.status = 'PENDING')
             AS pending_id,
           (SELECT m.user_id FROM iam.user_account u
              JOIN workspace.membership m ON m.user_id = u.id AND m.workspace_id = %(workspace_id)s
                                         AND m.status = 'ACTIVE'
             WHERE u.email_normalized = %(key)s AND u.status <> 'deleted')
             AS member_user_id,
           (SELECT count(*) FROM workspace.invitation_send s
             WHERE s.workspace_id = %(workspace_id)s AND s.sent_at > %(since)s)
             AS sent
"""
_INSERT_INVITATION = """
    INSERT INTO workspace.invitation (id, workspace_id, email, email_normalized, email_normalization, role, status,
                                      version, token_digest, invited_by, created_at, expires_at, last_sent_at,
                                      accepted_at, accepted_by, revoked_at, revoked_by, expired_at)
    VALUES (%(id)s, %(workspace_id)s, %(email)s, %(email_normalized)s, %(email_normalization)s, %(role)s, %(status)s,
            %(version)s, %(token_digest)s, %(invited_by)s, %(created_at)s, %(expires_at)s, %(last_sent_at)s,
            %(accepted_at)s, %(accepted_by)s, %(revoked_at)s, %(revoked_by)s, %(expired_at)s)
"""
_INSERT_SEND = """
    INSERT INTO workspace.invitation_send (workspace_id, invitation_id, sent_at, reason)
    VALUES (%(workspace_id)s, %(invitation_id)s, %(sent_at)s, %(reason)s)
"""


async def _check_daily_limit(session: AsyncSession, workspace_id: uuid.UUID, policy: InvitationPolicy,
                             now: datetime) -> None:
    """At most `daily_limit` invitation mails (invites and resends) per workspace in any 24 hours.
    Counted in the database under the workspace lock, so racing invites cannot both take the last slot."""
    since = now - SEND_WINDOW
    sent = (await session.execute(
        select(func.count()).select_from(InvitationSend)
        .where(InvitationSend.workspace_id == workspace_id, InvitationSend.sent_at > since)
    )).scalar_one()
    if sent < policy.daily_limit:
        return
    # The window frees a slot when the send that put it over the limit ages out.
    freeing = (await session.execute(
        select(InvitationSend.sent_at)
        .where(InvitationSend.workspace_id == workspace_id, InvitationSend.sent_at > since)
        .order_by(InvitationSend.sent_at).offset(sent - policy.daily_limit).limit(1)
    )).scalar_one()
    raise errors.InvitationLimitReached(
        f"At most {policy.daily_limit} invitations per workspace per 24 hours",
        retry_after_seconds=int((freeing + SEND_WINDOW - now).total_seconds()) + 1,
        limit=policy.daily_limit,
    )


async def _expire_if_due(session: AsyncSession, invitation: Invitation, now: datetime) -> bool:
    """Mark one PENDING invitation EXPIRED when its time has passed (under the workspace lock)."""
    if invitation.status != "PENDING" or invitation.expires_at > now:
        return False
    await transition(session, lifecycles.INVITATION, "expire", model=Invitation,
                     where=(Invitation.id == invitation.id, Invitation.expires_at <= now), values={"expired_at": now})
    await audit.record(session, action="workspace.invitation.expired", actor=Actor.system(),
                       subject=("invitation", invitation.id), scope=_scope(invitation.workspace_id), now=now)
    return True


async def create_invitation(session: AsyncSession, *, workspace_id: uuid.UUID, actor_id: uuid.UUID, email: str,
                            role: InvitationRole, policy: InvitationPolicy, now: datetime,
                            inviter_name: str | None = None) -> tuple[NewInvitation, str]:
    """Invite an email address; the token goes out only by mail. Answers the invitation and the token (for
    the mail's tests and the demo; the API never returns it)."""
    role = InvitationRole(role)
    try:
        typed = clean_email(email)
    except InvalidEmail as exc:
        raise errors.InvitationEmailInvalid(str(exc)) from None
    key = normalize_email(typed)
    sql = await statements(session)
    # The invite path is hot (bench/invitation_create): the lock with the caller's membership, then, under the
    # lock, a pending invitation of this address, an active member with it and the workspace's mails of the
    # last 24 hours, all in one round trip (the second statement runs once the first holds the lock).
    found, facts = await sql.ones(
        _locking(workspace_id, actor_id),
        (_INVITE_FACTS, {"workspace_id": workspace_id, "key": key, "since": now - SEND_WINDOW}))
    workspace, caller = _allowed(found, workspace_id, actor_id, Action.INVITE)
    require(caller.role, Action.INVITE, role.value)
    assert facts is not None
    if facts["pending_id"] is not None:
        # A pending invitation past its time no longer blocks a new one: close it first (WS-INV-04).
        existing = await session.get(Invitation, facts["pending_id"], populate_existing=True)
        assert existing is not None
        if not await _expire_if_due(session, existing, now):
            raise errors.InvitationAlreadyPending(invitation_id=str(existing.id))
    if facts["member_user_id"] is not None:
        raise errors.AlreadyMember(user_id=str(facts["member_user_id"]))
    if facts["sent"] >= policy.daily_limit:
        await _check_daily_limit(session, workspace_id, policy, now)
    token = new_secret(TOKEN_PREFIX)
    invitation = NewInvitation(
        id=uuid.uuid4(), workspace_id=workspace_id, email=typed, email_normalized=key,
        email_normalization=EMAIL_NORMALIZATION_VERSION, role=role.value, status="PENDING", version=1,
        token_digest=digest(token), invited_by=actor_id, created_at=now, expires_at=now + policy.ttl,
        last_sent_at=now,
    )
    if inviter_name is None:  # read before the pipeline below, which only plain statements may join
        inviter_name = (await iam_service.get_user(session, actor_id)).display_name
    # The four rows of an invitation (it, its mail, its send, its audit row) go in one round trip (plain
    # statements: nothing else in this command needs the session to hold the new invitation). The violation
    # is only reachable when the lock is bypassed; the index is the arbiter of WS-INV-03.
    try:
        async with sql.pipeline():
            await sql.execute(_INSERT_INVITATION, invitation.row())
            await _send_invitation_mail(session, invitation=invitation, workspace=workspace, inviter_id=actor_id,
                                        inviter_name=inviter_name, token=token, policy=policy, now=now,
                                        reason="invite")
            await audit.record(session, action="workspace.invitation.created", actor=Actor.user(actor_id),
                               subject=("invitation", invitation.id), scope=_scope(workspace_id), now=now,
                               data={"role": role, "expires_at": invitation.expires_at})
    except UniqueViolation as exc:
        if exc.diag.constraint_name == INVITATION_PENDING_INDEX:
            raise errors.InvitationAlreadyPending() from None
        raise
    return invitation, token


async def _invitation_command(session: AsyncSession, invitation_id: uuid.UUID,
                              actor_id: uuid.UUID) -> tuple[CommandWorkspace, Invitation]:
    """Revoke and resend: find the invitation's workspace, lock it, then check the caller may manage
    invitations of that role. Hidden (404) from anyone who is not a member of its workspace."""
    workspace_id = (await session.execute(
        select(Invitation.workspace_id).where(Invitation.id == invitation_id))).scalar_one_or_none()
    if workspace_id is None:
        raise errors.InvitationNotFound()
    workspace, caller = await _command(session, workspace_id, actor_id, Action.MANAGE_INVITATION,
                                       not_found=errors.InvitationNotFound)
    invitation = await session.get(Invitation, invitation_id, populate_existing=True)
    assert invitation is not None  # invitations are never deleted
    require(caller.role, Action.MANAGE_INVITATION, invitation.role)
    return workspace, invitation


def _invitation_refusal(now: datetime, *, token_digest: str | None = None):
    """The stable error for an invitation transition that matched no row: its terminal state's code; for a
    PENDING one, expired (past its time) or, for an accept, the token replaced by a resend meanwhile."""

    def refuse(refusal: Refusal[Invitation]) -> errors.DomainError:
        current = refusal.current
        if current is None:
            return errors.InvitationNotFound()
        if refusal.reason == "precondition" and token_digest is not None and current.token_digest != token_digest \
                and current.expires_at > now:
            return errors.InvitationTokenInvalid()
        error = errors.TERMINAL_INVITATION_ERRORS.get(current.status, errors.InvitationExpired)
        return error(invitation_id=str(current.id), invitation_status=current.status)

    return refuse


def _workspace_refusal(refusal: Refusal[Workspace]) -> errors.DomainError:
    if refusal.current is None or refusal.status == "DELETED":
        return errors.WorkspaceNotFound()
    return errors.WorkspaceNotActive(workspace_id=str(refusal.current.id), workspace_status=refusal.status)


async def revoke_invitation(session: AsyncSession, *, invitation_id: uuid.UUID, actor_id: uuid.UUID,
                            now: datetime) -> Invitation:
    """PENDING -> REVOKED; its token never yields membership (WS-INV-06)."""
    workspace, _ = await _invitation_command(session, invitation_id, actor_id)
    invitation = await transition(
        session, lifecycles.INVITATION, "revoke", model=Invitation, id=invitation_id,
        values={"revoked_at": now, "revoked_by": actor_id}, refuse=_invitation_refusal(now),
    )
    await audit.record(session, action="workspace.invitation.revoked", actor=Actor.user(actor_id),
                       subject=("invitation", invitation_id), scope=_scope(workspace.id), now=now,
                       data={"reason": "revoked"})
    return invitation


async def resend_invitation(session: AsyncSession, *, invitation_id: uuid.UUID, actor_id: uuid.UUID,
                            policy: InvitationPolicy, now: datetime,
                            inviter_name: str | None = None) -> tuple[Invitation, str]:
    """A new token replaces the old one (which then matches no invitation: WS-INV-06) and the expiry
    starts again. Only an unexpired PENDING invitation can be resent; an expired one is invited anew."""
    workspace, _ = await _invitation_command(session, invitation_id, actor_id)
    await _check_daily_limit(session, workspace.id, policy, now)
    token = new_secret(TOKEN_PREFIX)
    invitation = await transition(
        session, lifecycles.INVITATION, "resend", model=Invitation, id=invitation_id,
        values={"token_digest": digest(token), "expires_at": now + policy.ttl, "last_sent_at": now},
        where=(Invitation.expires_at > now,), refuse=_invitation_refusal(now),
    )
    await _send_invitation_mail(session, invitation=invitation, workspace=workspace, inviter_id=actor_id,
                                inviter_name=inviter_name, token=token, policy=policy, now=now, reason="resend")
    await audit.record(session, action="workspace.invitation.resent", actor=Actor.user(actor_id),
                       subject=("invitation", invitation_id), scope=_scope(workspace.id), now=now,
                       data={"expires_at": invitation.expires_at, "version": invitation.version})
    return invitation, token


async def accept_invitation(session: AsyncSession, *, token: str, user_id: uuid.UUID,
                            now: datetime) -> tuple[Workspace, Membership, Invitation]:
    """PENDING -> ACCEPTED and the new ACTIVE membership, in one transaction (WS-INV-05).

    Refused, with a stable code each: a token no invitation holds (never issued, or replaced by a resend),
    another account's invitation (normalised emails differ), a workspace being deleted, an invitation
    already accepted, revoked or expired (by state or by time), an existing active membership.
    """
    token_digest = digest(token)
    workspace_id = (await session.execute(
        select(Invitation.workspace_id).where(Invitation.token_digest == token_digest))).scalar_one_or_none()
    if workspace_id is None:
        raise errors.InvitationTokenInvalid()
    # Account, then workspace (the global lock order): a concurrent deletion of this account either runs
    # first (and we refuse) or waits for us and then ends the membership we create (WS-INV-10).
    await iam_service.require_active_accounts(session, [user_id])
    await _lock_workspace(session, workspace_id)
    # Re-read under the lock: a resend may have replaced the token meanwhile.
    invitation = (await session.scalars(
        select(Invitation).where(Invitation.token_digest == token_digest).execution_options(populate_existing=True)
    )).one_or_none()
    if invitation is None:
        raise errors.InvitationTokenInvalid()
    person = await iam_service.get_user(session, user_id)
    # Compare with the current algorithm applied to both typed forms, so a key stored by an older
    # algorithm version can never let a different address through.
    if normalize_email(person.email) != normalize_email(invitation.email):
        raise errors.InvitationEmailMismatch(invitation_id=str(invitation.id))
    workspace = await _load_workspace(session, workspace_id)
    assert workspace is not None
    if workspace.status != "ACTIVE":
        raise errors.WorkspaceNotActive(workspace_id=str(workspace_id), workspace_status=workspace.status)
    if invitation.status == "PENDING" and await _active_membership(session, workspace_id, user_id) is not None:
        raise errors.AlreadyMember(user_id=str(user_id))
    invitation = await transition(
        session, lifecycles.INVITATION, "accept", model=Invitation, id=invitation.id,
        values={"accepted_at": now, "accepted_by": user_id},
        where=(Invitation.token_digest == token_digest, Invitation.expires_at > now),
        refuse=_invitation_refusal(now, token_digest=token_digest),
    )
    membership = Membership(id=uuid.uuid4(), workspace_id=workspace_id, user_id=user_id, role=invitation.role,
                            status="ACTIVE", version=1, invitation_id=invitation.id, joined_at=now, updated_at=now)
    await add_unique(session, membership, on_violation={
        MEMBERSHIP_ACTIVE_INDEX: lambda: errors.AlreadyMember(user_id=str(user_id))})
    await audit.record(session, action="workspace.invitation.accepted", actor=Actor.user(user_id),
                       subject=("invitation", invitation.id), scope=_scope(workspace_id), now=now,
                       data={"membership_id": membership.id, "user_id": user_id, "role": invitation.role})
    return workspace, membership, invitation


async def list_invitations(session: AsyncSession, *, workspace_id: uuid.UUID, user_id: uuid.UUID,
                           status: str | None, params: PageParams, now: datetime
                           ) -> tuple[list[Invitation], str | None]:
    """Newest first (owners and admins). `status` filters by the effective status (see `effective_status`)."""
    _, caller = await get_workspace(session, workspace_id=workspace_id, user_id=user_id)
    require(caller.role, Action.LIST_INVITATIONS)
    statement = select(Invitation).where(Invitation.workspace_id == workspace_id)
    if status == "PENDING":
        statement = statement.where(Invitation.status == "PENDING", Invitation.expires_at > now)
    elif status == "EXPIRED":
        statement = statement.where((Invitation.status == "EXPIRED")
                                    | ((Invitation.status == "PENDING") & (Invitation.expires_at <= now)))
    elif status is not None:
        statement = statement.where(Invitation.status == status)
    return await keyset_page(session, statement, order_by=(Invitation.created_at, Invitation.id), params=params,
                             descending=True)


async def expire_due_invitations(session: AsyncSession, *, now: datetime,
                                 limit: int = SWEEP_BATCH) -> list[Invitation]:
    """The sweep: PENDING -> EXPIRED for every invitation past its time, in up to `limit` workspaces
    (each locked, SKIP LOCKED). Answers the expired invitations."""
    locked = await _lock_workspaces_skip_locked(
        session, "EXISTS (SELECT 1 FROM workspace.invitation i WHERE i.workspace_id = w.id "
                 "AND i.status = 'PENDING' AND i.expires_at <= :now)", {"now": now}, limit)
    if not locked:
        return []
    expired = await transition(
        session, lifecycles.INVITATION, "expire", model=Invitation,
        where=(Invitation.workspace_id.in_(locked), Invitation.expires_at <= now), values={"expired_at": now},
    )
    for invitation in expired:
        await audit.record(session, action="workspace.invitation.expired", actor=Actor.system(),
                           subject=("invitation", invitation.id), scope=_scope(invitation.workspace_id), now=now)
    return expired

