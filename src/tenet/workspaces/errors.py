"""Stable error codes of workspaces. Values never change (ARCHITECTURE.md "Conventions").

Each class carries its HTTP status; the problem document's extra members (`status`, `role`, ...) are
machine-readable facts about the conflict, never names, emails or tokens.
"""

from __future__ import annotations

from enum import StrEnum

from tenet.kernel.errors import DomainError, RateLimited


class WorkspaceErrorCode(StrEnum):
    WORKSPACE_NOT_FOUND = "WORKSPACE_NOT_FOUND"
    WORKSPACE_NOT_ACTIVE = "WORKSPACE_NOT_ACTIVE"
    WORKSPACE_ROLE_FORBIDDEN = "WORKSPACE_ROLE_FORBIDDEN"
    MEMBER_NOT_FOUND = "MEMBER_NOT_FOUND"
    ALREADY_MEMBER = "ALREADY_MEMBER"
    LAST_OWNER = "LAST_OWNER"
    ALREADY_OWNER = "ALREADY_OWNER"
    OWNERSHIP_TRANSFER_TO_SELF = "OWNERSHIP_TRANSFER_TO_SELF"
    INVITATION_NOT_FOUND = "INVITATION_NOT_FOUND"
    INVITATION_EMAIL_INVALID = "INVITATION_EMAIL_INVALID"
    INVITATION_ALREADY_PENDING = "INVITATION_ALREADY_PENDING"
    INVITATION_TOKEN_INVALID = "INVITATION_TOKEN_INVALID"
    INVITATION_ALREADY_ACCEPTED = "INVITATION_ALREADY_ACCEPTED"
    INVITATION_REVOKED = "INVITATION_REVOKED"
    INVITATION_EXPIRED = "INVITATION_EXPIRED"
    INVITATION_EMAIL_MISMATCH = "INVITATION_EMAIL_MISMATCH"
    INVITATION_LIMIT_REACHED = "INVITATION_LIMIT_REACHED"
    WORKSPACE_CREATION_LIMIT_REACHED = "WORKSPACE_CREATION_LIMIT_REACHED"
    INVITATION_SENDER_LIMIT_REACHED = "INVITATION_SENDER_LIMIT_REACHED"


class WorkspaceNotFound(DomainError):
    """404 for a workspace that does not exist, is DELETED, or of which the caller is not an active member
    (API.md: 404, not 403, for rows the caller may not see)."""

    status, code, title = 404, WorkspaceErrorCode.WORKSPACE_NOT_FOUND, "No such workspace"


class WorkspaceNotActive(DomainError):
    """The workspace is being deleted: it is read-only (WS-INV-08)."""

    status, code, title = 409, WorkspaceErrorCode.WORKSPACE_NOT_ACTIVE, "The workspace is being deleted"


class WorkspaceRoleForbidden(DomainError):
    status, code, title = 403, WorkspaceErrorCode.WORKSPACE_ROLE_FORBIDDEN, "Your workspace role does not allow this"


class MemberNotFound(DomainError):
    status, code, title = 404, WorkspaceErrorCode.MEMBER_NOT_FOUND, "No active member with this user id"


class AlreadyMember(DomainError):
    """WS-INV-02: at most one active membership per (workspace, user)."""

    status, code, title = 409, WorkspaceErrorCode.ALREADY_MEMBER, "This person is already an active member"


class LastOwner(DomainError):
    """WS-INV-01: the last active owner cannot leave, be removed or be demoted."""

    status, code, title = 409, WorkspaceErrorCode.LAST_OWNER, "The workspace must keep at least one active owner"


class AlreadyOwner(DomainError):
    status, code, title = 409, WorkspaceErrorCode.ALREADY_OWNER, "This member is already an owner"


class OwnershipTransferToSelf(DomainError):
    status, code, title = (
        409, WorkspaceErrorCode.OWNERSHIP_TRANSFER_TO_SELF, "Ownership can only be transferred to another member"
    )


class InvitationNotFound(DomainError):
    status, code, title = 404, WorkspaceErrorCode.INVITATION_NOT_FOUND, "No such invitation"


class InvitationEmailInvalid(DomainError):
    status, code, title = 422, WorkspaceErrorCode.INVITATION_EMAIL_INVALID, "The email address is not valid"


class InvitationAlreadyPending(DomainError):
    """WS-INV-03: one PENDING invitation per (workspace, normalised email)."""

    status, code, title = (
        409, WorkspaceErrorCode.INVITATION_ALREADY_PENDING,
        "A pending invitation for this email address already exists; resend it instead",
    )


class InvitationTokenInvalid(DomainError):
    """No invitation holds this token: it never existed, or a resend replaced it (WS-INV-06)."""

    status, code, title = 404, WorkspaceErrorCode.INVITATION_TOKEN_INVALID, "This invitation link is not valid"


class InvitationAlreadyAccepted(DomainError):
    status, code, title = 409, WorkspaceErrorCode.INVITATION_ALREADY_ACCEPTED, "The invitation was already accepted"


class InvitationRevoked(DomainError):
    status, code, title = 409, WorkspaceErrorCode.INVITATION_REVOKED, "The invitation was revoked"


class InvitationExpired(DomainError):
    status, code, title = 409, WorkspaceErrorCode.INVITATION_EXPIRED, "The invitation has expired"


class InvitationEmailMismatch(DomainError):
    """WS-INV-06: the accepting account's normalised email must be the invited one."""

    status, code, title = (
        403, WorkspaceErrorCode.INVITATION_EMAIL_MISMATCH,
        "This invitation was sent to another email address; sign in with that address to accept it",
    )


class InvitationLimitReached(RateLimited):
    """More invitation mails from one workspace in 24 hours than `invitations_per_workspace_per_day`."""

    code, title = WorkspaceErrorCode.INVITATION_LIMIT_REACHED, "This workspace has sent too many invitations today"


class WorkspaceCreationLimitReached(RateLimited):
    """More workspaces created by one account in the window than TENET_WORKSPACE_CREATION_LIMIT allows."""

    code, title = WorkspaceErrorCode.WORKSPACE_CREATION_LIMIT_REACHED, "You have created too many workspaces lately"


class InvitationSenderLimitReached(RateLimited):
    """More invitation mails sent by one account, across all its workspaces, than TENET_INVITATION_SENDER_LIMIT."""

    code, title = WorkspaceErrorCode.INVITATION_SENDER_LIMIT_REACHED, "You have sent too many invitations lately"


# An invitation's terminal status -> the error a command on it answers (accept, revoke, resend).
TERMINAL_INVITATION_ERRORS: dict[str, type[DomainError]] = {
    "ACCEPTED": InvitationAlreadyAccepted,
    "REVOKED": InvitationRevoked,
    "EXPIRED": InvitationExpired,
}
