"""The five system roles and identity's permission points (API.md "Identity").

This module is the catalog the code checks against. The migrations seed the same rows as literal data
(a migration must not change when this file does); `tests/iam/test_admin.py::test_every_permission_in_code_is_seeded`
fails when the two disagree, which is the prompt to write a migration.
"""

from __future__ import annotations

from enum import StrEnum

from tenet.kernel.permissions import PermissionPoint


class Role(StrEnum):
    ADMINISTRATOR = "Administrator"
    MEETING_MANAGER = "MeetingManager"
    LEADER = "Leader"
    EMPLOYEE = "Employee"
    RESERVATION_AGENT = "ReservationAgent"


ROLE_DESCRIPTIONS = {
    Role.ADMINISTRATOR: "Everything, including users, roles and API clients",
    Role.MEETING_MANAGER: "Creates and runs meetings, series, agendas and reports",
    Role.LEADER: "Attends meetings, uploads assigned materials, reads team reports",
    Role.EMPLOYEE: "Attends meetings and uploads assigned materials (the default role)",
    Role.RESERVATION_AGENT: "Works the hotel reservation task queue",
}


class Permission(StrEnum):
    # identity
    IAM_USER_READ = "iam:user:read"
    IAM_USER_MANAGE = "iam:user:manage"
    IAM_ROLE_ASSIGN = "iam:role:assign"
    IAM_API_CLIENT_MANAGE = "iam:api-client:manage"
    # The meeting (`meeting:*`) and reservation (`reservation:*`) points are declared by their domains.


# Identity's own points and the reservation points. Each domain declares the points it checks, with their
# default grants, in its `Domain` (the meeting points: tenet.meetings.permissions); a role's permissions are
# the union over the catalog (tenet.kernel.permissions.points_of_role).
ROLE_PERMISSIONS: dict[Role, frozenset[Permission]] = {
    Role.ADMINISTRATOR: frozenset(Permission),
    Role.MEETING_MANAGER: frozenset(),
    Role.LEADER: frozenset(),
    Role.EMPLOYEE: frozenset(),
    Role.RESERVATION_AGENT: frozenset(),
}

DEFAULT_ROLES: tuple[Role, ...] = (Role.EMPLOYEE,)

# Identity's declaration of the points above (tenet.iam.domain). Every other domain declares its own points,
# with their default grants, in its Domain.
POINTS: tuple[PermissionPoint, ...] = tuple(
    PermissionPoint(name=point.value, description=point.name.replace("_", " ").capitalize(),
                    granted_to=frozenset(role.value for role, points in ROLE_PERMISSIONS.items() if point in points))
    for point in Permission
)


class Scope(StrEnum):
    """What an API client (client_credentials) may do."""

    RESERVATIONS_INGEST = "reservations:ingest"
    RESERVATIONS_READ = "reservations:read"
    SOCIAL_CUTOVER_READ = "social:cutover:read"  # a gateway asking which side a user reads from (issue 20)
