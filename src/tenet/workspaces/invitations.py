"""Invitation commands: invite an email address (the measured hot path), revoke, resend, accept, and the sweep that
expires invitations past their time. Each runs inside the caller's unit of work under the workspace's lock
(tenet.workspaces.commands) and never commits.

The invite path is a documented exception to "ORM for the entities a command reasons about" (docs/kernel.md): it
reads under the lock in one round trip (`Statements.ones`) and writes the invitation, its mail, its send and its
audit row in another (`Statements.pipeline`), with plain statements; bench/scenarios/invitation_create.py measures
it against the same SQL.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlencode

from psycopg.errors import UniqueViolation
from pydantic_settings import BaseSettings
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.iam import queries as iam_queries
from tenet.iam import service as iam_service
from tenet.iam.tokens import digest, new_secret
from tenet.kernel import audit
from tenet.kernel.audit import Actor
from tenet.kernel.db_errors import add_unique
from tenet.kernel.emails import EMAIL_NORMALIZATION_VERSION, InvalidEmail, clean_email, normalize_email
from tenet.kernel.mail import header_text
from tenet.kernel.outbox import enqueue_email
from tenet.kernel.settings import KernelSettings, section
from tenet.kernel.statements import Unit, statements
from tenet.kernel.transitions import Refusal, transition
from tenet.workspaces import commands, errors, lifecycles
from tenet.workspaces.commands import CommandWorkspace
from tenet.workspaces.models import (
    INVITATION_PENDING_INDEX,
    MEMBERSHIP_ACTIVE_INDEX,
    Invitation,
    Membership,
    Workspace,
)
from tenet.workspaces.permissions import Action, InvitationRole, require
from tenet.workspaces.settings import WorkspaceSettings

TOKEN_PREFIX = "wsi"  # recognisable by secret scanners, like identity's `rt_` and `tcs_`
SEND_WINDOW = timedelta(days=1)
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


def effective_status(invitation: Invitation | NewInvitation, now: datetime) -> str:
    """A PENDING invitation past its expiry is EXPIRED for every reader, whether or not the sweep has
    marked it yet (the sweep runs every minute; accept checks the time itself). The rule's one form in Python;
    its one form in SQL is tenet.workspaces.queries.EFFECTIVE_STATUS."""
    if invitation.status == "PENDING" and invitation.expires_at <= now:
        return "EXPIRED"
    return invitation.status


def accept_link(public_base_url: str, token: str) -> str:
    return f"{public_base_url.rstrip('/')}/invitations/accept?{urlencode({'token': token})}"


def _one_line(value: str, limit: int = 120) -> str:
    # Names go into the subject and the text: one line, no control or bidi characters, bounded length.
    # The outbox cleans every subject again; cleaning here keeps the body consistent with it.
    return header_text(value, limit)


_INVITE_FACTS = """
    SELECT (SELECT i.id FROM workspace.invitation i
             WHERE i.workspace_id = %(workspace_id)s AND i.email_normalized = %(key)s AND i.status = 'PENDING')
             AS pending_id,
           (SELECT i.expires_at FROM workspace.invitation i
             WHERE i.workspace_id = %(workspace_id)s AND i.email_normalized = %(key)s AND i.status = 'PENDING')
             AS pending_expires_at,
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


async def _send_invitation_mail(session: Unit, *, invitation: Invitation | NewInvitation,
                                workspace: Workspace | CommandWorkspace,
                                inviter_id: uuid.UUID, inviter_name: str | None, token: str, policy: InvitationPolicy,
                                now: datetime, reason: str) -> None:
    """Queue the mail in the outbox (same transaction) and count it against the daily limit of the workspace.
    (The sender's own limit across workspaces is taken at the boundary: `sender_slot`.) `inviter_name` is the
    caller's display name when the boundary already has it (the request's principal); else it is read."""
    if inviter_name is None:
        inviter_name = await _display_name(session, inviter_id)
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


_SENDS_IN_WINDOW = """
    SELECT count(*) AS sent FROM workspace.invitation_send
     WHERE workspace_id = %(workspace_id)s AND sent_at > %(since)s
"""
_FREEING_SEND = """
    SELECT sent_at FROM workspace.invitation_send
     WHERE workspace_id = %(workspace_id)s AND sent_at > %(since)s
     ORDER BY sent_at OFFSET %(offset)s LIMIT 1
"""


async def _check_daily_limit(session: Unit, workspace_id: uuid.UUID, policy: InvitationPolicy,
                             now: datetime) -> None:
    """At most `daily_limit` invitation mails (invites and resends) per workspace in any 24 hours.
    Counted in the database under the workspace lock, so racing invites cannot both take the last slot."""
    sql, window = await statements(session), {"workspace_id": workspace_id, "since": now - SEND_WINDOW}
    sent = await sql.value(_SENDS_IN_WINDOW, window)
    if sent < policy.daily_limit:
        return
    # The window frees a slot when the send that put it over the limit ages out.
    freeing = await sql.value(_FREEING_SEND, {**window, "offset": sent - policy.daily_limit})
    raise errors.InvitationLimitReached(
        f"At most {policy.daily_limit} invitations per workspace per 24 hours",
        retry_after_seconds=int((freeing + SEND_WINDOW - now).total_seconds()) + 1,
        limit=policy.daily_limit,
    )


async def _display_name(session: Unit, user_id: uuid.UUID) -> str:
    return str((await iam_queries.user(await statements(session), user_id=user_id))["display_name"])


async def _expire_if_due(session: AsyncSession, invitation: Invitation, now: datetime) -> bool:
    """Mark one PENDING invitation EXPIRED when its time has passed (under the workspace lock)."""
    if invitation.status != "PENDING" or invitation.expires_at > now:
        return False
    await _expire(session, invitation.id, invitation.workspace_id, now)
    return True


async def _expire(session: Unit, invitation_id: uuid.UUID, workspace_id: uuid.UUID, now: datetime) -> bool:
    """The `expire` transition of one invitation whose time has passed, and its audit row; whether it moved."""
    moved = await transition(session, lifecycles.INVITATION, "expire", model=Invitation,
                             where=(Invitation.id == invitation_id, Invitation.expires_at <= now),
                             values={"expired_at": now})
    if moved:
        await audit.record(session, action="workspace.invitation.expired", actor=Actor.system(),
                           subject=("invitation", invitation_id), scope=commands.scope(workspace_id), now=now)
    return bool(moved)


async def create_invitation(session: Unit, *, workspace_id: uuid.UUID, principal_id: uuid.UUID, email: str,
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
        commands.locking(workspace_id, principal_id),
        (_INVITE_FACTS, {"workspace_id": workspace_id, "key": key, "since": now - SEND_WINDOW}))
    workspace, membership = commands.allowed(found, workspace_id, principal_id, Action.INVITE)
    require(membership.role, Action.INVITE, role.value)
    assert facts is not None
    # A pending invitation past its time no longer blocks a new one: close it first (WS-INV-04).
    pending = facts["pending_id"]
    if pending is not None and (facts["pending_expires_at"] > now
                                or not await _expire(session, pending, workspace_id, now)):
        raise errors.InvitationAlreadyPending(invitation_id=str(pending))
    if facts["member_user_id"] is not None:
        raise errors.AlreadyMember(user_id=str(facts["member_user_id"]))
    if facts["sent"] >= policy.daily_limit:
        await _check_daily_limit(session, workspace_id, policy, now)
    token = new_secret(TOKEN_PREFIX)
    invitation = NewInvitation(
        id=uuid.uuid4(), workspace_id=workspace_id, email=typed, email_normalized=key,
        email_normalization=EMAIL_NORMALIZATION_VERSION, role=role.value, status="PENDING", version=1,
        token_digest=digest(token), invited_by=principal_id, created_at=now, expires_at=now + policy.ttl,
        last_sent_at=now,
    )
    if inviter_name is None:  # read before the pipeline below
        inviter_name = await _display_name(session, principal_id)
    # The four rows of an invitation (it, its mail, its send, its audit row) go in one round trip (plain
    # statements: nothing else in this command needs the session to hold the new invitation). The violation
    # is only reachable when the lock is bypassed; the index is the arbiter of WS-INV-03.
    try:
        async with sql.pipeline():
            await sql.execute(_INSERT_INVITATION, invitation.row())
            await _send_invitation_mail(session, invitation=invitation, workspace=workspace, inviter_id=principal_id,
                                        inviter_name=inviter_name, token=token, policy=policy, now=now,
                                        reason="invite")
            await audit.record(session, action="workspace.invitation.created", actor=Actor.user(principal_id),
                               subject=("invitation", invitation.id), scope=commands.scope(workspace_id), now=now,
                               data={"role": role, "expires_at": invitation.expires_at})
    except UniqueViolation as exc:
        if exc.diag.constraint_name == INVITATION_PENDING_INDEX:
            raise errors.InvitationAlreadyPending() from None
        raise
    return invitation, token


async def _invitation_command(session: AsyncSession, invitation_id: uuid.UUID,
                              principal_id: uuid.UUID) -> tuple[CommandWorkspace, Invitation]:
    """Revoke and resend: find the invitation's workspace, lock it, then check the caller may manage
    invitations of that role. Hidden (404) from anyone who is not a member of its workspace."""
    workspace_id = (await session.execute(
        select(Invitation.workspace_id).where(Invitation.id == invitation_id))).scalar_one_or_none()
    if workspace_id is None:
        raise errors.InvitationNotFound()
    workspace, membership = await commands.command(session, workspace_id, principal_id, Action.MANAGE_INVITATION,
                                       not_found=errors.InvitationNotFound)
    invitation = await session.get(Invitation, invitation_id, populate_existing=True)
    assert invitation is not None  # invitations are never deleted
    require(membership.role, Action.MANAGE_INVITATION, invitation.role)
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


async def revoke_invitation(session: AsyncSession, *, invitation_id: uuid.UUID, principal_id: uuid.UUID,
                            now: datetime) -> Invitation:
    """PENDING -> REVOKED; its token never yields membership (WS-INV-06)."""
    workspace, _ = await _invitation_command(session, invitation_id, principal_id)
    invitation = await transition(
        session, lifecycles.INVITATION, "revoke", model=Invitation, id=invitation_id,
        values={"revoked_at": now, "revoked_by": principal_id}, refuse=_invitation_refusal(now),
    )
    await audit.record(session, action="workspace.invitation.revoked", actor=Actor.user(principal_id),
                       subject=("invitation", invitation_id), scope=commands.scope(workspace.id), now=now,
                       data={"reason": "revoked"})
    return invitation


async def resend_invitation(session: AsyncSession, *, invitation_id: uuid.UUID, principal_id: uuid.UUID,
                            policy: InvitationPolicy, now: datetime,
                            inviter_name: str | None = None) -> tuple[Invitation, str]:
    """A new token replaces the old one (which then matches no invitation: WS-INV-06) and the expiry
    starts again. Only an unexpired PENDING invitation can be resent; an expired one is invited anew."""
    workspace, _ = await _invitation_command(session, invitation_id, principal_id)
    await _check_daily_limit(session, workspace.id, policy, now)
    token = new_secret(TOKEN_PREFIX)
    invitation = await transition(
        session, lifecycles.INVITATION, "resend", model=Invitation, id=invitation_id,
        values={"token_digest": digest(token), "expires_at": now + policy.ttl, "last_sent_at": now},
        where=(Invitation.expires_at > now,), refuse=_invitation_refusal(now),
    )
    await _send_invitation_mail(session, invitation=invitation, workspace=workspace, inviter_id=principal_id,
                                inviter_name=inviter_name, token=token, policy=policy, now=now, reason="resend")
    await audit.record(session, action="workspace.invitation.resent", actor=Actor.user(principal_id),
                       subject=("invitation", invitation_id), scope=commands.scope(workspace.id), now=now,
                       data={"expires_at": invitation.expires_at, "version": invitation.version})
    return invitation, token


async def accept_invitation(session: AsyncSession, *, token: str, principal_id: uuid.UUID,
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
    await iam_service.require_active_accounts(session, [principal_id])
    await commands.lock_workspace(session, workspace_id)
    # Re-read under the lock: a resend may have replaced the token meanwhile.
    invitation = (await session.scalars(
        select(Invitation).where(Invitation.token_digest == token_digest).execution_options(populate_existing=True)
    )).one_or_none()
    if invitation is None:
        raise errors.InvitationTokenInvalid()
    person = await iam_service.get_user(session, principal_id)
    # Compare with the current algorithm applied to both typed forms, so a key stored by an older
    # algorithm version can never let a different address through.
    if normalize_email(person.email) != normalize_email(invitation.email):
        raise errors.InvitationEmailMismatch(invitation_id=str(invitation.id))
    workspace = await commands.load_workspace(session, workspace_id)
    assert workspace is not None
    if workspace.status != "ACTIVE":
        raise errors.WorkspaceNotActive(workspace_id=str(workspace_id), workspace_status=workspace.status)
    if invitation.status == "PENDING" and await commands.active_membership(
            session, workspace_id, principal_id) is not None:
        raise errors.AlreadyMember(user_id=str(principal_id))
    invitation = await transition(
        session, lifecycles.INVITATION, "accept", model=Invitation, id=invitation.id,
        values={"accepted_at": now, "accepted_by": principal_id},
        where=(Invitation.token_digest == token_digest, Invitation.expires_at > now),
        refuse=_invitation_refusal(now, token_digest=token_digest),
    )
    membership = Membership(id=uuid.uuid4(), workspace_id=workspace_id, user_id=principal_id, role=invitation.role,
                            status="ACTIVE", version=1, invitation_id=invitation.id, joined_at=now, updated_at=now)
    await add_unique(session, membership, on_violation={
        MEMBERSHIP_ACTIVE_INDEX: lambda: errors.AlreadyMember(user_id=str(principal_id))})
    await audit.record(session, action="workspace.invitation.accepted", actor=Actor.user(principal_id),
                       subject=("invitation", invitation.id), scope=commands.scope(workspace_id), now=now,
                       data={"membership_id": membership.id, "user_id": principal_id, "role": invitation.role})
    return workspace, membership, invitation


async def expire_due_invitations(session: AsyncSession, *, now: datetime,
                                 limit: int | None = None) -> list[Invitation]:
    """The sweep: PENDING -> EXPIRED for every invitation past its time, in up to `limit` workspaces
    (each locked, SKIP LOCKED; `commands.SWEEP_BATCH` unless given). Answers the expired invitations."""
    locked = await commands.lock_workspaces_skip_locked(
        session, "EXISTS (SELECT 1 FROM workspace.invitation i WHERE i.workspace_id = w.id "
                 "AND i.status = 'PENDING' AND i.expires_at <= %(now)s)", {"now": now},
        limit or commands.SWEEP_BATCH)
    if not locked:
        return []
    expired = await transition(
        session, lifecycles.INVITATION, "expire", model=Invitation,
        where=(Invitation.workspace_id.in_(locked), Invitation.expires_at <= now), values={"expired_at": now},
    )
    for invitation in expired:
        await audit.record(session, action="workspace.invitation.expired", actor=Actor.system(),
                           subject=("invitation", invitation.id), scope=commands.scope(invitation.workspace_id),
                           now=now)
    return expired
