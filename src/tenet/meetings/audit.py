"""The meeting-attendance audit log (the spec's MeetingAttendanceAuditLog, decision D-01): action and resource
constants (key = value, as the spec's MEETING_ATTENDANCE_AUDIT_ACTIONS) and the one writer.

`changes` is `{entityId, entityType, before, after, ...flags}` (spec §审计扩展). It refers to people by id and
never holds personal data or free text (MA-INV-13, MA-INV-20): a changed description or note is recorded as
`description_changed: true`, the text itself stays in its own row where retention can reach it (D-30).
"""

from __future__ import annotations

import uuid
from datetime import date, datetime, time
from enum import Enum, StrEnum
from typing import Any

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.audit import Actor
from tenet.kernel.context import current_request_id
from tenet.meetings.invariants import PERSONAL_KEYS
from tenet.meetings.models import AuditLog


class Resource(StrEnum):
    MEETING = "MEETING"
    SERIES = "SERIES"
    TEMPLATE = "TEMPLATE"
    ATTENDANCE = "ATTENDANCE"
    GUEST = "GUEST"
    USER = "USER"
    QR_CODE = "QR_CODE"
    # The agenda's (issue 11), so the audit filter knows them already.
    AGENDA_SECTION = "AGENDA_SECTION"
    AGENDA_ITEM = "AGENDA_ITEM"
    UPLOAD_TASK = "UPLOAD_TASK"
    ATTACHMENT = "ATTACHMENT"
    # The Outlook sync's (issue 17, MA-INV-40).
    OUTLOOK_POLICY = "OUTLOOK_POLICY"
    OUTLOOK_MAILBOX = "OUTLOOK_MAILBOX"
    OUTLOOK_BINDING = "OUTLOOK_BINDING"


class Action(StrEnum):
    MEETING_CREATED = "MEETING_CREATED"
    MEETING_UPDATED = "MEETING_UPDATED"
    MEETING_CANCELLED = "MEETING_CANCELLED"
    MEETING_DELETED = "MEETING_DELETED"
    REQUIRED_ATTENDEES_UPDATED = "REQUIRED_ATTENDEES_UPDATED"
    QR_CODES_REGENERATED = "QR_CODES_REGENERATED"
    SERIES_CREATED = "SERIES_CREATED"
    SERIES_UPDATED = "SERIES_UPDATED"
    SERIES_RESCHEDULED = "SERIES_RESCHEDULED"
    SERIES_DELETED = "SERIES_DELETED"
    TEMPLATE_CREATED = "TEMPLATE_CREATED"
    TEMPLATE_UPDATED = "TEMPLATE_UPDATED"
    TEMPLATE_DELETED = "TEMPLATE_DELETED"
    CHECK_IN = "CHECK_IN"
    GUEST_CHECK_IN = "GUEST_CHECK_IN"
    ATTENDANCE_CREATED = "ATTENDANCE_CREATED"
    ATTENDANCE_CORRECTED = "ATTENDANCE_CORRECTED"
    GUEST_DATA_ERASED = "GUEST_DATA_ERASED"
    USER_ROLES_CHANGED = "USER_ROLES_CHANGED"
    # The agenda's ten (spec §审计扩展; written by issue 11).
    AGENDA_SECTION_CREATED = "AGENDA_SECTION_CREATED"
    AGENDA_SECTION_UPDATED = "AGENDA_SECTION_UPDATED"
    AGENDA_SECTION_DELETED = "AGENDA_SECTION_DELETED"
    AGENDA_ITEM_CREATED = "AGENDA_ITEM_CREATED"
    AGENDA_ITEM_UPDATED = "AGENDA_ITEM_UPDATED"
    AGENDA_ITEM_DELETED = "AGENDA_ITEM_DELETED"
    UPLOAD_TASK_ASSIGNED = "UPLOAD_TASK_ASSIGNED"
    UPLOAD_TASK_CANCELLED = "UPLOAD_TASK_CANCELLED"
    ATTACHMENT_UPLOADED = "ATTACHMENT_UPLOADED"
    ATTACHMENT_DELETED = "ATTACHMENT_DELETED"
    # Beyond the spec's ten: an administrator's restore inside the purge window (issue 11).
    ATTACHMENT_RESTORED = "ATTACHMENT_RESTORED"
    # The Outlook sync's (issue 17, MA-INV-40).
    OUTLOOK_POLICY_UPDATED = "OUTLOOK_POLICY_UPDATED"
    OUTLOOK_MAILBOX_ADDED = "OUTLOOK_MAILBOX_ADDED"
    OUTLOOK_MAILBOX_RESYNC_REQUESTED = "OUTLOOK_MAILBOX_RESYNC_REQUESTED"
    OUTLOOK_MAILBOX_REPLAY_REQUESTED = "OUTLOOK_MAILBOX_REPLAY_REQUESTED"
    OUTLOOK_MAILBOX_DISABLED = "OUTLOOK_MAILBOX_DISABLED"
    OUTLOOK_BINDING_CREATED = "OUTLOOK_BINDING_CREATED"
    OUTLOOK_BINDING_TAKEN_OVER = "OUTLOOK_BINDING_TAKEN_OVER"
    OUTLOOK_BINDING_RELEASED = "OUTLOOK_BINDING_RELEASED"
    OUTLOOK_EXCLUSION_ADDED = "OUTLOOK_EXCLUSION_ADDED"
    OUTLOOK_EXCLUSION_REMOVED = "OUTLOOK_EXCLUSION_REMOVED"
    OUTLOOK_SERIES_TRUNCATED = "OUTLOOK_SERIES_TRUNCATED"


def jsonable(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    return value


def _check(value: Any) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            if key.lower() in PERSONAL_KEYS:
                raise ValueError(f"audit changes may not carry {key!r}: refer to the row that holds it by id")
            _check(inner)
    elif isinstance(value, list):
        for inner in value:
            _check(inner)


def actor_columns(actor: Actor | None) -> tuple[str, str | None]:
    if actor is None:
        return "system", None
    return actor.type if actor.type != "anonymous" else "system", actor.id


async def record(session: AsyncSession, *, action: Action, resource: Resource, resource_id: object, now: datetime,
                 actor: Actor | None, meeting_id: str | None = None, series_id: uuid.UUID | None = None,
                 before: dict[str, Any] | None = None, after: dict[str, Any] | None = None,
                 **flags: Any) -> None:
    """Append one row in the caller's transaction (so it exists exactly when the change committed)."""
    changes = jsonable({"entityId": resource_id, "entityType": resource.value, "before": before, "after": after,
                        **flags})
    _check(changes)
    actor_type, actor_id = actor_columns(actor)
    await session.execute(insert(AuditLog).values(
        occurred_at=now, action=action.value, resource=resource.value, resource_id=str(resource_id),
        meeting_id=meeting_id, series_id=series_id, actor_type=actor_type, actor_id=actor_id,
        request_id=current_request_id(), changes=changes))
