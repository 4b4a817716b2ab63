"""The lock and the reads every workspace command starts with, and the per-account limits its routes take.

Serialisation (WS-INV-01, -02, -03, -05, -08, the daily limit): every command that changes the memberships or
invitations of a workspace first takes `lock_workspace` — a row lock on the workspace, taken by most commands
together with the read of the caller's membership (`command`, one statement) — and only then reads what it decides
on (the caller's role, the owner count, the pending invitations, today's sends). Two such commands on one workspace
therefore run one after the other, and each sees what the previous one committed (READ COMMITTED takes a new
snapshot per statement). Locks are always taken workspace first, then its invitation or membership rows, so
commands cannot deadlock each other. The sweeps lock many workspaces in id order with SKIP LOCKED
(`lock_workspaces_skip_locked`), so they never wait for (or block) a request.

The database stays the final arbiter where a rule fits in it (partial unique indexes, CHECKs, the terminal-state
triggers); the lock gives the friendly error first, the index maps to the same code.

The commands themselves: tenet.workspaces.workspaces (create, delete), .members (roles, leaving, removal,
transfer), .invitations (invite, revoke, resend, accept, expiry). Each runs inside the caller's unit of work and
never commits. Tests widen or remove these functions by module attribute (tests/concurrency), so the command
modules call them as `commands.<name>`.
"""

from __future__ import annotations

import uuid
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.ratelimit import RateLimiter
from tenet.kernel.settings import Rate
from tenet.kernel.statements import Row, statements
from tenet.kernel.transitions import lock_rows
from tenet.workspaces import errors
from tenet.workspaces.models import Membership, Workspace
from tenet.workspaces.permissions import Action, WorkspaceRole, require

SWEEP_BATCH = 200


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


def scope(workspace_id: uuid.UUID) -> tuple[str, uuid.UUID]:
    """The audit scope of a workspace's rows."""
    return ("workspace", workspace_id)


async def lock_workspace(session: AsyncSession, workspace_id: uuid.UUID) -> None:
    """THE serialisation point of a workspace: a row lock held until the transaction ends.

    Taken by every command that changes the workspace's memberships or invitations, before any read that
    command decides on (after the share lock on the accounts it relies on: accounts come first in the
    global lock order). tests/concurrency/test_workspace_races.py proves the owner rule needs it: with
    this function made a no-op, two last owners leaving at once both succeed.
    """
    await lock_rows(session, Workspace, [workspace_id])


async def load_workspace(session: AsyncSession, workspace_id: uuid.UUID) -> Workspace | None:
    return await session.get(Workspace, workspace_id, populate_existing=True)


async def active_membership(session: AsyncSession, workspace_id: uuid.UUID, user_id: uuid.UUID) -> Membership | None:
    return (await session.scalars(
        select(Membership)
        .where(Membership.workspace_id == workspace_id, Membership.user_id == user_id, Membership.status == "ACTIVE")
        .execution_options(populate_existing=True)
    )).one_or_none()


async def count_other_active_owners(session: AsyncSession, workspace_id: uuid.UUID,
                                    excluding_user_id: uuid.UUID) -> int:
    """Active owners other than `excluding_user_id`. Meaningful only under `lock_workspace`: without the
    lock, two owners could each count the other and both leave (WS-INV-01)."""
    return (await session.execute(
        select(func.count()).select_from(Membership)
        .where(Membership.workspace_id == workspace_id, Membership.status == "ACTIVE",
               Membership.role == WorkspaceRole.OWNER.value, Membership.user_id != excluding_user_id)
    )).scalar_one()


async def ensure_an_owner_remains(session: AsyncSession, target: Membership | Caller) -> None:
    """WS-INV-01: refuse when `target` is an owner and no other active owner exists."""
    if target.role == WorkspaceRole.OWNER and await count_other_active_owners(
            session, target.workspace_id, target.user_id) == 0:
        raise errors.LastOwner(workspace_id=str(target.workspace_id))


async def workspace_and_caller(session: AsyncSession, workspace_id: uuid.UUID,
                               principal_id: uuid.UUID) -> tuple[Workspace | None, Membership | None]:
    """The workspace and the caller's active membership, in one statement (both fresh from the database)."""
    row = (await session.execute(
        select(Workspace, Membership)
        .outerjoin(Membership, and_(Membership.workspace_id == Workspace.id, Membership.user_id == principal_id,
                                    Membership.status == "ACTIVE"))
        .where(Workspace.id == workspace_id)
        .execution_options(populate_existing=True)
    )).one_or_none()
    return (None, None) if row is None else (row[0], row[1])


WORKSPACE_AND_CALLER = """
    SELECT w.id, w.name, w.status, m.id AS membership_id, m.role
      FROM workspace.workspace w
      JOIN workspace.membership m ON m.workspace_id = w.id AND m.user_id = %(user_id)s AND m.status = 'ACTIVE'
     WHERE w.id = %(workspace_id)s
"""
# The lock of `lock_workspace`, taken by the statement that reads what the command checks. Both rows are
# locked, so when the statement had to wait for the lock READ COMMITTED re-checks the row pair against
# their latest committed versions (the caller's membership ended or re-roled meanwhile, the workspace
# moved to DELETING): a row of another table that is not locked would be seen as the statement's snapshot
# had it, before the wait. The membership takes a share lock only (it is not written by this statement;
# inserts of rows referencing it are not blocked).
LOCK_WORKSPACE_AND_CALLER = WORKSPACE_AND_CALLER + "   FOR UPDATE OF w FOR SHARE OF m"


def locking(workspace_id: uuid.UUID, principal_id: uuid.UUID) -> tuple[str, dict[str, uuid.UUID]]:
    """The statement that takes `lock_workspace` and reads the workspace and the caller's active membership
    (no row, and no lock, when the caller is not an active member). A membership the caller *gained* while
    it waited for the lock is not seen (the command then answers 404, as it would have a moment earlier):
    only ended or changed rows are re-checked."""
    return LOCK_WORKSPACE_AND_CALLER, {"workspace_id": workspace_id, "user_id": principal_id}


def allowed(row: Row | None, workspace_id: uuid.UUID, principal_id: uuid.UUID, action: Action, *,
            not_found: type[errors.DomainError] = errors.WorkspaceNotFound) -> tuple[CommandWorkspace, Caller]:
    """The checks of every command, on the row `locking` read: an active member (else 404) whose role may
    do `action` (else 403) of a workspace that is ACTIVE (else 409)."""
    if row is None or row["status"] == "DELETED":
        raise not_found()
    workspace = CommandWorkspace(id=row["id"], name=row["name"], status=row["status"])
    membership = Caller(id=row["membership_id"], workspace_id=row["id"], user_id=principal_id, role=row["role"])
    require(membership.role, action)
    if workspace.status != "ACTIVE":
        raise errors.WorkspaceNotActive(workspace_id=str(workspace_id), workspace_status=workspace.status)
    return workspace, membership


async def command(session: AsyncSession, workspace_id: uuid.UUID, principal_id: uuid.UUID, action: Action,
                  *, not_found: type[errors.DomainError] = errors.WorkspaceNotFound
                  ) -> tuple[CommandWorkspace, Caller]:
    """Lock the workspace and check the caller (`allowed`), in one statement. Answers the workspace and the
    caller's membership."""
    row = await (await statements(session)).one(*locking(workspace_id, principal_id))
    return allowed(row, workspace_id, principal_id, action, not_found=not_found)


async def lock_workspaces_skip_locked(session: AsyncSession, condition: str, params: dict[str, Any],
                                      limit: int) -> list[uuid.UUID]:
    """The sweeps' form of `lock_workspace`: lock up to `limit` workspaces matching `condition`, in id
    order, skipping those a request holds (they are swept on the next run)."""
    rows = await (await statements(session)).all(
        f"SELECT w.id FROM workspace.workspace w WHERE {condition} "  # noqa: S608  (a constant of the caller)
        "ORDER BY w.id LIMIT %(limit)s FOR UPDATE OF w SKIP LOCKED", {**params, "limit": limit})
    return [row["id"] for row in rows]


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
