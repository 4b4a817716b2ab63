"""Who may do what: group roles and what each may do (the permission table as data, design §5.2), and the bits
of a holder's rights on a schedule item.

A declaration on the kernel's role matrix (tenet.kernel.roles): the service checks with `require`; the OpenAPI
description of the social tag and docs/decisions.md show the table rendered by `permission_table_markdown()` (a
test fails when the documented copy drifts). A rule names, per action and caller role, the roles of the *target*
the caller may act on (removal).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from tenet.kernel.errors import DomainError
from tenet.kernel.roles import Refusal, RoleMatrix
from tenet.social import errors


class GroupRole(StrEnum):
    CREATOR = "creator"
    ADMIN = "admin"
    MEMBER = "member"


class Action(StrEnum):
    VIEW = "view"
    RENAME = "rename"
    CHANGE_VISIBILITY = "change-visibility"
    INVITE = "invite"
    LIST_INVITATIONS = "list-invitations"
    CHANGE_ROLE = "change-role"
    HAND_OVER = "hand-over"
    REMOVE_MEMBER = "remove-member"
    ARCHIVE = "archive"


ANY = frozenset(GroupRole)
CREATOR, ADMIN, MEMBER = GroupRole.CREATOR, GroupRole.ADMIN, GroupRole.MEMBER

ACTION_DESCRIPTIONS: dict[Action, str] = {
    Action.VIEW: "See the group and its members; leave it (never the creator); mute yourself",
    Action.RENAME: "Rename and describe the group",
    Action.CHANGE_VISIBILITY: "Change the visibility (public / private)",
    Action.INVITE: "Invite a friend (through their inbox)",
    Action.LIST_INVITATIONS: "List open invitations and revoke them (members: their own)",
    Action.CHANGE_ROLE: "Make a member admin or member",
    Action.HAND_OVER: "Hand the group over (the target becomes creator, you admin)",
    Action.REMOVE_MEMBER: "Remove a member (by the member's role)",
    Action.ARCHIVE: "Archive or unarchive the group",
}

PERMISSIONS: dict[Action, dict[GroupRole, frozenset[GroupRole]]] = {
    Action.VIEW: {CREATOR: ANY, ADMIN: ANY, MEMBER: ANY},
    Action.RENAME: {CREATOR: ANY, ADMIN: ANY},
    Action.CHANGE_VISIBILITY: {CREATOR: ANY},
    Action.INVITE: {CREATOR: ANY, ADMIN: ANY},
    Action.LIST_INVITATIONS: {CREATOR: ANY, ADMIN: ANY, MEMBER: ANY},
    Action.CHANGE_ROLE: {CREATOR: ANY},
    Action.HAND_OVER: {CREATOR: ANY},
    Action.REMOVE_MEMBER: {CREATOR: frozenset({ADMIN, MEMBER}), ADMIN: frozenset({MEMBER})},
    Action.ARCHIVE: {CREATOR: ANY},
}

_TARGETED = frozenset({Action.REMOVE_MEMBER})


def _refuse(refusal: Refusal[Action]) -> DomainError:
    """403 GROUP_ROLE_FORBIDDEN."""
    return errors.GroupRoleForbidden(f"A group {refusal.role} may not: {refusal.description.lower()}",
                                     **refusal.data)


MATRIX = RoleMatrix(GroupRole, PERMISSIONS, descriptions=ACTION_DESCRIPTIONS, targeted=_TARGETED, refuse=_refuse)
allowed = MATRIX.allowed
require = MATRIX.require
permission_table_markdown = MATRIX.markdown


# --- item permissions (SOC-INV-11, SOC-INV-13) ----------------------------------------------------------
# A holder's rights on a schedule item as bits, as the SQL functions social.permission_bits / social.role_bits
# count them; the rule that combines them is queries.PERMISSION_SQL.

VIEW, INVITE, EDIT = 1, 2, 4
ALL = VIEW | INVITE | EDIT
NAMES = {VIEW: "view", INVITE: "invite", EDIT: "edit"}
# What a group subscription grants at most, by the member's role (§C.2).
ROLE_BITS = {GroupRole.CREATOR: ALL, GroupRole.ADMIN: VIEW | INVITE, GroupRole.MEMBER: VIEW}


def bits_of(permission: Iterable[str]) -> int:
    wanted = set(permission)
    return sum(bit for bit, name in NAMES.items() if name in wanted)


def names_of(bits: int) -> list[str]:
    """The canonical array (SOC-INV-11): view first, then invite, then edit."""
    return [NAMES[bit] for bit in (VIEW, INVITE, EDIT) if bits & bit]


def canonical(permission: list[str]) -> list[str]:
    """A permission set given in any order, without duplicates, containing view: its canonical array."""
    if len(set(permission)) != len(permission) or "view" not in permission or not set(permission) <= set(
            NAMES.values()):
        raise errors.PermissionSetInvalid(permission=[str(p)[:10] for p in permission[:3]])
    return names_of(bits_of(permission))
