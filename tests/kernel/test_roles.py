"""The kernel's role matrix (tenet.kernel.roles): one table answers, refuses with the domain's error, and renders
the documented copy; workspaces and social groups are declarations on it."""

from __future__ import annotations

from enum import StrEnum

import pytest

from tenet.kernel.errors import DomainError, PermissionDenied
from tenet.kernel.roles import Refusal, RoleMatrix


class Role(StrEnum):
    CHIEF = "chief"
    CREW = "crew"
    GUEST = "guest"


class Act(StrEnum):
    LOOK = "look"
    STEER = "steer"
    DISMISS = "dismiss"


EVERYONE = frozenset(Role)
RULES = {
    Act.LOOK: {Role.CHIEF: EVERYONE, Role.CREW: EVERYONE, Role.GUEST: EVERYONE},
    Act.STEER: {Role.CHIEF: EVERYONE},
    Act.DISMISS: {Role.CHIEF: frozenset({Role.CREW, Role.GUEST}), Role.CREW: frozenset({Role.GUEST})},
}
DESCRIPTIONS = {Act.LOOK: "Look around", Act.STEER: "Steer the ship", Act.DISMISS: "Dismiss someone (by role)"}
refusals: list[Refusal[Act]] = []


def _refuse(refusal: Refusal[Act]) -> DomainError:
    refusals.append(refusal)
    return PermissionDenied(f"A {refusal.role} may not {refusal.description.lower()}", **refusal.data)


MATRIX = RoleMatrix(Role, RULES, descriptions=DESCRIPTIONS, targeted=frozenset({Act.DISMISS}), refuse=_refuse)


@pytest.mark.parametrize("role, action, target, expected", [
    (Role.GUEST, Act.LOOK, None, True),
    (Role.GUEST, Act.STEER, None, False),
    ("chief", Act.STEER, None, True),
    (Role.CHIEF, Act.DISMISS, Role.CREW, True),
    (Role.CHIEF, Act.DISMISS, Role.CHIEF, False),
    (Role.CREW, Act.DISMISS, "guest", True),
    (Role.CREW, Act.DISMISS, Role.CREW, False),
    (Role.GUEST, Act.DISMISS, Role.GUEST, False),
])
def test_allowed_reads_the_table_cell_by_cell(role, action, target, expected):
    assert MATRIX.allowed(role, action, target) is expected


def test_an_unknown_role_is_not_a_role():
    with pytest.raises(ValueError):
        MATRIX.allowed("captain", Act.LOOK)


def test_require_passes_silently_when_allowed():
    refusals.clear()
    MATRIX.require(Role.CHIEF, Act.DISMISS, Role.GUEST)
    assert refusals == []


def test_require_raises_the_domains_error_with_the_stable_members():
    with pytest.raises(PermissionDenied) as raised:
        MATRIX.require("crew", Act.STEER)
    problem = raised.value.to_problem()
    assert problem["code"] == "PERMISSION_DENIED" and problem["status"] == 403
    assert problem["detail"] == "A crew may not steer the ship"
    assert raised.value.data == {"action": "steer", "role": "crew"}


def test_a_refusal_about_the_target_names_it_and_says_the_role_acts_on_others():
    refusals.clear()
    with pytest.raises(PermissionDenied) as raised:
        MATRIX.require(Role.CREW, Act.DISMISS, Role.CHIEF)
    assert raised.value.data == {"action": "dismiss", "role": "crew", "target_role": "chief"}
    (refusal,) = refusals
    assert refusal.partly and refusal.target == "chief" and refusal.description == "Dismiss someone (by role)"
    with pytest.raises(PermissionDenied):
        MATRIX.require(Role.GUEST, Act.DISMISS, Role.GUEST)
    assert not refusals[-1].partly


def test_the_markdown_table_has_a_column_per_role_and_a_row_per_action_in_order():
    assert MATRIX.markdown() == "\n".join([
        "| action | chief | crew | guest |",
        "|---|---|---|---|",
        "| Look around | yes | yes | yes |",
        "| Steer the ship | yes | no | no |",
        "| Dismiss someone (by role) | only crew or guest | only guest | no |",
    ])


def test_a_rule_without_a_description_is_refused_at_declaration():
    with pytest.raises(ValueError, match="without a description"):
        RoleMatrix(Role, RULES, descriptions={Act.LOOK: "Look"}, targeted=frozenset(), refuse=_refuse)


def test_workspaces_and_groups_are_declarations_on_the_kernel_matrix():
    from tenet.social import permissions as social
    from tenet.workspaces import permissions as workspaces

    assert isinstance(social.MATRIX, RoleMatrix) and isinstance(workspaces.MATRIX, RoleMatrix)
    assert social.require == social.MATRIX.require and workspaces.allowed == workspaces.MATRIX.allowed
