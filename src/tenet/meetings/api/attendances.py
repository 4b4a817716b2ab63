"""Attendance routes: the list and scan log of a meeting, a manager's record / excuse / undo. Commands are
tenet.meetings.attendances'; a command's answer is read back through the query its GET uses (`queries.attendances`),
in the command's transaction."""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.deps import NowDep, SessionDep, reads
from tenet.iam.auth import require
from tenet.iam.principal import Principal
from tenet.kernel.http import TenetRoute, etag, if_match_version, json_response, problem_responses
from tenet.kernel.pagination import Page, PageParams, page_params
from tenet.kernel.statements import statements
from tenet.meetings import attendances, queries
from tenet.meetings.permissions import TAG, Permission
from tenet.meetings.schemas import AttendanceCreate, AttendanceRead, AttendanceStatus, AttendanceUpdate, ScanRead

router = APIRouter(prefix=queries.BASE, tags=[TAG], route_class=TenetRoute, responses=problem_responses(401, 403, 404))
Reader = Annotated[Principal, Depends(require(Permission.READ))]
AttendanceManager = Annotated[Principal, Depends(require(Permission.ATTENDANCE_MANAGE))]
PageDep = Annotated[PageParams, Depends(page_params)]


async def _row(session: AsyncSession, meeting_id: str, attendance_id: uuid.UUID,
               principal: Principal) -> AttendanceRead:
    """The attendance as the list shows it, read by the list's query inside the writing transaction."""
    await session.flush()
    rows, _ = await queries.attendances(await statements(session), meeting_id=meeting_id, principal=principal,
                                        status=None, subject_type=None, page=PageParams(limit=1),
                                        attendance_id=attendance_id)
    return AttendanceRead.model_validate(rows[0])


@router.get("/meetings/{meeting_id}/attendances", response_model=Page[AttendanceRead],
            summary="Attendances of a meeting (managers, creator, organizer)",
            description="Required attendees first (ABSENT when they have no attendance), then walk-ins, then "
                        "guests; each with the latest correction note.", responses=problem_responses(400, 403))
async def list_attendances(
    meeting_id: str, principal: Reader, request: Request, params: PageDep,
    status: AttendanceStatus | None = None,
    subject_type: Annotated[Literal["USER", "GUEST"] | None, Query()] = None,
) -> Response:
    rows, cursor = await queries.attendances(reads(request), meeting_id=meeting_id, principal=principal,
                                             status=status.value if status else None, subject_type=subject_type,
                                             page=params)
    return json_response(Page[AttendanceRead](items=[AttendanceRead.model_validate(r) for r in rows],
                                              next_cursor=cursor))


@router.get("/meetings/{meeting_id}/scans", response_model=Page[ScanRead],
            summary="Every check-in attempt of a meeting, accepted or refused, newest first",
            responses=problem_responses(400, 403))
async def list_scans(
    meeting_id: str, principal: Reader, request: Request, params: PageDep,
    outcome: Annotated[Literal["ACCEPTED", "ALREADY_CHECKED_IN", "REFUSED"] | None, Query()] = None,
) -> Response:
    rows, cursor = await queries.scans(reads(request), meeting_id=meeting_id, principal=principal, outcome=outcome,
                                       page=params)
    return json_response(Page[ScanRead](items=[ScanRead.model_validate({**r, "id": r["scan_id"]}) for r in rows],
                                        next_cursor=cursor))


@router.post("/meetings/{meeting_id}/attendances", status_code=201, response_model=AttendanceRead,
             summary="Record a user's attendance (attendance managers)",
             description="PRESENT, LATE or EXCUSED (a note is required to excuse). A person with a live "
                         "attendance answers 409 `ATTENDANCE_EXISTS`: change that one instead.",
             responses=problem_responses(409, 422))
async def record_attendance(meeting_id: str, body: AttendanceCreate, principal: AttendanceManager, session: SessionDep,
                            now: NowDep) -> Response:
    row = await attendances.record_attendance(
        session, meeting_id=queries.valid_meeting_id(meeting_id), user_id=body.user_id, status=body.status,
        note=body.note, checked_in_at=body.checked_in_at, principal_id=principal.id, now=now)
    answer = await _row(session, meeting_id, row.id, principal)
    return json_response(answer, status_code=201, headers={"ETag": etag(row.version)})


@router.patch("/attendances/{attendance_id}", response_model=AttendanceRead,
              summary="Correct an attendance: present, late, excused, or ABSENT to undo it",
              description="A note is required to excuse or undo; it is kept with the correction, never in the "
                          "audit log. Undoing (ABSENT) voids the row: final, and the person may check in again. "
                          "`If-Match` takes the attendance's version.",
              responses=problem_responses(409, 412, 422))
async def correct_attendance(attendance_id: uuid.UUID, body: AttendanceUpdate, principal: AttendanceManager,
                             session: SessionDep, now: NowDep,
                             if_match: Annotated[str | None, Header(alias="If-Match")] = None) -> Response:
    row = await attendances.correct_attendance(
        session, attendance_id=attendance_id, status=body.status.value, note=body.note,
        expected_version=if_match_version(if_match), principal_id=principal.id, now=now)
    if row.status == "VOIDED":
        voided = {"id": row.id, "meeting_id": row.meeting_id, "subject_type": row.subject_type,
                  "user_id": row.user_id, "guest_id": row.guest_id, "display_name": None, "email": None,
                  "organization": None, "required": False, "status": "ABSENT", "status_source": row.status_source,
                  "mode": row.mode, "checked_in_at": row.checked_in_at, "note": body.note, "version": row.version}
        return json_response(AttendanceRead.model_validate(voided), headers={"ETag": etag(row.version)})
    answer = await _row(session, row.meeting_id, row.id, principal)
    return json_response(answer, headers={"ETag": etag(row.version)})
