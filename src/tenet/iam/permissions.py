"""The five system roles and their permission points (API.md "Identity"; spec 001 "权限矩阵").

This module is the catalog the code checks against. The migrations seed the same rows as literal data
(a migration must not change when this file does); `tests/iam/test_permissions.py` fails when the two
disagree, which is the prompt to write a migration.
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
    # meeting attendance (spec 001); the agenda points are the spec's own names
    MEETING_READ = "meeting:read"
    MEETING_CREATE = "meeting:create"
    MEETING_UPDATE = "meeting:update"
    MEETING_DELETE = "meeting:delete"
    MEETING_CHECK_IN = "meeting:check-in"
    MEETING_ATTENDANCE_MANAGE = "meeting:attendance:manage"
    MEETING_SERIES_MANAGE = "meeting:series:manage"
    MEETING_TEMPLATE_MANAGE = "meeting:template:manage"
    MEETING_REPORT_READ = "meeting:report:read"
    MEETING_AUDIT_READ = "meeting:audit:read"
    MEETING_AGENDA_UPDATE = "meeting:agenda:update"
    MEETING_UPLOAD_TASK_ASSIGN = "meeting:upload-task:assign"
    MEETING_ATTACHMENT_UPLOAD_ANY = "meeting:attachment:upload:any"
    MEETING_ATTACHMENT_UPLOAD_ASSIGNED = "meeting:attachment:upload:assigned"
    MEETING_ATTACHMENT_DOWNLOAD = "meeting:attachment:download"
    MEETING_ATTACHMENT_RESTORE = "meeting:attachment:restore"
    MEETING_OUTLOOK_MANAGE = "meeting:outlook:manage"
    # The reservation workflow's points (`reservation:*`) are declared by tenet.reservations.


_MEETING_ATTENDEE = {
    Permission.MEETING_READ,
    Permission.MEETING_CHECK_IN,
    Permission.MEETING_ATTACHMENT_UPLOAD_ASSIGNED,
    Permission.MEETING_ATTACHMENT_DOWNLOAD,
}

ROLE_PERMISSIONS: dict[Role, frozenset[Permission]] = {
    Role.ADMINISTRATOR: frozenset(Permission),
    Role.MEETING_MANAGER: frozenset(p for p in Permission if p.value.startswith("meeting:")),
    Role.LEADER: frozenset(_MEETING_ATTENDEE | {Permission.MEETING_REPORT_READ}),
    Role.EMPLOYEE: frozenset(_MEETING_ATTENDEE),
    # Its points are declared with their grants by tenet.reservations (tenet.reservations.permissions).
    Role.RESERVATION_AGENT: frozenset(),
}

DEFAULT_ROLES: tuple[Role, ...] = (Role.EMPLOYEE,)

# Identity's declaration of the points above (tenet.iam.domain). The meeting points are declared here until
# their domain lands; it then declares its own points and these move with it (as the reservation points did).
POINTS: tuple[PermissionPoint, ...] = tuple(
    PermissionPoint(name=point.value, description=point.name.replace("_", " ").capitalize(),
                    granted_to=frozenset(role.value for role, points in ROLE_PERMISSIONS.items() if point in points))
    for point in Permission
)


class Scope(StrEnum):
    """What an API client (client_credentials) may do."""

    RESERVATIONS_INGEST = "reservations:ingest"
    RESERVATIONS_READ = "reservations:read"
