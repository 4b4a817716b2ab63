"""A manager's changes of attendances (record, excuse, mark present / late, undo) and the attendance and scan
lists of a meeting.

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

from tenet.iam.principal import Principal
from tenet.kernel.audit import Actor
from tenet.kernel.db_errors import add_unique
from tenet.kernel.errors import DomainError, PreconditionFailed
from tenet.kernel.pagination import PageParams, SqlKeyset
from tenet.kernel.reads import Reads
from tenet.kernel.transitions import Refusal, transition
from tenet.meetings import audit, errors, lifecycles, queries, service
from tenet.meetings.audit import Action, Resource
from tenet.meetings.models import ATTENDANCE_USER_LIVE_INDEX, Attendance, AttendanceCorrection, Meeting
from tenet.meetings.permissions import Action as TableAction

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
                            note: str | None, checked_in_at: datetime | None, actor_id: uuid.UUID,
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
                                      actor_id=actor_id, now=now)
    await audit.record(session, action=Action.ATTENDANCE_CREATED, resource=Resource.ATTENDANCE, resource_id=row.id,
                       meeting_id=meeting_id, now=now, actor=Actor.user(actor_id), before=None,
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
                             expected_version: int | None, actor_id: uuid.UUID, now: datetime) -> Attendance:
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
        values |= {"voided_at": now, "voided_by_id": actor_id}
    else:
        values |= {"status_source": "MANUAL"}
        if target in ("PRESENT", "LATE") and current.checked_in_at is None:
            values["checked_in_at"] = now
    before = current.status
    moved = await transition(session, lifecycles.ATTENDANCE, _TRANSITIONS[target], model=Attendance,
                             id=attendance_id, values=values, expected_version=expected_version, refuse=_refusal)
    correction_id = await _correction(session, attendance_id=attendance_id, before=before, after=target, note=note,
                                      actor_id=actor_id, now=now)
    await audit.record(session, action=Action.ATTENDANCE_CORRECTED, resource=Resource.ATTENDANCE,
                       resource_id=attendance_id, meeting_id=current.meeting_id, now=now, actor=Actor.user(actor_id),
                       before={"status": before}, after={"status": target}, correctionId=correction_id)
    return moved


# --- reads -----------------------------------------------------------------------------------------------

LIST_KEYSET = SqlKeyset(("grp", "sort_name", "sort_key"), (int, str, str))
ATTENDANCES_SQL = """
    WITH caller AS ({meeting}),
    listed AS (
        SELECT 0 AS grp, u.display_name AS sort_name, r.user_id::text AS sort_key, a.id, 'USER' AS subject_type,
               r.user_id, NULL::uuid AS guest_id, u.display_name, u.email, NULL AS organization, true AS required,
               coalesce(a.status, 'ABSENT') AS status, a.status_source, a.mode, a.checked_in_at, a.version
          FROM meeting_attendance.meeting_required_attendees r
          JOIN iam.user_account u ON u.id = r.user_id
          LEFT JOIN meeting_attendance.attendances a
                 ON a.meeting_id = r.meeting_id AND a.user_id = r.user_id AND a.status <> 'VOIDED'
         WHERE r.meeting_id = %(id)s
        UNION ALL
        SELECT 1, u.display_name, a.user_id::text, a.id, 'USER', a.user_id, NULL, u.display_name, u.email, NULL,
               false, a.status, a.status_source, a.mode, a.checked_in_at, a.version
          FROM meeting_attendance.attendances a
          JOIN iam.user_account u ON u.id = a.user_id
         WHERE a.meeting_id = %(id)s AND a.status <> 'VOIDED'
           AND NOT EXISTS (SELECT 1 FROM meeting_attendance.meeting_required_attendees r
                            WHERE r.meeting_id = a.meeting_id AND r.user_id = a.user_id)
        UNION ALL
        SELECT 2, coalesce(g.name, ''), g.id::text, a.id, 'GUEST', NULL, g.id, g.name, g.email, g.organization,
               false, a.status, a.status_source, a.mode, a.checked_in_at, a.version
          FROM meeting_attendance.attendances a
          JOIN meeting_attendance.guests g ON g.id = a.guest_id
         WHERE a.meeting_id = %(id)s AND a.status <> 'VOIDED'),
    page AS (
        SELECT listed.*, (SELECT c.note FROM meeting_attendance.attendance_corrections c
                           WHERE c.attendance_id = listed.id ORDER BY c.occurred_at DESC, c.id LIMIT 1) AS note
          FROM listed
         WHERE {filters} AND {after} AND EXISTS (SELECT 1 FROM caller)
         ORDER BY {order} LIMIT %(limit)s)
    SELECT caller.id AS meeting_row, caller.created_by_id, caller.organizer_id, caller.is_required,
           caller.my_attendance_id, page.*
      FROM caller LEFT JOIN page ON TRUE ORDER BY page.grp, page.sort_name, page.sort_key
"""


async def attendances(reads: Reads, *, meeting_id: str, principal: Principal, status: str | None,
                      subject_type: str | None, page: PageParams,
                      attendance_id: uuid.UUID | None = None) -> tuple[list[dict[str, Any]], str | None]:
    """Required attendees (ABSENT when they have no live attendance), then walk-ins, then guests."""
    filters: list[str] = ["TRUE"]
    params: dict[str, object] = {}
    if attendance_id is not None:
        filters.append("listed.id = %(attendance_id)s")
        params["attendance_id"] = attendance_id
    if status is not None:
        filters.append("listed.status = %(status)s")
        params["status"] = status
    if subject_type is not None:
        filters.append("listed.subject_type = %(subject_type)s")
        params["subject_type"] = subject_type
    after, after_params = LIST_KEYSET.after(page)
    sql = ATTENDANCES_SQL.format(meeting=queries.MEETING_SQL, filters=" AND ".join(filters), after=after,
                                 order=LIST_KEYSET.order_by)
    rows = await reads.all(sql, {"id": queries.valid_meeting_id(meeting_id), "caller": principal.id,
                                 "limit": LIST_KEYSET.fetch_limit(page), **params, **after_params})
    queries.require(rows[0] if rows else None, principal, TableAction.LIST_ATTENDANCES)
    found = [r for r in rows if r["grp"] is not None]
    items, cursor = LIST_KEYSET.page(found, page, key=lambda r: (r["grp"], r["sort_name"], r["sort_key"]))
    return [{**r, "meeting_id": meeting_id} for r in items], cursor


SCANS_KEYSET = SqlKeyset(("s.id",), (int,), descending=True)
SCANS_SQL = """
    WITH caller AS ({meeting}),
    page AS (
        SELECT s.id, s.occurred_at, s.channel, s.mode, s.user_id, s.guest_id, s.attendance_id, s.outcome, s.reason
          FROM meeting_attendance.checkin_scans s
         WHERE s.meeting_id = %(id)s AND {filters} AND {after} AND EXISTS (SELECT 1 FROM caller)
         ORDER BY {order} LIMIT %(limit)s)
    SELECT caller.id AS meeting_row, caller.created_by_id, caller.organizer_id, caller.is_required,
           caller.my_attendance_id, page.id AS scan_id, page.*
      FROM caller LEFT JOIN page ON TRUE ORDER BY page.id DESC
"""


async def scans(reads: Reads, *, meeting_id: str, principal: Principal, outcome: str | None,
                page: PageParams) -> tuple[list[dict[str, Any]], str | None]:
    """Every scan of a meeting, newest first (device ids and addresses are not shown)."""
    filters, params = "TRUE", {}
    if outcome is not None:
        filters, params = "s.outcome = %(outcome)s", {"outcome": outcome}
    after, after_params = SCANS_KEYSET.after(page)
    sql = SCANS_SQL.format(meeting=queries.MEETING_SQL, filters=filters, after=after, order=SCANS_KEYSET.order_by)
    rows = await reads.all(sql, {"id": queries.valid_meeting_id(meeting_id), "caller": principal.id,
                                 "limit": SCANS_KEYSET.fetch_limit(page), **params, **after_params})
    queries.require(rows[0] if rows else None, principal, TableAction.LIST_ATTENDANCES)
    found = [r for r in rows if r["scan_id"] is not None]
    items, cursor = SCANS_KEYSET.page(found, page, key=lambda r: (r["scan_id"],))
    return items, cursor
