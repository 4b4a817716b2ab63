"""Attendance commands: a manager's record, excuse, mark present / late and undo (their reads, the attendance and
scan lists, are in tenet.meetings.queries).

Every change writes an `attendance_corrections` row holding its note (the note lives only there, MA-INV-12)
and an audit row naming that row. "Undo a check-in with a reason" is a void (D-11): the row becomes VOIDED
(final), the person is ABSENT again if required and may check in anew.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.audit import Actor
from tenet.kernel.db_errors import add_unique
from tenet.kernel.errors import DomainError, PreconditionFailed
from tenet.kernel.transitions import Refusal, transition
from tenet.meetings import audit, errors, lifecycles, service
from tenet.meetings.audit import Action, Resource
from tenet.meetings.models import ATTENDANCE_USER_LIVE_INDEX, Attendance, AttendanceCorrection, Meeting

_NEEDS_NOTE = {"EXCUSED", "VOIDED"}
# target status -> the declared transition that reaches it
_TRANSITIONS = {"PRESENT": "mark_present", "LATE": "mark_late", "EXCUSED": "excuse", "VOIDED": "void"}


def _note(status: str, note: str | None) -> str | None:
    if status in _NEEDS_NOTE and not (note or "").strip():
        raise errors.AttendanceNoteRequired(requested_status=status)
    return (note or "").strip() or None


async def _correction(session: AsyncSession, *, attendance_id: uuid.UUID, before: str | None, after: str,
                      note: str | None, actor_id: uuid.UUID, now: datetime) -> uuid.UUID:
    correction = AttendanceCorrection(id=uuid.uuid4(), attendance_id=attendance_id, from_status=before,
                                      to_status=after, note=note, actor_id=actor_id, occurred_at=now)
    session.add(correction)
    await session.flush()
    return correction.id


async def record_attendance(session: AsyncSession, *, meeting_id: str, user_id: uuid.UUID, status: str,
                            note: str | None, checked_in_at: datetime | None, principal_id: uuid.UUID,
                            now: datetime) -> Attendance:
    """A manager records a user's attendance (an absent attendee has no row to change): PRESENT, LATE or
    EXCUSED, status_source MANUAL."""
    note = _note(status, note)
    await service.require_users(session, [user_id])
    meeting = await service.lock_meeting(session, meeting_id)
    if meeting.status == "CANCELLED":
        raise errors.MeetingCancelled(meeting_id=meeting_id)
    existing = (await session.scalars(select(Attendance.id).where(
        Attendance.meeting_id == meeting_id, Attendance.user_id == user_id, Attendance.status != "VOIDED"))).first()
    if existing is not None:
        raise errors.AttendanceExists(attendance_id=str(existing))
    row = Attendance(id=uuid.uuid4(), meeting_id=meeting_id, subject_type="USER", user_id=user_id, status=status,
                     status_source="MANUAL",
                     checked_in_at=(checked_in_at or now) if status in ("PRESENT", "LATE") else None,
                     created_at=now, updated_at=now, version=1)
    await add_unique(session, row, on_violation={
        ATTENDANCE_USER_LIVE_INDEX: lambda: errors.AttendanceExists(user_id=str(user_id))})
    correction_id = await _correction(session, attendance_id=row.id, before=None, after=status, note=note,
                                      actor_id=principal_id, now=now)
    await audit.record(session, action=Action.ATTENDANCE_CREATED, resource=Resource.ATTENDANCE, resource_id=row.id,
                       meeting_id=meeting_id, now=now, actor=Actor.user(principal_id), before=None,
                       after={"status": status, "user_id": user_id}, correctionId=correction_id)
    return row


def _refusal(refusal: Refusal[Attendance]) -> DomainError:
    if refusal.reason == "missing":
        return errors.AttendanceNotFound()
    if refusal.reason == "version":
        return PreconditionFailed(current_version=refusal.version)
    if refusal.status == "VOIDED":
        return errors.AttendanceVoided()
    return errors.AttendanceStatusInvalid(current_status=refusal.status)


async def correct_attendance(session: AsyncSession, *, attendance_id: uuid.UUID, status: str, note: str | None,
                             expected_version: int | None, principal_id: uuid.UUID, now: datetime) -> Attendance:
    """PRESENT / LATE / EXCUSED set by a manager (status_source MANUAL: a later reschedule leaves it alone), or
    ABSENT: the undo (VOIDED). The meeting row is locked first (lock order), then the attendance moves by one
    conditional UPDATE."""
    target = "VOIDED" if status == "ABSENT" else status
    note = _note(target, note)
    current = await session.get(Attendance, attendance_id, populate_existing=True)
    if current is None:
        raise errors.AttendanceNotFound()
    meeting = await session.get(Meeting, current.meeting_id)
    if meeting is None or meeting.status == "DELETED":
        raise errors.AttendanceNotFound()
    await service.lock_meeting(session, current.meeting_id)
    current = await session.get(Attendance, attendance_id, populate_existing=True)
    assert current is not None
    if expected_version is not None and current.version != expected_version:
        raise PreconditionFailed(current_version=current.version)
    if current.status == "VOIDED":
        raise errors.AttendanceVoided()
    if target == "EXCUSED" and current.subject_type != "USER":
        raise errors.AttendanceStatusInvalid("Only users can be excused", requested_status=target)
    if current.status == target:
        return current
    values: dict[str, Any] = {"updated_at": now}
    if target == "VOIDED":
        values |= {"voided_at": now, "voided_by_id": principal_id}
    else:
        values |= {"status_source": "MANUAL"}
        if target in ("PRESENT", "LATE") and current.checked_in_at is None:
            values["checked_in_at"] = now
    before = current.status
    moved = await transition(session, lifecycles.ATTENDANCE, _TRANSITIONS[target], model=Attendance,
                             id=attendance_id, values=values, expected_version=expected_version, refuse=_refusal)
    correction_id = await _correction(session, attendance_id=attendance_id, before=before, after=target, note=note,
                                      actor_id=principal_id, now=now)
    await audit.record(session, action=Action.ATTENDANCE_CORRECTED, resource=Resource.ATTENDANCE,
                       resource_id=attendance_id, meeting_id=current.meeting_id, now=now,
                       actor=Actor.user(principal_id), before={"status": before}, after={"status": target},
                       correctionId=correction_id)
    return moved
