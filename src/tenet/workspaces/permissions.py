"""Workspace roles and what each may do: the permission table as data.

A declaration on the kernel's role matrix (tenet.kernel.roles): the service checks with `require` / `allowed`;
the OpenAPI description and docs/decisions.md show the table rendered by `permission_table_markdown()` (a test
fails when the documented copy drifts).

A rule names, per action and per role of the caller, the roles of the *target* the caller may act on
(the member being removed or re-roled, the role an invitation grants). WS-INV-01 applies on top of
every rule: no action may leave an active workspace without an active owner.
"""

from __future__ import annotations

from enum import StrEnum

from tenet.kernel.errors import DomainError
from tenet.kernel.roles import Refusal, RoleMatrix
from tenet.workspaces import errors


class WorkspaceRole(StrEnum):
    """A member's role in one workspace (independent of the system roles of identity)."""

    OWNER = "owner"
    ADMIN = "admin"
    MEMBER = "member"


class InvitationRole(StrEnum):
    """The role an invitation grants. Ownership is never granted by mail: it is given by an owner to a
    member (change role or transfer), so a leaked invitation can never make someone an owner."""

    ADMIN = "admin"
    MEMBER = "member"


class Action(StrEnum):
    VIEW = "view"
    DELETE_WORKSPACE = "delete-workspace"
    LIST_INVITATIONS = "list-invitations"
    INVITE = "invite"
    MANAGE_INVITATION = "manage-invitation"
    CHANGE_ROLE = "change-role"
    REMOVE_MEMBER = "remove-member"
    TRANSFER_OWNERSHIP = "transfer-ownership"
    LEAVE = "leave"


ANY: frozenset[WorkspaceRole] = frozenset(WorkspaceRole)
OWNER, ADMIN, MEMBER = WorkspaceRole.OWNER, WorkspaceRole.ADMIN, WorkspaceRole.MEMBER

ACTION_DESCRIPTIONS: dict[Action, str] = {
    Action.VIEW: "See the workspace and list its members",
    Action.DELETE_WORKSPACE: "Delete the workspace (ACTIVE -> DELETING)",
    Action.LIST_INVITATIONS: "List invitations",
    Action.INVITE: "Invite by email (the role the invitation grants)",
    Action.MANAGE_INVITATION: "Revoke or resend an invitation (by the role it grants)",
    Action.CHANGE_ROLE: "Change a member's role (own role included)",
    Action.REMOVE_MEMBER: "Remove another member (by the member's role)",
    Action.TRANSFER_OWNERSHIP: "Transfer ownership (target becomes owner, caller becomes admin)",
    Action.LEAVE: "Leave the workspace",
}

# action -> caller role -> target roles the caller may act on. A role missing from an action may not do it.
PERMISSIONS: dict[Action, dict[WorkspaceRole, frozenset[WorkspaceRole]]] = {
    Action.VIEW: {OWNER: ANY, ADMIN: ANY, MEMBER: ANY},
    Action.DELETE_WORKSPACE: {OWNER: ANY},
    Action.LIST_INVITATIONS: {OWNER: ANY, ADMIN: ANY},
    Action.INVITE: {OWNER: frozenset({ADMIN, MEMBER}), ADMIN: frozenset({MEMBER})},
    Action.MANAGE_INVITATION: {OWNER: frozenset({ADMIN, MEMBER}), ADMIN: frozenset({MEMBER})},
    Action.CHANGE_ROLE: {OWNER: ANY},
    Action.REMOVE_MEMBER: {OWNER: ANY, ADMIN: frozenset({MEMBER})},
    Action.TRANSFER_OWNERSHIP: {OWNER: ANY},
    Action.LEAVE: {OWNER: ANY, ADMIN: ANY, MEMBER: ANY},
}

# Actions whose rule depends on a target's role (the others only on the caller's role).
_TARGETED = frozenset({Action.INVITE, Action.MANAGE_INVITATION, Action.REMOVE_MEMBER})


def _refuse(refusal: Refusal[Action]) -> DomainError:
    """403 WORKSPACE_ROLE_FORBIDDEN, naming the target's role when the caller may act on other roles."""
    detail = f"A workspace {refusal.role} may not {refusal.description.lower()}"
    if refusal.target is not None and refusal.partly:
        detail += f" for the role {refusal.target}"
    return errors.WorkspaceRoleForbidden(detail, **refusal.data)


MATRIX = RoleMatrix(WorkspaceRole, PERMISSIONS, descriptions=ACTION_DESCRIPTIONS, targeted=_TARGETED, refuse=_refuse)
allowed = MATRIX.allowed
require = MATRIX.require
permission_table_markdown = MATRIX.markdown
