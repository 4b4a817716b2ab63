"""The meeting permission points (declared in this domain's `Domain`), the written permission table and the OpenAPI
tag of the meeting routes (tenet.meetings.api), whose description is mostly that table.

The points and their default grants are the ones identity seeded (migration 0419): moving them here
changed no row of `iam.permission` / `iam.role_permission`. Routes check a point first (403
PERMISSION_DENIED, before any look-up), then the caller's meeting identity (`access.py`): a meeting the
caller may not see answers 404, a visible one the identity may not act on 403 MEETING_ACTION_FORBIDDEN.
"""

from __future__ import annotations

from enum import StrEnum

from tenet.kernel.permissions import PermissionPoint

ADMINISTRATOR, MEETING_MANAGER, LEADER, EMPLOYEE = "Administrator", "MeetingManager", "Leader", "Employee"
MANAGER_ROLES = frozenset({ADMINISTRATOR, MEETING_MANAGER})


class Permission(StrEnum):
    READ = "meeting:read"
    CREATE = "meeting:create"
    UPDATE = "meeting:update"
    DELETE = "meeting:delete"
    CHECK_IN = "meeting:check-in"
    ATTENDANCE_MANAGE = "meeting:attendance:manage"
    SERIES_MANAGE = "meeting:series:manage"
    TEMPLATE_MANAGE = "meeting:template:manage"
    REPORT_READ = "meeting:report:read"
    AUDIT_READ = "meeting:audit:read"
    # The agenda's points are the spec's own names (issue 11 checks them).
    AGENDA_UPDATE = "meeting:agenda:update"
    UPLOAD_TASK_ASSIGN = "meeting:upload-task:assign"
    ATTACHMENT_UPLOAD_ANY = "meeting:attachment:upload:any"
    ATTACHMENT_UPLOAD_ASSIGNED = "meeting:attachment:upload:assigned"
    ATTACHMENT_DOWNLOAD = "meeting:attachment:download"
    ATTACHMENT_RESTORE = "meeting:attachment:restore"
    OUTLOOK_MANAGE = "meeting:outlook:manage"


_DESCRIPTIONS = {
    Permission.READ: "See meetings (all of them for managers; one's own otherwise)",
    Permission.CREATE: "Create meetings",
    Permission.UPDATE: "Change, cancel and re-code meetings and their required attendees",
    Permission.DELETE: "Delete meetings",
    Permission.CHECK_IN: "Check oneself in to a meeting",
    Permission.ATTENDANCE_MANAGE: "Record, excuse and undo attendances",
    Permission.SERIES_MANAGE: "Create, change, reschedule and delete series",
    Permission.TEMPLATE_MANAGE: "Manage meeting templates",
    Permission.REPORT_READ: "Read attendance reports (all for managers; of led meetings for leaders)",
    Permission.AUDIT_READ: "Read the meeting-attendance audit log",
    Permission.AGENDA_UPDATE: "Change agendas",
    Permission.UPLOAD_TASK_ASSIGN: "Assign and cancel material upload tasks",
    Permission.ATTACHMENT_UPLOAD_ANY: "Upload and delete any material",
    Permission.ATTACHMENT_UPLOAD_ASSIGNED: "Upload material for one's own upload task",
    Permission.ATTACHMENT_DOWNLOAD: "Download materials of one's meetings",
    Permission.ATTACHMENT_RESTORE: "Restore deleted materials",
    Permission.OUTLOOK_MANAGE: "Manage the Outlook sync",
}

_ATTENDEE = {Permission.READ, Permission.CHECK_IN, Permission.ATTACHMENT_UPLOAD_ASSIGNED,
             Permission.ATTACHMENT_DOWNLOAD}
GRANTS: dict[str, frozenset[Permission]] = {
    ADMINISTRATOR: frozenset(Permission),
    # Restoring a deleted attachment is the administrators' (API.md; spec: "联系 admin 可恢复"; migration 1200).
    MEETING_MANAGER: frozenset(set(Permission) - {Permission.ATTACHMENT_RESTORE}),
    LEADER: frozenset(_ATTENDEE | {Permission.REPORT_READ}),
    EMPLOYEE: frozenset(_ATTENDEE),
}

POINTS: tuple[PermissionPoint, ...] = tuple(
    PermissionPoint(name=point.value, description=_DESCRIPTIONS[point],
                    granted_to=frozenset(role for role, points in GRANTS.items() if point in points))
    for point in Permission
)


# --- the table, per action and meeting identity (rendered into the OpenAPI tag and docs/decisions.md) --

class Identity(StrEnum):
    """Who the caller is for one meeting (first match wins; `access.resolve`)."""

    MANAGER = "manager"      # system role Administrator or MeetingManager
    CREATOR = "creator"
    ORGANIZER = "organizer"
    ATTENDEE = "attendee"    # a required attendee
    EXTERNAL = "external"    # a signed-in walk-in: a live attendance, nothing else


class Action(StrEnum):
    VIEW = "view"
    VIEW_DETAILS = "view-details"  # the full meeting and agenda; an external attendee gets the restricted view
    SHOW_CODES = "show-codes"
    LIST_ATTENDANCES = "list-attendances"
    READ_REPORT = "read-report"


ALL = frozenset(Identity)
# action -> identities allowed (after the route's permission point). Commands that change meetings need
# only their point: their holders are the managers (D-05).
TABLE: dict[Action, frozenset[Identity]] = {
    Action.VIEW: ALL,
    # The spec's participants (权限矩阵, the full agenda view): the agenda's rule, and the meeting's (issue 24 item 10).
    Action.VIEW_DETAILS: frozenset({Identity.MANAGER, Identity.CREATOR, Identity.ORGANIZER, Identity.ATTENDEE}),
    Action.SHOW_CODES: frozenset({Identity.MANAGER, Identity.CREATOR, Identity.ORGANIZER}),
    Action.LIST_ATTENDANCES: frozenset({Identity.MANAGER, Identity.CREATOR, Identity.ORGANIZER}),
    # "Leaders read reports of the meetings they lead": the organizer (D-05).
    Action.READ_REPORT: frozenset({Identity.MANAGER, Identity.ORGANIZER}),
}

PERMISSION_TABLE = """\
| action | point | Administrator | MeetingManager | Leader | Employee |
|---|---|---|---|---|---|
| list / read meetings | `meeting:read` | all | all | own | own |
| create, change, cancel, delete meetings | `meeting:create`, `update`, `delete` | yes | yes | no | no |
| show the QR codes (images, display page) | `meeting:read` | yes | yes | organizer | organizer |
| series and templates | `meeting:series:manage` / `meeting:template:manage` | yes | yes | no | no |
| read series | `meeting:read` | all | all | organized | no (404) |
| check oneself in | `meeting:check-in` | yes | yes | yes | yes |
| list attendances and scans of a meeting | `meeting:read` | yes | yes | organizer / creator | organizer / creator |
| record, excuse, undo attendances | `meeting:attendance:manage` | yes | yes | no | no |
| reports (meeting, series, distribution, ranking) | `meeting:report:read` | all | all | what they organize | no |
| audit log | `meeting:audit:read` | yes | yes | no | no |
| guest check-in | public, rate limited | - | - | - | - |

"Own" meetings are those the caller created, organizes, is a required attendee of, or checked in to. A
meeting the caller may not see answers 404; a visible one the caller may not act on, 403
`MEETING_ACTION_FORBIDDEN`."""

TAG = "meeting attendance"
TAG_DESCRIPTION = (
    "Meetings, series, templates, QR check-in for users and guests, attendance corrections, reports and the "
    "audit log (spec 001). Meeting ids are 32-character strings. Statuses SCHEDULED / IN_PROGRESS / COMPLETED "
    "are read from the clock; CANCELLED is stored. Check-in is accepted inside `[start - opens, closes)`; a "
    "check-in after start + grace is LATE. One live attendance per person and per device per meeting.\n\n"
    "Routes check the permission point first (403 `PERMISSION_DENIED`), then who you are for the meeting: a "
    "meeting you may not see answers 404, a visible one your role in it does not allow 403 "
    "`MEETING_ACTION_FORBIDDEN`. The `/public` routes need no token.\n\n"
    "**Who may do what**:\n\n" + PERMISSION_TABLE
)
