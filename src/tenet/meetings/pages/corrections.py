"""Excuse or undo an attendance from the live board (issue 18), with a reason: the API's own commands
(`attendances.record_attendance` for an absent attendee, who has no row yet; `correct_attendance` for a live row,
ABSENT being the undo), offered to holders of `meeting:attendance:manage`, the point the API's routes check. The
form is a page of its own (the board refreshes itself every few seconds and would swap a half-typed reason away)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from tenet.deps import reads
from tenet.kernel.errors import DomainError, ValidationFailed
from tenet.kernel.pagination import PageParams
from tenet.meetings import attendances, queries
from tenet.meetings.permissions import Permission
from tenet.web import console
from tenet.web.console import PREFIX, ConsoleRoute, Viewer

router = APIRouter(prefix=PREFIX, include_in_schema=False, route_class=ConsoleRoute)
CHOICES = {"absent": ("EXCUSED",), "live": ("EXCUSED", "ABSENT", "PRESENT", "LATE")}


def _uuid(value: str | None, name: str) -> uuid.UUID | None:
    if not value:
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        raise ValidationFailed(f"{name} must be an id", field=name) from None


async def _row(request: Request, viewer: Viewer, meeting_id: str, *, attendance_id: uuid.UUID | None,
               user_id: uuid.UUID | None) -> dict[str, Any]:
    """The board's row of the person (the list's query): by its attendance, or an absent attendee by account."""
    principal = viewer.principal
    assert principal is not None
    if attendance_id is not None:
        rows, _ = await queries.attendances(reads(request), meeting_id=meeting_id, principal=principal, status=None,
                                            subject_type=None, page=PageParams(limit=1), attendance_id=attendance_id)
    else:
        cursor: str | None = None
        rows = []
        while True:
            page, cursor = await queries.attendances(reads(request), meeting_id=meeting_id, principal=principal,
                                                     status="ABSENT", subject_type="USER",
                                                     page=PageParams(limit=200, cursor=cursor))
            rows = [r for r in page if r["user_id"] == user_id and r["id"] is None]
            if rows or cursor is None:
                break
    if not rows:
        raise ValidationFailed("No such attendance on this meeting's board", field="attendance_id")
    return rows[0]


def _page(request: Request, viewer: Viewer, meeting_id: str, row: dict[str, Any], *, note: str = "",
          problem: str | None = None, status_code: int = 200) -> Response:
    return console.render(request, viewer, "meetings/correction.html", status_code=status_code, active="meetings",
                          meeting_id=meeting_id, row=row, choices=CHOICES["absent" if row["id"] is None else "live"],
                          note=note, problem=problem)


@router.get("/meetings/{meeting_id}/correction")
async def correction_form(request: Request, meeting_id: str,
                          attendance_id: Annotated[str | None, Query(max_length=40)] = None,
                          user_id: Annotated[str | None, Query(max_length=40)] = None) -> Response:
    viewer = await console.signed_in(request)
    viewer.require(Permission.ATTENDANCE_MANAGE)
    row = await _row(request, viewer, meeting_id, attendance_id=_uuid(attendance_id, "attendance_id"),
                     user_id=_uuid(user_id, "user_id"))
    return _page(request, viewer, meeting_id, row)


@router.post("/meetings/{meeting_id}/correction")
async def correct(request: Request, meeting_id: str) -> Response:
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    principal = viewer.require(Permission.ATTENDANCE_MANAGE)
    attendance_id = _uuid(str(form.get("attendance_id", "")), "attendance_id")
    user_id = _uuid(str(form.get("user_id", "")), "user_id")
    row = await _row(request, viewer, meeting_id, attendance_id=attendance_id, user_id=user_id)
    status, note = str(form.get("status", "")), str(form.get("note", "")).strip()[:500] or None
    version = str(form.get("version", ""))
    try:
        if status not in CHOICES["absent" if row["id"] is None else "live"]:
            raise ValidationFailed("Not a status this attendance can take", field="status")
        async with request.app.state.db.unit_of_work() as session:
            if row["id"] is None:
                await attendances.record_attendance(session, meeting_id=queries.valid_meeting_id(meeting_id),
                                                    user_id=row["user_id"], status=status, note=note,
                                                    checked_in_at=None, principal_id=principal.id,
                                                    now=console.now(request))
            else:
                await attendances.correct_attendance(session, attendance_id=row["id"], status=status, note=note,
                                                     expected_version=int(version) if version.isdigit() else None,
                                                     principal_id=principal.id, now=console.now(request))
    except DomainError as exc:
        if exc.status >= 500 or exc.status in (401, 403, 404):
            raise
        fresh = await _row(request, viewer, meeting_id, attendance_id=attendance_id, user_id=user_id) \
            if exc.status != 409 else row
        return _page(request, viewer, meeting_id, fresh, note=note or "", problem=str(exc.code),
                     status_code=exc.status)
    return console.see_other(f"{PREFIX}/meetings/{meeting_id}#board")
